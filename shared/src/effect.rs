//! What a handler sees and returns: the [`Event`] (verified and claimed), the [`Effect`] it
//! decides (a 2xx [`Success`] and a JSON body) and the [`HandlerError`] it fails with
//! (retryable or fatal). Leaf types of the handler API, below the ledger's [`Tx`] that returns
//! them; [`crate::handler`] has the contract.
//!
//! [`Tx`]: crate::ledger::Tx

/// The event a handler sees: already verified and claimed.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// Source name.
    pub source: &'a str,
    /// The provider's event id.
    pub event_id: &'a str,
    /// The provider's event type, e.g. `payment_intent.succeeded` (empty when the provider
    /// sent none).
    pub event_type: &'a str,
    /// The raw body exactly as received and verified.
    pub body: &'a [u8],
    /// The JSON object to read: the body itself, or the JSON a form-encoded body carries
    /// (GitHub `payload=`, Slack interactivity and slash commands).
    pub document: &'a [u8],
}

impl<'a> Event<'a> {
    /// The event's JSON document ([`Event::document`]) read as `T`: a `serde_json::Value`, or
    /// a type of your own that derives `serde::Deserialize` (borrowing from the document is
    /// fine).
    ///
    /// # Errors
    ///
    /// [`HandlerError::Fatal`] when the document is not JSON or not the shape `T` expects: the
    /// same payload fails the same way every time. The reason names the line and column, never
    /// a value of the payload.
    pub fn json<T: serde::Deserialize<'a>>(&self) -> Result<T, HandlerError> {
        serde_json::from_slice(self.document).map_err(|error| {
            let what = match error.classify() {
                serde_json::error::Category::Data => "does not have the expected shape",
                _ => "is not valid JSON",
            };
            HandlerError::fatal(format!(
                "the event's document {what} (line {}, column {})",
                error.line(),
                error.column()
            ))
        })
    }
}

/// The status of a successful effect: a 2xx, by construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Success {
    /// 200 OK.
    Ok,
    /// 201 Created.
    Created,
    /// 202 Accepted.
    Accepted,
}

impl Success {
    /// The HTTP status code.
    pub fn code(self) -> u16 {
        match self {
            Success::Ok => 200,
            Success::Created => 201,
            Success::Accepted => 202,
        }
    }
}

/// What a handler decided: the response to store, and to send now and on every retry. Writes
/// go through the [`Tx`](crate::ledger::Tx) ([`Tx::defer`](crate::ledger::Tx::defer) to
/// pipeline them with the completion).
#[derive(Debug, Clone, PartialEq)]
pub struct Effect {
    /// The response status: always a 2xx.
    pub status: Success,
    /// JSON body of the response.
    pub body: serde_json::Value,
}

impl Effect {
    /// `200` with `body`.
    pub fn ok(body: serde_json::Value) -> Self {
        Self {
            status: Success::Ok,
            body,
        }
    }

    /// `201` with `body`.
    pub fn created(body: serde_json::Value) -> Self {
        Self {
            status: Success::Created,
            body,
        }
    }

    /// `202` with `body`.
    pub fn accepted(body: serde_json::Value) -> Self {
        Self {
            status: Success::Accepted,
            body,
        }
    }
}

/// A boxed error cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a handler failed, and whether trying again can help. Either way nothing the handler
/// wrote is committed.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// Trying again later can succeed (the database or a downstream is unavailable, a lock or
    /// serialization conflict): inline mode answers 5xx so the provider retries; the worker
    /// retries with backoff until `max_attempts`.
    #[error("retryable: {reason}")]
    Retryable {
        /// What failed, for `last_error` and the log (never payload values or secrets).
        reason: String,
        /// The cause, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// The payload can never be processed as it is (a missing field, a value the business
    /// table refuses): the event goes `dead` at once with this error, for an operator to fix
    /// and re-drive.
    #[error("fatal: {reason}")]
    Fatal {
        /// What is wrong, for `last_error` and the log (never payload values or secrets).
        reason: String,
        /// The cause, if any.
        #[source]
        source: Option<BoxError>,
    },
}

impl HandlerError {
    /// A retryable error with no cause.
    pub fn retryable(reason: impl Into<String>) -> Self {
        HandlerError::Retryable {
            reason: reason.into(),
            source: None,
        }
    }

    /// A fatal error with no cause.
    pub fn fatal(reason: impl Into<String>) -> Self {
        HandlerError::Fatal {
            reason: reason.into(),
            source: None,
        }
    }

    /// Whether the event can never be processed as it is.
    pub fn is_fatal(&self) -> bool {
        matches!(self, HandlerError::Fatal { .. })
    }

    /// Whether the cause is the database being unavailable (the receiver answers 503).
    pub fn is_unavailable(&self) -> bool {
        let (HandlerError::Retryable { source, .. } | HandlerError::Fatal { source, .. }) = self;
        source.as_ref().is_some_and(|source| {
            match source.downcast_ref::<crate::db::PgError>() {
                Some(pg) => pg.is_unavailable(),
                // A handler's own error with the client's error as its cause.
                None => source
                    .downcast_ref::<tokio_postgres::Error>()
                    .is_some_and(crate::db::is_unavailable),
            }
        })
    }

    /// The reason with its cause chain, for `last_error` and the log.
    pub fn chain(&self) -> String {
        crate::error_chain::error_chain(self)
    }
}

/// Database errors from a handler's statements: data exceptions (SQLSTATE class 22, e.g. a
/// value out of range) and integrity violations (class 23, e.g. a CHECK the business table
/// has) are fatal: the same payload fails the same way every time. Everything else (connection,
/// timeouts, lock and serialization conflicts, a statement that is wrong until the handler is
/// fixed) is retryable.
///
/// The reason is `database`; the cause ([`crate::db::PgError`]) says the SQLSTATE, the message
/// and the constraint or table, never PostgreSQL's DETAIL (it quotes row values).
impl From<tokio_postgres::Error> for HandlerError {
    fn from(error: tokio_postgres::Error) -> Self {
        HandlerError::from(crate::db::PgError::from(error))
    }
}

/// As `From<tokio_postgres::Error>`.
impl From<crate::db::PgError> for HandlerError {
    fn from(error: crate::db::PgError) -> Self {
        let reason = "database".to_owned();
        let fatal = error
            .inner()
            .code()
            .map(|code| code.code().starts_with("22") || code.code().starts_with("23"))
            .unwrap_or(false);
        let source = Some(Box::new(error) as BoxError);
        if fatal {
            HandlerError::Fatal { reason, source }
        } else {
            HandlerError::Retryable { reason, source }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_constructor_answers_its_status_with_the_body() {
        let body = serde_json::json!({"id": 1});
        for (effect, code) in [
            (Effect::ok(body.clone()), 200),
            (Effect::created(body.clone()), 201),
            (Effect::accepted(body.clone()), 202),
        ] {
            assert_eq!(effect.status.code(), code);
            assert_eq!(effect.body, body);
        }
    }
}
