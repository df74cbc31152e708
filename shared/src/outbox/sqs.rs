//! `sqs`: `SendMessage` to an SQS queue (FIFO queues deduplicate on the idempotency key).
//!
//! What a consumer receives: the body is the payload unchanged (the provider's raw body for a
//! built-in target, the handler's JSON for `tx.outbox`), and four `String` message attributes
//! carry the ids: [`SOURCE_ATTRIBUTE`], [`EVENT_ID_ATTRIBUTE`], [`EVENT_TYPE_ATTRIBUTE`] (absent
//! when the provider sent no type: SQS refuses empty attribute values) and
//! [`IDEMPOTENCY_KEY_ATTRIBUTE`]. A standard queue delivers at least once and does not
//! deduplicate: the consumer deduplicates on the idempotency key. A FIFO queue drops a repeat
//! of a [`deduplication_id`] within its 5-minute deduplication interval (a dispatch retried
//! after a crash), and orders messages within their `MessageGroupId`.
//!
//! Limits (SQS developer guide, "Amazon SQS message quotas" and the `SendMessage` reference):
//! the body is 1 to [`MAX_MESSAGE_BYTES`] bytes of text, counted with the attributes' names,
//! types and values, of the characters `#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
//! #x10000-#x10FFFF`; a deduplication or group id is 1 to 128 characters of ASCII letters,
//! digits and punctuation. A message outside them is fatal: it can never be sent as it is.

use aws_sdk_sqs::types::MessageAttributeValue;
use sha2::{Digest, Sha256};

use super::aws::classify;
use super::{DispatchError, Dispatched, Message};

/// Largest message SQS takes everywhere, body and attributes, bytes (256 KiB; a queue's
/// `MaximumMessageSize` can be lower, and SQS then refuses the message: fatal too).
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// Longest `MessageDeduplicationId` / `MessageGroupId`, characters (SQS `SendMessage`).
pub const MAX_FIFO_ID_LEN: usize = 128;

/// Message attribute: the source's name.
pub const SOURCE_ATTRIBUTE: &str = "hookledger-source";
/// Message attribute: the provider's event id.
pub const EVENT_ID_ATTRIBUTE: &str = "hookledger-event-id";
/// Message attribute: the provider's event type (absent when empty).
pub const EVENT_TYPE_ATTRIBUTE: &str = "hookledger-event-type";
/// Message attribute: the idempotency key, `{source}:{event_id}:{n}`.
pub const IDEMPOTENCY_KEY_ATTRIBUTE: &str = "hookledger-idempotency-key";

/// Sends `message` to `queue_url`; a FIFO queue (`fifo`) gets `MessageDeduplicationId` =
/// [`deduplication_id`] of the idempotency key and `MessageGroupId` = `message_group_id`, or
/// the source's name when `None`.
///
/// Returns the queue's `MessageId` as the receipt.
///
/// # Errors
/// [`DispatchError::Fatal`] when the message breaks an SQS limit (see the module docs: not
/// UTF-8, a character SQS refuses, empty, over [`MAX_MESSAGE_BYTES`], a bad group id) or SQS
/// refuses it for good (a queue that does not exist, access denied, an invalid parameter);
/// [`DispatchError::Retryable`] for throttling, SQS's internal errors, 5xx, timeouts and
/// network errors. See `classify` in `outbox::aws` for the rule.
pub async fn send(
    client: &aws_sdk_sqs::Client,
    queue_url: &str,
    fifo: bool,
    message_group_id: Option<&str>,
    message: &Message,
) -> Result<Dispatched, DispatchError> {
    let request = SqsMessage::new(message, fifo, message_group_id)?;
    let mut call = client
        .send_message()
        .queue_url(queue_url)
        .message_body(request.body)
        .set_message_deduplication_id(request.deduplication_id)
        .set_message_group_id(request.group_id);
    for (name, value) in request.attributes {
        let value = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(value)
            .build()
            .map_err(|e| fatal(format!("message attribute {name}: {e}")))?;
        call = call.message_attributes(name, value);
    }
    let output = call.send().await.map_err(|e| classify("SendMessage", &e))?;
    Ok(Dispatched {
        status: None,
        receipt: output.message_id().map(str::to_owned),
    })
}

/// The parts of one `SendMessage` call, checked against SQS's limits.
#[derive(Debug, PartialEq, Eq)]
struct SqsMessage {
    body: String,
    attributes: Vec<(&'static str, String)>,
    deduplication_id: Option<String>,
    group_id: Option<String>,
}

impl SqsMessage {
    fn new(
        message: &Message,
        fifo: bool,
        message_group_id: Option<&str>,
    ) -> Result<Self, DispatchError> {
        let body = std::str::from_utf8(&message.payload)
            .map_err(|_| fatal("the payload is not UTF-8 text, which an SQS body must be"))?;
        if body.is_empty() {
            return Err(fatal("the payload is empty, and an SQS body cannot be"));
        }
        if let Some(at) = body.chars().position(|c| !sqs_accepts(c)) {
            return Err(fatal(format!(
                "the payload holds a character SQS refuses (character {at})"
            )));
        }
        let mut attributes = vec![
            (SOURCE_ATTRIBUTE, message.source.clone()),
            (EVENT_ID_ATTRIBUTE, message.event_id.clone()),
            (EVENT_TYPE_ATTRIBUTE, message.event_type.clone()),
            (IDEMPOTENCY_KEY_ATTRIBUTE, message.idempotency_key()),
        ];
        attributes.retain(|(_, value)| !value.is_empty());
        if let Some((name, _)) = attributes
            .iter()
            .find(|(_, value)| !value.chars().all(sqs_accepts))
        {
            return Err(fatal(format!(
                "message attribute {name} holds a character SQS refuses"
            )));
        }
        let size = body.len()
            + attributes
                .iter()
                .map(|(name, value)| name.len() + "String".len() + value.len())
                .sum::<usize>();
        if size > MAX_MESSAGE_BYTES {
            return Err(fatal(format!(
                "the message is {size} bytes with its attributes, over SQS's \
                 {MAX_MESSAGE_BYTES}"
            )));
        }
        let (deduplication_id, group_id) = if fifo {
            let group = message_group_id.unwrap_or(&message.source);
            if !is_fifo_id(group) {
                return Err(fatal(format!(
                    "message_group_id must be 1 to {MAX_FIFO_ID_LEN} ASCII letters, digits \
                     or punctuation"
                )));
            }
            (
                Some(deduplication_id(&message.idempotency_key())),
                Some(group.to_owned()),
            )
        } else {
            (None, None)
        };
        Ok(SqsMessage {
            body: body.to_owned(),
            attributes,
            deduplication_id,
            group_id,
        })
    }
}

/// The FIFO `MessageDeduplicationId` of idempotency key `key`: the key itself when SQS takes
/// it (1 to [`MAX_FIFO_ID_LEN`] ASCII letters, digits and punctuation), else the lowercase hex
/// SHA-256 of its UTF-8 bytes (64 characters; an event id with a space, non-ASCII or over
/// about 110 bytes). The two cannot collide: a key always holds `:`, a hex digest never does.
pub fn deduplication_id(key: &str) -> String {
    if is_fifo_id(key) {
        key.to_owned()
    } else {
        hex::encode(Sha256::digest(key.as_bytes()))
    }
}

/// Whether SQS takes `id` as a `MessageDeduplicationId` or `MessageGroupId`.
fn is_fifo_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_FIFO_ID_LEN && id.bytes().all(|b| b.is_ascii_graphic())
}

/// Whether SQS accepts `c` in a message body or a `String` attribute value.
fn sqs_accepts(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

fn fatal(reason: impl Into<String>) -> DispatchError {
    DispatchError::Fatal {
        reason: reason.into(),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn message(event_id: &str, event_type: &str, payload: &[u8]) -> Message {
        Message {
            source: "stripe".into(),
            event_id: event_id.into(),
            event_type: event_type.into(),
            n: 1,
            target: "orders".into(),
            payload: payload.to_vec(),
            content_type: "application/json".into(),
            verified_body: true,
            attempts: 0,
            created_at: SystemTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_fifo_message_carries_the_key_the_group_and_the_ids() {
        let m = message("evt_1", "invoice.paid", br#"{"id":"evt_1"}"#);
        let sqs = SqsMessage::new(&m, true, None).unwrap();
        assert_eq!(sqs.body, r#"{"id":"evt_1"}"#);
        assert_eq!(sqs.deduplication_id.as_deref(), Some("stripe:evt_1:1"));
        assert_eq!(sqs.group_id.as_deref(), Some("stripe"));
        assert_eq!(
            sqs.attributes,
            vec![
                (SOURCE_ATTRIBUTE, "stripe".to_owned()),
                (EVENT_ID_ATTRIBUTE, "evt_1".to_owned()),
                (EVENT_TYPE_ATTRIBUTE, "invoice.paid".to_owned()),
                (IDEMPOTENCY_KEY_ATTRIBUTE, "stripe:evt_1:1".to_owned()),
            ]
        );
        let grouped = SqsMessage::new(&m, true, Some("tenant-7")).unwrap();
        assert_eq!(grouped.group_id.as_deref(), Some("tenant-7"));
        let standard = SqsMessage::new(&m, false, Some("tenant-7")).unwrap();
        assert_eq!((standard.deduplication_id, standard.group_id), (None, None));
    }

    #[test]
    fn an_empty_event_type_is_left_out() {
        let sqs = SqsMessage::new(&message("evt_1", "", b"x"), false, None).unwrap();
        assert!(sqs
            .attributes
            .iter()
            .all(|(n, _)| *n != EVENT_TYPE_ATTRIBUTE));
        assert_eq!(sqs.attributes.len(), 3);
    }

    #[test]
    fn a_key_sqs_cannot_take_is_hashed() {
        assert_eq!(deduplication_id("stripe:evt_1:1"), "stripe:evt_1:1");
        let long = format!("stripe:{}:1", "e".repeat(200));
        for key in [long.as_str(), "acme:caf\u{e9}:1", "acme:has space:1", ""] {
            let id = deduplication_id(key);
            assert_eq!(id, hex::encode(Sha256::digest(key.as_bytes())), "{key}");
            assert_eq!(id.len(), 64);
            assert!(is_fifo_id(&id));
        }
        // Exactly the limit still goes as it is.
        let edge = format!("s:{}:1", "e".repeat(MAX_FIFO_ID_LEN - 4));
        assert_eq!(edge.len(), MAX_FIFO_ID_LEN);
        assert_eq!(deduplication_id(&edge), edge);
        // Stable: the same key always gives the same id (what deduplication rests on).
        assert_eq!(deduplication_id(&long), deduplication_id(&long));
    }

    #[test]
    fn bodies_sqs_refuses_are_fatal() {
        for payload in [
            &b"\xff\xfe"[..],
            b"",
            b"a\x01b",
            b"a\x00b",
            "\u{FFFF}".as_bytes(),
        ] {
            let error = SqsMessage::new(&message("evt_1", "t", payload), false, None).unwrap_err();
            assert!(
                matches!(error, DispatchError::Fatal { status: None, .. }),
                "{payload:?}"
            );
        }
        assert!(SqsMessage::new(
            &message("evt_1", "t", "tab\tnl\n\u{1F600}".as_bytes()),
            false,
            None
        )
        .is_ok());
        let bad_id = SqsMessage::new(&message("evt\u{1}", "t", b"x"), false, None).unwrap_err();
        assert!(bad_id.to_string().contains(EVENT_ID_ATTRIBUTE), "{bad_id}");
        let bad_group =
            SqsMessage::new(&message("evt_1", "t", b"x"), true, Some("a b")).unwrap_err();
        assert!(
            bad_group.to_string().contains("message_group_id"),
            "{bad_group}"
        );
    }

    #[test]
    fn the_size_limit_counts_the_attributes() {
        let m = message("evt_1", "t", b"");
        let attributes: usize = SqsMessage::new(&message("evt_1", "t", b"x"), false, None)
            .unwrap()
            .attributes
            .iter()
            .map(|(n, v)| n.len() + 6 + v.len())
            .sum();
        let fits = Message {
            payload: vec![b'a'; MAX_MESSAGE_BYTES - attributes],
            ..m.clone()
        };
        assert!(SqsMessage::new(&fits, false, None).is_ok());
        let over = Message {
            payload: vec![b'a'; MAX_MESSAGE_BYTES - attributes + 1],
            ..m
        };
        let error = SqsMessage::new(&over, false, None).unwrap_err();
        assert!(matches!(error, DispatchError::Fatal { .. }));
        // The reason never carries the payload.
        assert!(!error.to_string().contains("aaaa"), "{error}");
    }
}
