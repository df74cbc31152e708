//! Event id and type extraction, per scheme, from a verified delivery (DESIGN.md section 3.4).
//!
//! | scheme | event id | event type |
//! |---|---|---|
//! | Stripe | body `id` | body `type` |
//! | GitHub | header `X-GitHub-Delivery` | header `X-GitHub-Event` |
//! | Standard Webhooks | header `webhook-id` (or `svix-id`) | body `type` |
//!
//! The body must be a JSON object for every scheme (it is parsed once, here, after the
//! signature has been checked). A missing id is an error: idempotency is never skipped silently.

use std::borrow::Cow;

use http::HeaderMap;
use serde::Deserialize;

use crate::verify::Scheme;

/// Longest accepted event id, bytes (the ledger's CHECK constraint says the same).
pub const MAX_EVENT_ID_BYTES: usize = 255;

/// Longest accepted event type, bytes.
pub const MAX_EVENT_TYPE_BYTES: usize = 255;

/// GitHub: the delivery's unique id (a GUID), the ledger's event id.
pub const GITHUB_DELIVERY_HEADER: &str = "x-github-delivery";
/// GitHub: the event name, e.g. `push`.
pub const GITHUB_EVENT_HEADER: &str = "x-github-event";
/// Standard Webhooks: the message id, also part of the signed content.
pub const WEBHOOK_ID_HEADER: &str = "webhook-id";
/// Svix's name for [`WEBHOOK_ID_HEADER`].
pub const SVIX_ID_HEADER: &str = "svix-id";

/// What identifies an event in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventMeta<'a> {
    /// The provider's event id, 1 to [`MAX_EVENT_ID_BYTES`] bytes.
    pub event_id: Cow<'a, str>,
    /// The provider's event type; empty when the provider sent none.
    pub event_type: Cow<'a, str>,
}

/// Why a verified delivery could not be identified: the receiver answers 400 with
/// [`ExtractError::reason`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// The body is not a JSON object.
    #[error("body is not a JSON object: {0}")]
    NotJson(String),
    /// No event id where the scheme keeps it.
    #[error("missing event id")]
    MissingEventId,
    /// The event id is empty or longer than [`MAX_EVENT_ID_BYTES`].
    #[error("event id must be 1 to 255 bytes")]
    BadEventId,
    /// The event type is longer than [`MAX_EVENT_TYPE_BYTES`].
    #[error("event type longer than 255 bytes")]
    BadEventType,
    /// A header is present more than once or is not visible ASCII.
    #[error("header {0} is malformed")]
    MalformedHeader(&'static str),
}

impl ExtractError {
    /// A short fixed reason, safe to send to the provider.
    pub fn reason(&self) -> &'static str {
        match self {
            ExtractError::NotJson(_) => "body is not a JSON object",
            ExtractError::MissingEventId => "missing event id",
            ExtractError::BadEventId => "event id must be 1 to 255 bytes",
            ExtractError::BadEventType => "event type too long",
            ExtractError::MalformedHeader(_) => "malformed event header",
        }
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow, rename = "type")]
    event_type: Option<Cow<'a, str>>,
}

/// Finds the event id and type of a delivery signed with `scheme`.
///
/// # Errors
/// [`ExtractError`] when the body is not a JSON object, the id is missing or out of bounds,
/// or an id/type header is repeated or not ASCII.
pub fn extract<'a>(
    scheme: Scheme,
    headers: &'a HeaderMap,
    body: &'a [u8],
) -> Result<EventMeta<'a>, ExtractError> {
    let envelope: Envelope<'a> =
        serde_json::from_slice(body).map_err(|e| ExtractError::NotJson(e.to_string()))?;
    let (event_id, event_type) = match scheme {
        Scheme::Stripe => (envelope.id, envelope.event_type),
        Scheme::Github => (
            header(headers, GITHUB_DELIVERY_HEADER)?.map(Cow::Borrowed),
            header(headers, GITHUB_EVENT_HEADER)?.map(Cow::Borrowed),
        ),
        Scheme::StandardWebhooks => {
            let id = match header(headers, WEBHOOK_ID_HEADER)? {
                Some(id) => Some(id),
                None => header(headers, SVIX_ID_HEADER)?,
            };
            (id.map(Cow::Borrowed), envelope.event_type)
        }
    };
    let event_id = event_id.ok_or(ExtractError::MissingEventId)?;
    if event_id.is_empty() || event_id.len() > MAX_EVENT_ID_BYTES {
        return Err(ExtractError::BadEventId);
    }
    let event_type = event_type.unwrap_or(Cow::Borrowed(""));
    if event_type.len() > MAX_EVENT_TYPE_BYTES {
        return Err(ExtractError::BadEventType);
    }
    Ok(EventMeta {
        event_id,
        event_type,
    })
}

/// The single value of header `name` as ASCII text; `None` when absent.
fn header<'a>(headers: &'a HeaderMap, name: &'static str) -> Result<Option<&'a str>, ExtractError> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ExtractError::MalformedHeader(name));
    }
    value
        .to_str()
        .map(|v| Some(v.trim()))
        .map_err(|_| ExtractError::MalformedHeader(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn stripe_takes_id_and_type_from_the_body() {
        let h = HeaderMap::new();
        let meta = extract(
            Scheme::Stripe,
            &h,
            br#"{"id":"evt_1","type":"a.b","data":{}}"#,
        )
        .unwrap();
        assert_eq!(meta.event_id, "evt_1");
        assert_eq!(meta.event_type, "a.b");
    }

    #[test]
    fn github_takes_id_and_type_from_headers() {
        let h = headers(&[("X-GitHub-Delivery", "guid-1"), ("X-GitHub-Event", "push")]);
        let meta = extract(Scheme::Github, &h, br#"{"zen":"x"}"#).unwrap();
        assert_eq!(meta.event_id, "guid-1");
        assert_eq!(meta.event_type, "push");
    }

    #[test]
    fn standard_webhooks_takes_the_id_from_either_header_name() {
        let body = br#"{"type":"user.created","data":{}}"#;
        let h = headers(&[("webhook-id", "msg_1")]);
        assert_eq!(
            extract(Scheme::StandardWebhooks, &h, body)
                .unwrap()
                .event_id,
            "msg_1"
        );
        let h = headers(&[("svix-id", "msg_2")]);
        let meta = extract(Scheme::StandardWebhooks, &h, body).unwrap();
        assert_eq!(meta.event_id, "msg_2");
        assert_eq!(meta.event_type, "user.created");
    }

    #[test]
    fn a_missing_or_oversized_id_is_an_error() {
        let h = HeaderMap::new();
        assert_eq!(
            extract(Scheme::Stripe, &h, br#"{"type":"x"}"#),
            Err(ExtractError::MissingEventId)
        );
        assert_eq!(
            extract(Scheme::Stripe, &h, br#"{"id":""}"#),
            Err(ExtractError::BadEventId)
        );
        let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(256));
        assert_eq!(
            extract(Scheme::Stripe, &h, long.as_bytes()),
            Err(ExtractError::BadEventId)
        );
        assert_eq!(
            extract(Scheme::Github, &h, b"{}"),
            Err(ExtractError::MissingEventId)
        );
    }

    #[test]
    fn an_unreadable_body_is_an_error() {
        let h = headers(&[("X-GitHub-Delivery", "guid-1")]);
        for body in [
            &b"not json"[..],
            b"[1,2]",
            b"{\"id\":",
            b"{} trailing",
            b"\xff\xfe",
        ] {
            assert!(
                matches!(
                    extract(Scheme::Github, &h, body),
                    Err(ExtractError::NotJson(_))
                ),
                "{body:?}"
            );
        }
        // A non-string id is unreadable too, not silently missing.
        assert!(matches!(
            extract(Scheme::Stripe, &h, br#"{"id":42}"#),
            Err(ExtractError::NotJson(_))
        ));
    }

    #[test]
    fn a_repeated_id_header_is_an_error() {
        let h = headers(&[("X-GitHub-Delivery", "a"), ("X-GitHub-Delivery", "b")]);
        assert_eq!(
            extract(Scheme::Github, &h, b"{}"),
            Err(ExtractError::MalformedHeader(GITHUB_DELIVERY_HEADER))
        );
    }
}
