//! Timestamps as text: RFC 3339 in UTC, written (with milliseconds) and read.

/// `at` as RFC 3339 in UTC with milliseconds, e.g. `2026-12-01T10:54:05.123Z`.
pub fn rfc3339(at: std::time::SystemTime) -> String {
    let at = time::OffsetDateTime::from(at);
    let at = at
        .replace_nanosecond(at.millisecond() as u32 * 1_000_000)
        .unwrap_or(at);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Parses an RFC 3339 timestamp such as `2026-12-01T09:30:00Z` (the operator's `since` and
/// `until`).
///
/// # Errors
/// A short reason naming the value when it is not RFC 3339.
pub fn parse_rfc3339(value: &str) -> Result<std::time::SystemTime, String> {
    time::OffsetDateTime::parse(value, &time::format_description::well_known::Rfc3339)
        .map(std::time::SystemTime::from)
        .map_err(|_| format!("{value:?} is not an RFC 3339 time such as 2026-12-01T09:30:00Z"))
}
