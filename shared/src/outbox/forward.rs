//! `forward`: HTTP POST to the user's endpoint, re-signed as a Standard Webhooks delivery.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{DispatchError, Dispatched, Message, MAX_EXCERPT_BYTES};
use crate::verify::SigningKey;

/// Sends `message` to `url` as a Standard Webhooks delivery signed with `key` at `now`:
/// `webhook-id` = the idempotency key, `webhook-timestamp` = `now` in unix seconds,
/// `webhook-signature` = `v1,<base64 HMAC-SHA256>`, the payload as the body with its
/// `content-type`. 2xx is delivered; 408, 429 and 5xx are retryable (with `Retry-After` in
/// seconds when given); a timeout or a connection failure is retryable; any other status
/// (3xx included: redirects are not followed) is fatal with the status and an excerpt.
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
    let id = message.idempotency_key();
    let timestamp = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut request = client
        .post(url.clone())
        .timeout(timeout)
        .header("content-type", &message.content_type)
        .body(message.payload.clone());
    for (name, value) in
        crate::verify::standard_webhooks::sign(key, &id, timestamp, &message.payload)
    {
        request = request.header(name, value);
    }
    let response = request.send().await.map_err(|e| DispatchError::Retryable {
        reason: if e.is_timeout() {
            format!("timed out after {} ms", timeout.as_millis())
        } else {
            format!("request failed: {}", crate::telemetry::error_chain(&e))
        },
        status: None,
        retry_after: None,
    })?;
    let status = response.status().as_u16();
    if response.status().is_success() {
        return Ok(Dispatched {
            status: Some(status),
            receipt: None,
        });
    }
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = response.bytes().await.unwrap_or_default();
    let end = body.len().min(MAX_EXCERPT_BYTES);
    let excerpt = String::from_utf8_lossy(&body[..end]);
    let reason = format!("HTTP {status}: {excerpt}");
    if status == 408 || status == 429 || status >= 500 {
        Err(DispatchError::Retryable {
            reason,
            status: Some(status),
            retry_after,
        })
    } else {
        Err(DispatchError::Fatal {
            reason,
            status: Some(status),
        })
    }
}
