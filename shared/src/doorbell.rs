//! The worker's doorbell: after a deferred accept commits, the receiver invokes the worker
//! asynchronously (Lambda `Invoke` with `InvocationType=Event`) so the event is processed in
//! seconds rather than at the next schedule tick.
//!
//! A ring is best effort: its failure is logged, counted (`doorbell_failed`) and otherwise
//! ignored, because the worker's schedule (every minute) drains whatever is due anyway. Turn it
//! off by leaving `HOOKLEDGER_WORKER_FUNCTION` unset; point it at a local emulator with
//! `AWS_ENDPOINT_URL_LAMBDA` (cargo-lambda's `watch` serves the Invoke API, so `make run` rings
//! the local worker for real).

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;

/// Longest a ring may delay the provider's 202, milliseconds.
pub const RING_TIMEOUT_MS: u64 = 2_000;

/// Why a ring failed. Never fatal to the delivery, and not retried: the worker's schedule
/// drains the event anyway.
#[derive(Debug, thiserror::Error)]
pub enum DoorbellError {
    /// The Invoke call failed.
    #[error("invoke {function}")]
    Invoke {
        /// The worker function.
        function: String,
        /// The SDK's error (the service's code and message, or the transport's failure).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The Invoke call took longer than [`RING_TIMEOUT_MS`].
    #[error("invoke {0}: timed out")]
    Timeout(String),
}

/// Rings the worker; [`Doorbell::off`] when no worker function is configured.
#[derive(Debug, Clone)]
pub struct Doorbell {
    /// The worker's invoke, built only by [`Doorbell::new`]: behind a trait object, so a
    /// function that never builds one (the console rings nothing) does not link the Lambda
    /// SDK (issue 29).
    target: Option<Arc<dyn Invoke>>,
}

/// One asynchronous invoke of the worker.
#[async_trait::async_trait]
trait Invoke: std::fmt::Debug + Send + Sync {
    /// The worker function (name or ARN).
    fn function(&self) -> &str;
    /// `InvocationType=Event` with `payload`.
    async fn invoke(&self, payload: String)
        -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}

/// [`Invoke`] through Lambda's `Invoke` API.
#[derive(Debug)]
struct LambdaInvoke {
    client: aws_sdk_lambda::Client,
    function: String,
}

#[async_trait::async_trait]
impl Invoke for LambdaInvoke {
    fn function(&self) -> &str {
        &self.function
    }

    async fn invoke(
        &self,
        payload: String,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.client
            .invoke()
            .function_name(&self.function)
            .invocation_type(InvocationType::Event)
            .payload(Blob::new(payload))
            .send()
            .await
            .map(|_| ())
            .map_err(|error| Box::new(error) as _)
    }
}

impl Doorbell {
    /// A doorbell that never rings.
    pub fn off() -> Self {
        Self { target: None }
    }

    /// A doorbell for `function` (name or ARN) with the SDK configured from the environment, or
    /// off when `function` is `None`.
    pub async fn new(function: Option<&str>) -> Self {
        match function {
            None => Self::off(),
            Some(function) => {
                let config = crate::aws::load().await;
                Self {
                    target: Some(Arc::new(LambdaInvoke {
                        client: aws_sdk_lambda::Client::new(&config),
                        function: function.to_owned(),
                    })),
                }
            }
        }
    }

    /// Whether a worker function is configured.
    pub fn is_on(&self) -> bool {
        self.target.is_some()
    }

    /// Invokes the worker asynchronously with `{"reason": "doorbell", "source", "event_id"}`.
    /// Returns `Ok(false)` when the doorbell is off.
    ///
    /// # Errors
    /// [`DoorbellError`] when the invoke fails or times out: log it with its causes
    /// (`crate::error_chain::error_chain`) and carry on.
    pub async fn ring(&self, source: &str, event_id: &str) -> Result<bool, DoorbellError> {
        let Some(target) = &self.target else {
            return Ok(false);
        };
        let payload = serde_json::json!({
            "reason": "doorbell",
            "source": source,
            "event_id": event_id,
        });
        let call = target.invoke(payload.to_string());
        match tokio::time::timeout(Duration::from_millis(RING_TIMEOUT_MS), call).await {
            Ok(Ok(())) => Ok(true),
            Ok(Err(source)) => Err(DoorbellError::Invoke {
                function: target.function().to_owned(),
                source,
            }),
            Err(_) => Err(DoorbellError::Timeout(target.function().to_owned())),
        }
    }
}
