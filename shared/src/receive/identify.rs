//! Identifying a verified body: its event id, type and payload hashes, or the reply that ends
//! the delivery there (a Slack challenge, a body that cannot be identified).

use super::kept::Kept;
use hookledger_verify::extract::{EventMeta, Extracted};
use http::HeaderMap;

use super::log::Trace;
use super::outcome::Outcome;
use super::reply::Reply;
use crate::config::SourceConfig;

/// What a verified delivery carries: one event, or a batch of them (each with its own bytes:
/// `EventMeta::document` is the item as received).
#[derive(Debug)]
pub(super) enum Identified<'b> {
    /// One event; its bytes are the delivery's body.
    One(EventMeta<'b>, Kept<'b>),
    /// Several, in the delivery's order.
    Batch(Vec<(EventMeta<'b>, Kept<'b>)>),
}

/// Reads the event id, type and payload hashes from a verified body: the event, or the reply
/// that ends the delivery here (a Slack challenge, or a 4xx/5xx for a body that cannot be
/// identified). Fills `trace`'s event id and type.
#[allow(clippy::result_large_err)]
pub(super) fn identify<'b>(
    trace: &mut Trace<'_>,
    config: &SourceConfig,
    headers: &'b HeaderMap,
    body: &'b [u8],
) -> Result<Identified<'b>, Reply> {
    let meta = match config.verifier.extract(headers, body) {
        Ok(Extracted::Event(meta)) => meta,
        Ok(Extracted::Batch(items)) => {
            // A batch (SendGrid, HubSpot): every item is identified before anything is
            // claimed, so an item that cannot be read fails the whole delivery with a 400.
            trace.detail = Some(format!("batch of {} events", items.len()));
            let mut events = Vec::with_capacity(items.len());
            for meta in items {
                match hookledger_verify::identity::payload_hashes(config.scheme, &meta.document) {
                    Ok(hashes) => {
                        let kept = kept_of(config, &meta, hashes);
                        events.push((meta, kept));
                    }
                    Err(error) => {
                        trace.detail = Some(format!("batch item: {error}"));
                        return Err(Reply::error(400, Outcome::BadRequest, error.reason()));
                    }
                }
            }
            return Ok(Identified::Batch(events));
        }
        Ok(Extracted::Challenge(challenge)) => {
            // Slack's url_verification handshake: signed, answered, not an event.
            return Err(Reply {
                content_type: "application/json",
                status: 200,
                body: serde_json::json!({ "challenge": challenge }).to_string(),
                replayed: false,
                retry_after: None,
                outcome: Outcome::Challenge,
            });
        }
        Ok(Extracted::Handshake { handshake, token }) => {
            // A preset's handshake (Zoom, Discord, Twitch): signed, answered, not an event.
            let Some(key) = config.verifier.key(trace.key_index.unwrap_or(0)) else {
                return Err(Reply::error(500, Outcome::InternalError, "internal error"));
            };
            let answer = handshake.answer(&token, key);
            return Err(Reply {
                status: 200,
                content_type: answer.content_type,
                body: answer.body,
                replayed: false,
                retry_after: None,
                outcome: Outcome::Challenge,
            });
        }
        // A generic source without an event id rule: start-up validation should have
        // refused it, so it is our fault (5xx, the provider retries), not the sender's.
        Err(error @ hookledger_verify::extract::ExtractError::NoRule) => {
            trace.detail = Some(error.to_string());
            return Err(Reply::error(500, Outcome::InternalError, "internal error"));
        }
        Err(error) => {
            trace.detail = Some(error.to_string());
            return Err(Reply::error(400, Outcome::BadRequest, error.reason()));
        }
    };
    trace.event_id = Some(meta.event_id.clone().into_owned());
    trace.event_type = Some(meta.event_type.clone().into_owned());
    // The full-body digest (audit) and the payload identity (what a retry must match:
    // Stripe re-renders `pending_webhooks` at each attempt), in one pass when they agree.
    match hookledger_verify::identity::payload_hashes(config.scheme, body) {
        Ok(hashes) => {
            let kept = Kept::of(config, &meta.event_id, body, &meta.document, hashes);
            Ok(Identified::One(meta, kept))
        }
        Err(error) => {
            trace.detail = Some(error.to_string());
            Err(Reply::error(400, Outcome::BadRequest, error.reason()))
        }
    }
}

/// A batch item's [`Kept`]: of its own bytes (`EventMeta::document`), which it borrows from
/// the delivery's body where the extraction did.
fn kept_of<'b>(
    config: &SourceConfig,
    meta: &EventMeta<'b>,
    hashes: hookledger_verify::identity::PayloadHashes,
) -> Kept<'b> {
    match &meta.document {
        std::borrow::Cow::Borrowed(bytes) => Kept::of(config, &meta.event_id, bytes, bytes, hashes),
        std::borrow::Cow::Owned(bytes) => {
            let kept = Kept::of(config, &meta.event_id, bytes, bytes, hashes);
            Kept {
                hashes: kept.hashes,
                unfinished: kept
                    .unfinished
                    .map(|c| std::borrow::Cow::Owned(c.into_owned())),
                completed: kept
                    .completed
                    .map(|c| std::borrow::Cow::Owned(c.into_owned())),
                subject: kept.subject,
            }
        }
    }
}
