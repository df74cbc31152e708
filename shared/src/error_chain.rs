//! An error as one line of text: the error and its causes (what `last_error` and log lines
//! carry).

/// `error` and its causes, outermost first, joined with `: ` (what `last_error` and log lines
/// carry, since a `Display` alone drops the cause).
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let next = inner.to_string();
        // thiserror's `transparent` and `#[error("{0}")]` wrappers repeat their cause's text.
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        cause = inner.source();
    }
    text
}
