//! Twitch EventSub (webhook transport): `Twitch-Eventsub-Message-Signature: sha256=<hex>`,
//! HMAC-SHA256 keyed with the subscription's secret over the message id, the timestamp (RFC 3339)
//! and the body, concatenated (Twitch docs, "Handling webhook events",
//! <https://dev.twitch.tv/docs/eventsub/handling-webhook-events>).
//!
//! - Handshake: a delivery with `Twitch-Eventsub-Message-Type: webhook_callback_verification`
//!   is answered with the body's `challenge`, as `text/plain`, and never recorded.
//! - The id is `Twitch-Eventsub-Message-Id` (signed: it is in the signed content); the type is
//!   the body's `subscription.type`, except for a revocation (the signed body has a
//!   `subscription` but neither `event` nor `challenge`), typed `revocation`.
//! - Twitch retries a notification while it is unsure it arrived and revokes the subscription
//!   after repeated failures; the horizon is one day.

use super::{Handshake, Preset};
use crate::generic::{GenericHmac, TimestampUnit};
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Twitch,
        provider: "Twitch EventSub",
        model: Some(GenericHmac {
            signature_header: Some("Twitch-Eventsub-Message-Signature".into()),
            prefix: Some("sha256=".into()),
            timestamp_header: Some("Twitch-Eventsub-Message-Timestamp".into()),
            timestamp_unit: TimestampUnit::Rfc3339,
            signed_payload: Some("{header:Twitch-Eventsub-Message-Id}{timestamp}{body}".into()),
            event_id_header: Some("Twitch-Eventsub-Message-Id".into()),
            event_type_pointer: Some("/subscription/type".into()),
            ..GenericHmac::default()
        }),
        signed: "HMAC-SHA256 of message id + timestamp + body",
        event_id: "header `Twitch-Eventsub-Message-Id` (signed)",
        event_type: "body `subscription.type`; `revocation` for a revocation",
        retry_horizon_hours: 24,
        default_tolerance_secs: None,
        handshake: Some(Handshake::TwitchCallbackVerification),
        batch: false,
        replay: false,
        source: "https://dev.twitch.tv/docs/eventsub/handling-webhook-events",
    }
}

/// The event type of a Twitch message whose signed `body` is a revocation: `revocation`, so a
/// handler of `channel.follow` never reads a revoked subscription (whose body names that type)
/// as a follow. Read from the signed body, not the unsigned message-type header: a revocation
/// is the only message with a `subscription` and neither an `event` nor a `challenge`. `None`
/// for any other message.
pub(crate) fn revocation_type(body: &serde_json::Value) -> Option<String> {
    (body.pointer("/subscription").is_some()
        && body.pointer("/event").is_none()
        && body.pointer("/challenge").is_none())
    .then(|| "revocation".to_owned())
}
