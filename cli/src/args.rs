//! Argument checks shared by the subcommands, run by clap so a malformed value is a usage
//! error (exit status 2) like any other.

/// An RFC 3339 time such as `2026-12-01T09:30:00Z`, kept as given (the `shared` request types
/// take the text).
///
/// # Errors
/// The reason, when `value` is not RFC 3339 (`shared::timestamp::parse_rfc3339`).
pub fn rfc3339(value: &str) -> Result<String, String> {
    shared::timestamp::parse_rfc3339(value).map(|_| value.to_owned())
}
