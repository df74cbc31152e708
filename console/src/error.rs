//! The console's error pages: bad input is a 400 naming the field, a missing key a 404, a
//! refused action a 403 or 409, the database's failure a 503 with a short reason (the cause in
//! the log, never in the page).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use shared::forget::ForgetError;
use shared::ledger::LedgerError;
use shared::redrive::RedriveError;

/// Why a page could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// A filter or form field is malformed: 400.
    #[error("{field}: {reason}")]
    BadInput {
        /// The field's name, as in the form.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// No such event: 404.
    #[error("{0}")]
    NotFound(String),
    /// The action is not allowed (read-only mode, a missing or wrong CSRF token): 403.
    #[error("{0}")]
    Forbidden(&'static str),
    /// The database failed or is unreachable: 503 (the cause is logged, not shown). Retryable:
    /// the page says to try again in a moment.
    #[error("the database is unavailable")]
    Unavailable(#[source] shared::effect::BoxError),
}

impl PageError {
    /// A 400 for `field`.
    pub fn bad(field: &'static str, reason: impl Into<String>) -> Self {
        PageError::BadInput {
            field,
            reason: reason.into(),
        }
    }
}

impl From<LedgerError> for PageError {
    fn from(error: LedgerError) -> Self {
        PageError::Unavailable(Box::new(error))
    }
}

impl From<tokio_postgres::Error> for PageError {
    fn from(error: tokio_postgres::Error) -> Self {
        PageError::Unavailable(Box::new(shared::db::PgError::from(error)))
    }
}

impl From<deadpool_postgres::PoolError> for PageError {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        PageError::Unavailable(Box::new(shared::db::NoConnection::from(error)))
    }
}

impl From<RedriveError> for PageError {
    fn from(error: RedriveError) -> Self {
        match error {
            RedriveError::Invalid(reason) => PageError::bad("redrive", reason),
            RedriveError::UnknownSource(source) => {
                PageError::bad("source", format!("{source:?} is not a configured source"))
            }
            error @ RedriveError::NoHandler { .. } => {
                PageError::bad("event_type", error.to_string())
            }
            RedriveError::Pool(cause) => PageError::Unavailable(Box::new(cause)),
            RedriveError::Ledger(error) => error.into(),
        }
    }
}

impl From<ForgetError> for PageError {
    fn from(error: ForgetError) -> Self {
        match error {
            ForgetError::Invalid(reason) => PageError::bad("forget", reason),
            ForgetError::UnknownSource(source) => {
                PageError::bad("source", format!("{source:?} is not a configured source"))
            }
            error @ ForgetError::NoSubject(_) => PageError::bad("scope", error.to_string()),
            ForgetError::Pool(cause) => PageError::Unavailable(Box::new(cause)),
            ForgetError::Ledger(error) => error.into(),
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (status, title, text) = match &self {
            PageError::BadInput { field, reason } => (
                StatusCode::BAD_REQUEST,
                "Bad input",
                format!("The field {field} is not valid: {reason}"),
            ),
            PageError::NotFound(what) => (StatusCode::NOT_FOUND, "Not found", what.clone()),
            PageError::Forbidden(why) => (StatusCode::FORBIDDEN, "Not allowed", (*why).to_owned()),
            PageError::Unavailable(cause) => {
                tracing::error!(
                    cause = %shared::error_chain::error_chain(cause.as_ref()),
                    "console: database failure"
                );
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Database unavailable",
                    "The ledger could not be read: the database is unreachable or refused the \
                     query (the console's log has the cause). Try again in a moment."
                        .to_owned(),
                )
            }
        };
        let body = crate::layout::shell(
            title,
            maud::html! { h1 { (title) } p.error { (text) } },
            None,
        );
        (status, body).into_response()
    }
}
