//! `eventbridge`: `PutEvents` to an EventBridge bus.

use super::{DispatchError, Dispatched, Message};

/// Puts `message` on `event_bus`.
///
/// # Errors
/// See [`DispatchError`].
pub async fn send(
    client: &aws_sdk_eventbridge::Client,
    event_bus: &str,
    detail_source: Option<&str>,
    message: &Message,
) -> Result<Dispatched, DispatchError> {
    let _ = (client, event_bus, detail_source, message);
    Err(DispatchError::Fatal {
        reason: "eventbridge is not built yet".to_owned(),
        status: None,
    })
}
