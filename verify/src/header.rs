//! Reading the signature headers: one value per header, bounded, visible ASCII; unix-second
//! timestamps and the tolerance check.

use http::header::AsHeaderName;
use http::HeaderMap;

use crate::limits::MAX_HEADER_LEN;
use crate::outcome::VerifyError;

/// A header value that is duplicated, too long or not visible ASCII (see [`single_header`]).
pub(crate) struct Malformed;

/// [`single_header`] for any header name type (a generic source's [`http::HeaderName`]); the
/// caller names the header in its error.
pub(crate) fn single_value<K: AsHeaderName>(
    headers: &HeaderMap,
    name: K,
) -> Result<Option<&str>, Malformed> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() || value.len() > MAX_HEADER_LEN {
        return Err(Malformed);
    }
    value.to_str().map(Some).map_err(|_| Malformed)
}

/// Parse unix seconds written as ASCII decimal digits only (no sign, no spaces, no fraction):
/// what Stripe's `t=`, Standard Webhooks' `webhook-timestamp`, Slack's
/// `X-Slack-Request-Timestamp` and Paddle's `ts=` carry. `None` if not digits or beyond `i64`.
pub(crate) fn parse_unix_seconds(value: &str) -> Option<i64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// Accept `timestamp` if `|now - timestamp| <= tolerance_secs` (seconds, both directions).
///
/// # Errors
///
/// [`VerifyError::TimestampOutsideTolerance`] otherwise.
pub(crate) fn check_tolerance(
    timestamp: i64,
    now: i64,
    tolerance_secs: u64,
) -> Result<(), VerifyError> {
    if now.abs_diff(timestamp) > tolerance_secs {
        return Err(VerifyError::TimestampOutsideTolerance);
    }
    Ok(())
}
