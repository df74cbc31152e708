//! The dispatcher: one message to one built-in target, with the clients built once per
//! execution environment.

use std::time::SystemTime;

use tokio::sync::OnceCell;

use super::{DispatchError, Dispatched, Message, Target, TargetKind};

/// Sends outbox messages to their targets. Cheap to clone; the HTTP client and the AWS clients
/// (loaded from the environment's AWS configuration on first use) are shared.
#[derive(Debug, Clone, Default)]
pub struct Dispatcher {
    http: reqwest::Client,
    aws: std::sync::Arc<OnceCell<aws_config::SdkConfig>>,
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
            aws: Default::default(),
        }
    }

    async fn aws(&self) -> &aws_config::SdkConfig {
        self.aws
            .get_or_init(|| aws_config::load_defaults(aws_config::BehaviorVersion::latest()))
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
                let client = aws_sdk_sqs::Client::new(self.aws().await);
                super::sqs::send(
                    &client,
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
                let client = aws_sdk_eventbridge::Client::new(self.aws().await);
                super::eventbridge::send(&client, event_bus, detail_source.as_deref(), message)
                    .await
            }
        }
    }
}
