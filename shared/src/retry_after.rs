//! `Retry-After` (RFC 9110 section 10.2.3): how long a server asked to wait, for every HTTP
//! client here (replay's provider APIs, the outbox's `forward` target).

use std::time::{Duration, SystemTime};

/// Longest wait a `Retry-After` can ask for; a longer one is cut to it (one day). Callers cap
/// it further by their own rules.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// A `Retry-After` value as a wait from `now`: delta-seconds (`120`) or an HTTP-date (any of
/// RFC 9110's three formats; a date in the past is no wait), at most [`MAX_RETRY_AFTER`].
/// `None` when it is neither.
pub fn parse(value: &str, now: SystemTime) -> Option<Duration> {
    let text = value.trim();
    let wait = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // Digits only: too many for a u64 is still "a very long time".
        Duration::from_secs(text.parse::<u64>().unwrap_or(u64::MAX))
    } else {
        let at = httpdate::parse_http_date(text).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(wait.min(MAX_RETRY_AFTER))
}
