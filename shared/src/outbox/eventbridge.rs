//! `eventbridge`: `PutEvents` to an EventBridge bus, one entry per message.
//!
//! The entry: `EventBusName` = the target's bus, `Source` = the target's `detail_source` or
//! `hookledger.{source}`, `DetailType` = the provider's event type (`webhook` when it sent
//! none), `Detail` = a JSON object:
//!
//! ```json
//! {"source": "stripe", "event_id": "evt_1", "event_type": "invoice.paid",
//!  "idempotency_key": "stripe:evt_1:1", "payload": {"id": "evt_1", "...": "..."}}
//! ```
//!
//! `payload` is the message's payload as it was, as JSON when it parses as JSON (the raw text
//! kept: no number or key order is changed), else as a JSON string (a form-encoded body).
//! EventBridge does not deduplicate and delivers to its targets at least once: a consumer
//! deduplicates on `idempotency_key`.
//!
//! Limit (EventBridge user guide, "Calculating PutEvents event entry size"): an entry, counted
//! as the UTF-8 bytes of `Source`, `DetailType` and `Detail`, is at most [`MAX_ENTRY_BYTES`].

use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use serde::Serialize;
use serde_json::value::RawValue;

use super::aws::{classify, code_is_retryable};
use super::excerpt::excerpt;
use super::{DispatchError, Dispatched, Message};

/// Largest `PutEvents` entry, bytes (256 KB).
pub const MAX_ENTRY_BYTES: usize = 256 * 1024;

/// `DetailType` of an event whose provider sent no type.
pub const UNTYPED_DETAIL_TYPE: &str = "webhook";

/// Puts `message` on `event_bus` (a name or an ARN) as one entry (see the module docs).
///
/// Returns EventBridge's `EventId` as the receipt.
///
/// # Errors
/// [`DispatchError::Fatal`] when the payload is not UTF-8 (a JSON detail cannot carry it), the
/// entry is over [`MAX_ENTRY_BYTES`], or EventBridge refuses the entry or the call for good (a
/// bus that does not exist, access denied, an invalid argument); [`DispatchError::Retryable`]
/// for throttling, internal errors, 5xx, timeouts and network errors. A partial failure
/// (`FailedEntryCount` > 0) is classified by the entry's `ErrorCode`: `ThrottlingException`
/// and `InternalFailure` retryable, any other fatal.
pub async fn send(
    client: &aws_sdk_eventbridge::Client,
    event_bus: &str,
    detail_source: Option<&str>,
    message: &Message,
) -> Result<Dispatched, DispatchError> {
    let entry = Entry::new(message, detail_source)?;
    let output = client
        .put_events()
        .entries(
            PutEventsRequestEntry::builder()
                .event_bus_name(event_bus)
                .source(entry.source)
                .detail_type(entry.detail_type)
                .detail(entry.detail)
                .build(),
        )
        .send()
        .await
        .map_err(|e| classify("PutEvents", &e))?;
    let result = output.entries().first();
    if output.failed_entry_count() > 0 || result.is_some_and(|r| r.error_code().is_some()) {
        let code = result.and_then(|r| r.error_code()).unwrap_or("unknown");
        let text = result.and_then(|r| r.error_message()).unwrap_or("");
        return Err(entry_failure(code, text));
    }
    Ok(Dispatched {
        status: None,
        receipt: result.and_then(|r| r.event_id()).map(str::to_owned),
    })
}

/// The error for an entry EventBridge refused with `code` and `text`.
fn entry_failure(code: &str, text: &str) -> DispatchError {
    let reason = excerpt(format!("PutEvents entry failed: {code}: {text}").as_bytes());
    if code_is_retryable(code) {
        DispatchError::Retryable {
            reason,
            status: None,
            retry_after: None,
        }
    } else {
        DispatchError::Fatal {
            reason,
            status: None,
        }
    }
}

/// One `PutEvents` entry's `Source`, `DetailType` and `Detail`, checked against the size limit.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    source: String,
    detail_type: String,
    detail: String,
}

/// The `Detail` object.
#[derive(Serialize)]
struct Detail<'a> {
    source: &'a str,
    event_id: &'a str,
    event_type: &'a str,
    idempotency_key: String,
    payload: Payload<'a>,
}

/// The payload, as JSON (its raw text) or as a string.
#[derive(Serialize)]
#[serde(untagged)]
enum Payload<'a> {
    Json(&'a RawValue),
    Text(&'a str),
}

impl Entry {
    fn new(message: &Message, detail_source: Option<&str>) -> Result<Self, DispatchError> {
        let text = std::str::from_utf8(&message.payload).map_err(|_| DispatchError::Fatal {
            reason: "the payload is not UTF-8 text, which an EventBridge detail must carry"
                .to_owned(),
            status: None,
        })?;
        let payload = match serde_json::from_str::<&RawValue>(text) {
            Ok(raw) => Payload::Json(raw),
            Err(_) => Payload::Text(text),
        };
        let detail = Detail {
            source: &message.source,
            event_id: &message.event_id,
            event_type: &message.event_type,
            idempotency_key: message.idempotency_key(),
            payload,
        };
        let detail = serde_json::to_string(&detail).map_err(|e| DispatchError::Fatal {
            reason: format!("the detail does not serialise: {e}"),
            status: None,
        })?;
        let source = detail_source
            .map(str::to_owned)
            .unwrap_or_else(|| format!("hookledger.{}", message.source));
        let detail_type = if message.event_type.is_empty() {
            UNTYPED_DETAIL_TYPE.to_owned()
        } else {
            message.event_type.clone()
        };
        let size = source.len() + detail_type.len() + detail.len();
        if size > MAX_ENTRY_BYTES {
            return Err(DispatchError::Fatal {
                reason: format!(
                    "the event is {size} bytes, over EventBridge's {MAX_ENTRY_BYTES} per entry"
                ),
                status: None,
            });
        }
        Ok(Entry {
            source,
            detail_type,
            detail,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::time::SystemTime;

    fn message(event_type: &str, payload: &[u8]) -> Message {
        Message {
            source: "stripe".into(),
            event_id: "evt_1".into(),
            event_type: event_type.into(),
            n: 2,
            target: "bus".into(),
            payload: payload.to_vec(),
            content_type: "application/json".into(),
            verified_body: true,
            attempts: 0,
            created_at: SystemTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_json_payload_travels_as_json_with_the_ids() {
        let body = br#"{"id":"evt_1","amount":12345678901234567890,"z":1,"a":2}"#;
        let entry = Entry::new(&message("invoice.paid", body), None).unwrap();
        assert_eq!(entry.source, "hookledger.stripe");
        assert_eq!(entry.detail_type, "invoice.paid");
        let detail: Value = serde_json::from_str(&entry.detail).unwrap();
        assert_eq!(detail["source"], "stripe");
        assert_eq!(detail["event_id"], "evt_1");
        assert_eq!(detail["event_type"], "invoice.paid");
        assert_eq!(detail["idempotency_key"], "stripe:evt_1:2");
        // The raw JSON text is kept: a big number and the key order are unchanged.
        assert!(
            entry.detail.ends_with(
                r#""payload":{"id":"evt_1","amount":12345678901234567890,"z":1,"a":2}}"#
            ),
            "{}",
            entry.detail
        );
    }

    #[test]
    fn a_form_payload_travels_as_a_string() {
        let entry = Entry::new(
            &message("", b"token=x&text=caf%C3%A9"),
            Some("acme.payments"),
        )
        .unwrap();
        assert_eq!(entry.source, "acme.payments");
        assert_eq!(entry.detail_type, UNTYPED_DETAIL_TYPE);
        let detail: Value = serde_json::from_str(&entry.detail).unwrap();
        assert_eq!(detail["payload"], json!("token=x&text=caf%C3%A9"));
        assert_eq!(detail["event_type"], "");
    }

    #[test]
    fn a_transformed_form_body_travels_as_the_transforms_json() {
        use crate::config::targets::{Target, TargetSpec};
        let spec: TargetSpec = serde_json::from_value(json!({
            "type": "eventbridge", "name": "bus", "transform": "{action: body.action, id: id}",
        }))
        .unwrap();
        let target = Target::from_spec(spec).unwrap();
        // GitHub's payload= form: without a transform the detail's payload is its text.
        let form = Message {
            content_type: crate::apply::FORM.into(),
            ..message("issues", b"payload=%7B%22action%22%3A%22opened%22%7D")
        };
        let reshaped = super::super::dispatch::transformed(&target, &form)
            .unwrap()
            .unwrap();
        let entry = Entry::new(&reshaped, None).unwrap();
        let detail: Value = serde_json::from_str(&entry.detail).unwrap();
        assert_eq!(
            detail["payload"],
            json!({"action": "opened", "id": "evt_1"})
        );
        assert_eq!(detail["idempotency_key"], "stripe:evt_1:2");
        assert_eq!(entry.detail_type, "issues");
    }

    #[test]
    fn an_oversized_or_binary_payload_is_fatal() {
        let big = format!("\"{}\"", "a".repeat(MAX_ENTRY_BYTES));
        let error = Entry::new(&message("t", big.as_bytes()), None).unwrap_err();
        assert!(matches!(error, DispatchError::Fatal { .. }));
        assert!(!error.to_string().contains("aaaa"));
        let error = Entry::new(&message("t", b"\xff"), None).unwrap_err();
        assert!(matches!(error, DispatchError::Fatal { .. }));
        // Just under the limit goes.
        let overhead = Entry::new(&message("t", b"\"\""), None).unwrap();
        let room = MAX_ENTRY_BYTES
            - overhead.source.len()
            - overhead.detail_type.len()
            - overhead.detail.len();
        let fits = format!("\"{}\"", "a".repeat(room));
        assert!(Entry::new(&message("t", fits.as_bytes()), None).is_ok());
        let over = format!("\"{}\"", "a".repeat(room + 1));
        assert!(Entry::new(&message("t", over.as_bytes()), None).is_err());
    }

    #[test]
    fn a_failed_entry_is_classified_by_its_code() {
        for code in ["ThrottlingException", "InternalFailure"] {
            assert!(
                matches!(
                    entry_failure(code, "try later"),
                    DispatchError::Retryable { .. }
                ),
                "{code}"
            );
        }
        for code in [
            "InvalidArgument",
            "MalformedDetail",
            "AccessDeniedException",
            "unknown",
        ] {
            let error = entry_failure(code, "no");
            assert!(matches!(error, DispatchError::Fatal { .. }), "{code}");
            assert!(error.to_string().contains(code));
        }
    }
}
