//! `forward`: HTTP POST to the user's endpoint, re-signed as a Standard Webhooks delivery.

use std::time::{Duration, SystemTime};

use super::{DispatchError, Dispatched, Message};
use crate::verify::SigningKey;

/// Sends `message` to `url` as a Standard Webhooks delivery signed with `key` at `now`.
///
/// # Errors
/// See [`DispatchError`].
pub async fn send(
    client: &reqwest::Client,
    url: &url::Url,
    key: &SigningKey,
    timeout: Duration,
    message: &Message,
    now: SystemTime,
) -> Result<Dispatched, DispatchError> {
    let _ = (client, url, key, timeout, message, now);
    Err(DispatchError::Fatal {
        reason: "forward is not built yet".to_owned(),
        status: None,
    })
}
