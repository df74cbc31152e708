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
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Self {
            http,
            sqs: Default::default(),
            eventbridge: Default::default(),
        }
    }

    /// The environment's AWS configuration with the dispatch timeouts; loaded once per client
    /// kind (each client is built once and kept).
    async fn aws() -> aws_config::SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(AWS_ATTEMPT_TIMEOUT)
                    .operation_timeout(AWS_OPERATION_TIMEOUT)
                    .build(),
            )
            .load()
            .await
    }

    /// Sends `message` to `target` at `now`.
    ///
    /// # Errors
    /// [`DispatchError`]: retryable (timeouts, 408/429/5xx, throttling) or fatal (the target
    /// refuses this message for good).
    pub async fn dispatch(
        &self,
        target: &Target,
        message: &Message,
        now: SystemTime,
    ) -> Result<Dispatched, DispatchError> {
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
