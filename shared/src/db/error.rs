//! What a database failure says, and whether it is retryable: [`PgError`] and [`NoConnection`],
//! the causes this crate's errors carry for a PostgreSQL or pool failure; [`describe`] and
//! [`describe_pool`], the same text as a string; [`is_unavailable`].
//!
//! tokio-postgres' own error is not fit to print as a cause: its `Display` is only its kind
//! ("db error"), and its source, PostgreSQL's error report, prints the DETAIL line, which
//! quotes row values (payload content). [`PgError`] prints the SQLSTATE, the message and the
//! constraint or table instead, and ends the chain there; a failure that is not PostgreSQL's
//! report (I/O, TLS, a timeout) keeps its causes, each printed once.

use std::error::Error as StdError;
use std::fmt;

/// A PostgreSQL client error as a cause: its `Display` is [`describe`]'s text for a report of
/// the server (SQLSTATE, message, constraint or table; never the DETAIL, nor the value a data
/// exception's message quotes), else the client's own
/// kind ("error connecting to server", ...) with its causes as `source`. Retryable when
/// [`PgError::is_unavailable`] says so; otherwise the caller decides (a constraint violation is
/// fatal to a handler, see `HandlerError::from`).
#[derive(Debug)]
pub struct PgError(tokio_postgres::Error);

impl PgError {
    /// The client's error, for its SQLSTATE ([`tokio_postgres::Error::code`]) and the rest.
    pub fn inner(&self) -> &tokio_postgres::Error {
        &self.0
    }

    /// The client's error.
    pub fn into_inner(self) -> tokio_postgres::Error {
        self.0
    }

    /// Whether the database is unavailable (retryable, 503): [`is_unavailable`].
    pub fn is_unavailable(&self) -> bool {
        is_unavailable(&self.0)
    }
}

impl From<tokio_postgres::Error> for PgError {
    fn from(error: tokio_postgres::Error) -> Self {
        Self(error)
    }
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_pg(f, &self.0)
    }
}

impl StdError for PgError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        pg_source(&self.0)
    }
}

/// Why no pooled connection could be had, as a cause: the pool's wait timed out, the pool is
/// closed, or opening a connection failed (then as [`PgError`]: the server's SQLSTATE and
/// message, or the client's kind with its causes). Retryable: the next invocation (or the
/// provider's retry) tries again.
#[derive(Debug)]
pub struct NoConnection(deadpool_postgres::PoolError);

impl NoConnection {
    /// The pool's error.
    pub fn inner(&self) -> &deadpool_postgres::PoolError {
        &self.0
    }
}

impl From<deadpool_postgres::PoolError> for NoConnection {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        Self(error)
    }
}

impl fmt::Display for NoConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            deadpool_postgres::PoolError::Backend(e) => write_pg(f, e),
            // deadpool's own text for it repeats the hook's error, which is the source.
            deadpool_postgres::PoolError::PostCreateHook(_) => {
                f.write_str("the pool's post_create hook failed")
            }
            other => fmt::Display::fmt(other, f),
        }
    }
}

impl StdError for NoConnection {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.0 {
            deadpool_postgres::PoolError::Backend(e) => pg_source(e),
            deadpool_postgres::PoolError::PostCreateHook(e) => Some(e),
            _ => None,
        }
    }
}

/// [`PgError`]'s text: the server's report as [`describe`] words it, else the client's kind.
fn write_pg(f: &mut fmt::Formatter<'_>, error: &tokio_postgres::Error) -> fmt::Result {
    match error.as_db_error() {
        Some(db) => f.write_str(&describe_db(db)),
        None => fmt::Display::fmt(error, f),
    }
}

/// [`PgError`]'s source: none for the server's report (its text is already said, and its
/// DETAIL must not be), else the client's cause (an I/O or TLS error).
fn pg_source(error: &tokio_postgres::Error) -> Option<&(dyn StdError + 'static)> {
    if error.as_db_error().is_some() {
        None
    } else {
        error.source()
    }
}

/// The server's report: SQLSTATE, message, and the constraint or table it names.
fn describe_db(db: &tokio_postgres::error::DbError) -> String {
    let code = db.code().code();
    let mut text = format!("{code} {}", message_without_value(code, db.message()));
    if let Some(constraint) = db.constraint() {
        text.push_str(&format!(" (constraint {constraint})"));
    } else if let Some(table) = db.table() {
        text.push_str(&format!(" (table {table})"));
    }
    text
}

/// `message` without the value a data exception (SQLSTATE class 22) quotes: PostgreSQL words
/// many of them with the input itself, `invalid input syntax for type bigint: "<value>"`,
/// `value "<value>" is out of range for type integer`, `date/time field value out of range:
/// "<value>"`, the value being a parameter's (payload content). Everything from the first `"`
/// to the last is replaced (a value may hold a `"` itself); the messages of other classes
/// quote names (constraint, column, relation) and are kept.
fn message_without_value<'m>(code: &str, message: &'m str) -> std::borrow::Cow<'m, str> {
    if !code.starts_with("22") {
        return message.into();
    }
    match (message.find('"'), message.rfind('"')) {
        (Some(first), Some(last)) if first < last => format!(
            "{}\"(value not shown)\"{}",
            &message[..first],
            &message[last + 1..]
        )
        .into(),
        _ => message.into(),
    }
}

/// SQLSTATE classes that mean "our side of the database is unavailable" (retryable, 503):
/// connection failures, admin shutdown, insufficient resources, statement/lock timeouts.
pub fn is_unavailable(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        // No SQLSTATE: unreachable (I/O, connect, TLS, timeout) or our own bug (a parameter or
        // column conversion, an unexpected row count), which is not the database's fault.
        None => {
            let text = error.to_string();
            [
                "error communicating with the server",
                "error performing TLS handshake",
                "error connecting to server",
                "timeout waiting for server",
                "connection closed",
            ]
            .iter()
            .any(|kind| text.starts_with(kind))
        }
        Some(code) => {
            let code = code.code();
            code.starts_with("08") // connection exception
                || code.starts_with("53") // insufficient resources (too many connections)
                || code.starts_with("57") // operator intervention: shutdown, query_canceled (statement_timeout)
                || code == "55P03" // lock_not_available (lock_timeout)
                || code == "40001" // serialization_failure
                || code == "40P01" // deadlock_detected
                || code == "25P03" // idle_in_transaction_session_timeout
        }
    }
}

/// A log-safe description of why no pooled connection could be had: the backend's SQLSTATE and
/// message when PostgreSQL refused (deadpool's own `Display` is only "db error"), else the pool's
/// reason (timeout, closed).
pub fn describe_pool(error: &deadpool_postgres::PoolError) -> String {
    match error {
        deadpool_postgres::PoolError::Backend(e) => describe(e),
        other => other.to_string(),
    }
}

/// A log-safe description of a PostgreSQL error: SQLSTATE, message, and the constraint, table
/// and column it names, never the DETAIL (which quotes row values, i.e. payload content).
/// `tokio_postgres::Error`'s own `Display` is only "db error".
pub fn describe(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return describe_db(db);
    }
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;
    use crate::error_chain::error_chain;

    /// The e2e test `a_cast_the_database_refuses_kills_the_event_without_quoting_the_value`
    /// shows the message as PostgreSQL sends it; these are its other wordings.
    #[test]
    fn a_data_exceptions_message_keeps_no_quoted_value() {
        for (code, message, kept) in [
            (
                "22P02",
                "invalid input syntax for type bigint: \"s\"e\"cret\"",
                "invalid input syntax for type bigint: \"(value not shown)\"",
            ),
            (
                "22003",
                "value \"secret\" is out of range for type integer",
                "value \"(value not shown)\" is out of range for type integer",
            ),
            (
                "22008",
                "date/time field value out of range: \"secret\"",
                "date/time field value out of range: \"(value not shown)\"",
            ),
            ("22003", "integer out of range", "integer out of range"),
            (
                "23505",
                "duplicate key value violates unique constraint \"t_pkey\"",
                "duplicate key value violates unique constraint \"t_pkey\"",
            ),
        ] {
            assert_eq!(message_without_value(code, message), kept);
        }
    }

    /// Each error of the chain, outermost first (no de-duplication: a repeat shows).
    fn segments(error: &(dyn StdError + 'static)) -> Vec<String> {
        let mut out = vec![error.to_string()];
        let mut cause = error.source();
        while let Some(inner) = cause {
            out.push(inner.to_string());
            cause = inner.source();
        }
        out
    }

    #[test]
    fn a_client_error_keeps_its_causes_and_each_layer_says_only_its_own() {
        let parse = tokio_postgres::Config::from_str("host=x port=notaport").unwrap_err();
        let error = crate::db::DbError::Url(PgError::from(parse));
        assert_eq!(
            segments(&error),
            [
                "DATABASE_URL is not a valid PostgreSQL URL",
                "invalid connection string",
                "invalid value for option `port`"
            ]
        );
        assert_eq!(
            error_chain(&error),
            "DATABASE_URL is not a valid PostgreSQL URL: invalid connection string: invalid \
             value for option `port`"
        );
    }

    #[test]
    fn a_pool_timeout_is_its_own_reason() {
        let timeout = deadpool_postgres::PoolError::Timeout(deadpool_postgres::TimeoutType::Wait);
        let error = NoConnection::from(timeout);
        let segments = segments(&error);
        assert_eq!(segments.len(), 1, "{segments:?}");
        assert!(segments[0].starts_with("Timeout occurred"), "{segments:?}");
        assert_eq!(segments[0], describe_pool(error.inner()));
    }
}
