//! The dispatcher: one message to one built-in target, with the clients built once per
//! execution environment.

use std::time::SystemTime;

use tokio::sync::OnceCell;

use super::{DispatchError, Dispatched, Message};
use crate::config::targets::{Target, TargetKind, AWS_ATTEMPT_TIMEOUT, AWS_OPERATION_TIMEOUT};

/// Sends outbox messages to their targets. Cheap to clone; the HTTP client and the AWS clients
/// (loaded from the environment's AWS configuration on first use) are shared.
#[derive(Debug, Clone)]
pub struct Dispatcher {
    http: reqwest::Client,
    sqs: std::sync::Arc<OnceCell<aws_sdk_sqs::Client>>,
    eventbridge: std::sync::Arc<OnceCell<aws_sdk_eventbridge::Client>>,
}

impl Default for Dispatcher {
    /// [`Dispatcher::new`]: the default client must not follow redirects either.
    fn default() -> Self {
        Self::new()
    }
}

impl Dispatcher {
    /// A dispatcher with its own HTTP client (no redirects followed: a target that redirects
    /// is refused, so a message never lands somewhere its configuration did not name).
    pub fn new() -> Self {
        let http = crate::https::client_builder().build().unwrap_or_default();
        Self {
            http,
            sqs: Default::default(),
            eventbridge: Default::default(),
        }
    }

    /// The environment's AWS configuration with the dispatch timeouts; loaded once per client
    /// kind (each client is built once and kept).
    async fn aws() -> aws_config::SdkConfig {
        let config = crate::aws::load().await;
        let mut timeouts = aws_config::timeout::TimeoutConfig::builder()
            .operation_attempt_timeout(AWS_ATTEMPT_TIMEOUT)
            .operation_timeout(AWS_OPERATION_TIMEOUT)
            .build();
        if let Some(base) = config.timeout_config() {
            timeouts.take_defaults_from(base);
        }
        config.into_builder().timeout_config(timeouts).build()
    }

    /// Sends `message` to `target` at `now`: its body reshaped first by the target's
    /// `transform` when it has one and the message carries the event's body as verified
    /// ([`Message::verified_body`]; see [`transformed`]), else as it was queued.
    ///
    /// # Errors
    /// [`DispatchError`]: retryable (timeouts, 408/429/5xx, throttling) or fatal (the target
    /// refuses this message for good, or its transform fails for this event).
    pub async fn dispatch(
        &self,
        target: &Target,
        message: &Message,
        now: SystemTime,
    ) -> Result<Dispatched, DispatchError> {
        let reshaped = transformed(target, message)?;
        let message = reshaped.as_ref().unwrap_or(message);
        match &target.kind {
            TargetKind::Forward { url, key, timeout } => {
                super::forward::send(&self.http, url, key, *timeout, message, now).await
            }
            TargetKind::Sqs {
                queue_url,
                fifo,
                message_group_id,
            } => {
                let client = self
                    .sqs
                    .get_or_init(|| async { aws_sdk_sqs::Client::new(&Self::aws().await) })
                    .await;
                super::sqs::send(
                    client,
                    queue_url,
                    *fifo,
                    message_group_id.as_deref(),
                    message,
                )
                .await
            }
            TargetKind::EventBridge {
                event_bus,
                detail_source,
            } => {
                let client = self
                    .eventbridge
                    .get_or_init(|| async { aws_sdk_eventbridge::Client::new(&Self::aws().await) })
                    .await;
                super::eventbridge::send(client, event_bus, detail_source.as_deref(), message).await
            }
        }
    }
}

/// `message` with its body reshaped by `target`'s `transform`: the transform's JSON value over
/// the event's envelope (`crate::expression::envelope`, the body read back from the stored
/// payload as the receiver read it), media type `application/json`. `None` when the target
/// has no transform or the message is a handler's own (`tx.outbox`, never transformed). The
/// idempotency key is unchanged; a `forward` signs the reshaped bytes.
///
/// Applied at dispatch, not when the message is queued, so that a transform fixed in the
/// configuration applies to a dead message re-driven afterwards.
///
/// # Errors
/// [`DispatchError::Fatal`] when the transform fails for this event (a JMESPath runtime error,
/// or a `null` value): the same message always fails the same way, so it is dead at once with
/// the expression and the position in `last_error`, never a value of the event.
pub fn transformed(target: &Target, message: &Message) -> Result<Option<Message>, DispatchError> {
    let Some(transform) = target.transform.as_ref() else {
        return Ok(None);
    };
    if !message.verified_body {
        return Ok(None);
    }
    let document = hookledger_verify::extract::document_of(&message.payload)
        .unwrap_or(std::borrow::Cow::Borrowed(message.payload.as_slice()));
    let envelope = crate::expression::envelope(
        &message.source,
        &message.event_id,
        &message.event_type,
        crate::expression::body_value(&message.payload, &document),
    );
    let payload = transform
        .apply(&envelope)
        .map_err(|error| DispatchError::Fatal {
            reason: format!("transform: {error}"),
            status: None,
        })?;
    Ok(Some(Message {
        source: message.source.clone(),
        event_id: message.event_id.clone(),
        event_type: message.event_type.clone(),
        n: message.n,
        target: message.target.clone(),
        payload,
        content_type: super::JSON.to_owned(),
        verified_body: message.verified_body,
        attempts: message.attempts,
        created_at: message.created_at,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(transform: Option<&str>) -> Target {
        let spec = serde_json::json!({
            "type": "sqs", "name": "q", "queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q",
            "transform": transform,
        });
        Target::from_spec(serde_json::from_value(spec).unwrap()).unwrap()
    }

    fn message(verified_body: bool, payload: &[u8], content_type: &str) -> Message {
        Message {
            source: "stripe".into(),
            event_id: "evt_1".into(),
            event_type: "charge.refunded".into(),
            n: 1,
            target: "q".into(),
            payload: payload.to_vec(),
            content_type: content_type.into(),
            verified_body,
            attempts: 0,
            created_at: SystemTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_transform_reshapes_only_a_verified_body() {
        let t = target(Some("{event: id, kind: type, amount: body.data.amount}"));
        let raw = br#"{"id":"evt_1","data":{"amount":4242}}"#;
        let out = transformed(&t, &message(true, raw, super::super::JSON))
            .unwrap()
            .unwrap();
        assert_eq!(out.content_type, super::super::JSON);
        assert_eq!(out.idempotency_key(), "stripe:evt_1:1");
        let json: serde_json::Value = serde_json::from_slice(&out.payload).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"event": "evt_1", "kind": "charge.refunded", "amount": 4242})
        );
        // A handler's own message is never transformed; nor is any message without a transform.
        assert!(transformed(&t, &message(false, raw, super::super::JSON))
            .unwrap()
            .is_none());
        assert!(
            transformed(&target(None), &message(true, raw, super::super::JSON))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_form_body_is_read_as_the_receiver_read_it() {
        let t = target(Some("body.action"));
        let form = b"payload=%7B%22action%22%3A%22opened%22%7D";
        let out = transformed(&t, &message(true, form, crate::apply::FORM))
            .unwrap()
            .unwrap();
        assert_eq!(out.payload, br#""opened""#);
    }

    #[test]
    fn a_failing_transform_is_fatal_and_names_no_value() {
        let t = target(Some("length(body.data.amount)"));
        let raw = br#"{"data":{"amount":4242}}"#;
        let error = transformed(&t, &message(true, raw, super::super::JSON)).unwrap_err();
        assert!(
            matches!(error, DispatchError::Fatal { status: None, .. }),
            "{error}"
        );
        let text = error.to_string();
        assert!(
            text.contains("transform") && text.contains("column"),
            "{text}"
        );
        assert!(!text.contains("4242"), "{text}");
        let null = target(Some("body.nope"));
        let error = transformed(&null, &message(true, raw, super::super::JSON)).unwrap_err();
        assert!(error.to_string().contains("null"), "{error}");
    }
}
