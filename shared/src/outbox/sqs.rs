//! `sqs`: `SendMessage` to an SQS queue (FIFO queues deduplicate on the idempotency key).

use super::{DispatchError, Dispatched, Message};

/// Sends `message` to `queue_url`.
///
/// # Errors
/// See [`DispatchError`].
pub async fn send(
    client: &aws_sdk_sqs::Client,
    queue_url: &str,
    fifo: bool,
    message_group_id: Option<&str>,
    message: &Message,
) -> Result<Dispatched, DispatchError> {
    let _ = (client, queue_url, fifo, message_group_id, message);
    Err(DispatchError::Fatal {
        reason: "sqs is not built yet".to_owned(),
        status: None,
    })
}
