//! SQL handlers' statements checked against the schema: each is prepared (parsed, analysed,
//! its parameter types resolved) with its declared types, and its prepared parameter count
//! compared with its `params`. Nothing is executed.
//!
//! The functions do it once per process, on the first connection that serves an event
//! ([`Readiness`]): a statement the database refuses makes the function refuse every delivery
//! (the receiver answers 500, so providers retry; the worker leaves its events to a later
//! run), with one ERROR line naming the source, the handler's patterns, the statement and the
//! database's message. `hookledger check-config` does it when a database is reachable.
//!
//! Preparing does not check privileges (PostgreSQL checks them when a statement runs): a
//! missing `GRANT` shows as the event's error (retryable, SQLSTATE 42501).

use std::sync::Arc;

use tokio::sync::OnceCell;

use super::handler::SqlHandlers;
use crate::db::PgError;
use crate::handler::{NotReady, ReadyCheck};

/// A statement the database refused: fatal until the configuration or the schema is fixed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("source {name:?}: SQL handler #{handler} ({patterns}), statement {statement}: {problem}")]
pub struct PrepareError {
    /// The source's name.
    pub name: String,
    /// The handler's number in the source's `"handlers"`, from 1.
    pub handler: usize,
    /// Its event type patterns.
    pub patterns: String,
    /// The statement's number, from 1.
    pub statement: usize,
    /// The database's message and SQLSTATE (never its DETAIL), or the parameter count that
    /// differs.
    pub problem: String,
}

/// Why the statements were not all prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareFailure {
    /// A statement the database refuses: fatal until the configuration or the schema is fixed.
    #[error(transparent)]
    Refused(PrepareError),
    /// The database could not be asked (retryable).
    #[error("SQL handler statements could not be prepared now")]
    Unchecked(#[source] PgError),
}

/// Whether a database error says the statement is wrong (rather than the database being
/// unavailable, busy or cancelling).
fn is_refusal(error: &tokio_postgres::Error) -> bool {
    let Some(db) = error.as_db_error() else {
        return false;
    };
    if crate::db::is_unavailable(error) {
        return false;
    }
    let class = db.code().code().get(..2).unwrap_or_default();
    // 08 connection, 40 rollback (serialization, deadlock), 53 resources, 55 lock not
    // available, 57 operator intervention (statement timeout, shutdown), 58 system error.
    !matches!(class, "08" | "40" | "53" | "55" | "57" | "58")
}

/// Prepares every statement of `handlers` on `client`, inside a transaction opened with
/// `begin` (the session's `BEGIN` with its limits) and rolled back: each prepared statement is
/// closed before the `ROLLBACK`, inside the transaction, so behind a transaction-mode pooler
/// nothing is left on a server session.
///
/// Returns how many statements were prepared.
///
/// # Errors
/// [`PrepareFailure::Refused`] for the first statement the database refuses or whose prepared
/// parameter count differs from its `params`; [`PrepareFailure::Unchecked`] when the database
/// is unavailable.
pub async fn prepare_all(
    client: &tokio_postgres::Client,
    begin: &str,
    handlers: &[Arc<SqlHandlers>],
) -> Result<usize, PrepareFailure> {
    let unchecked = |e: tokio_postgres::Error| PrepareFailure::Unchecked(e.into());
    client.batch_execute(begin).await.map_err(unchecked)?;
    let mut prepared = 0;
    let mut outcome = Ok(());
    'all: for source in handlers {
        for handler in &source.handlers {
            for (number, sql) in handler.sent_statements() {
                let refused = |problem: String| {
                    PrepareFailure::Refused(PrepareError {
                        name: source.source.clone(),
                        handler: handler.number,
                        patterns: handler.patterns.clone(),
                        statement: number,
                        problem,
                    })
                };
                match client.prepare_typed(sql.text, sql.types).await {
                    Ok(statement) => {
                        let count = statement.params().len();
                        // Dropping it closes it, before the ROLLBACK below.
                        drop(statement);
                        if count != sql.types.len() {
                            outcome = Err(refused(format!(
                                "the database prepared it with {count} parameters, params lists {}",
                                sql.types.len()
                            )));
                            break 'all;
                        }
                        prepared += 1;
                    }
                    Err(error) if is_refusal(&error) => {
                        outcome = Err(refused(format!(
                            "does not prepare: {}",
                            PgError::from(error)
                        )));
                        break 'all;
                    }
                    Err(error) => {
                        outcome = Err(unchecked(error));
                        break 'all;
                    }
                }
            }
        }
    }
    let rolled_back = client.batch_execute("ROLLBACK").await;
    outcome?;
    rolled_back.map_err(unchecked)?;
    Ok(prepared)
}

/// The once-per-process check of the SQL handlers of a registry (a [`ReadyCheck`]): the first
/// call prepares them, and its success or the database's refusal is kept for the life of the
/// process (an unavailable database is not: the next call tries again).
#[derive(Debug)]
pub struct Readiness {
    handlers: Vec<Arc<SqlHandlers>>,
    checked: OnceCell<Result<(), String>>,
}

impl Readiness {
    /// The check of `handlers`.
    pub fn new(handlers: Vec<Arc<SqlHandlers>>) -> Self {
        Self {
            handlers,
            checked: OnceCell::new(),
        }
    }
}

#[async_trait::async_trait]
impl ReadyCheck for Readiness {
    /// Prepares the statements unless done before; a refusal is logged at ERROR once, when
    /// found.
    async fn check(&self, conn: &tokio_postgres::Client, begin: &str) -> Result<(), NotReady> {
        let checked = self
            .checked
            .get_or_try_init(|| async {
                match prepare_all(conn, begin, &self.handlers).await {
                    Ok(_) => Ok(Ok(())),
                    Err(PrepareFailure::Refused(error)) => {
                        tracing::error!(
                            source = error.name.as_str(),
                            handler = error.handler,
                            event_types = error.patterns.as_str(),
                            statement = error.statement,
                            error = %error,
                            "SQL handler statement refused by the database: this function \
                             refuses every delivery until the configuration or the schema is \
                             fixed"
                        );
                        Ok(Err(error.to_string()))
                    }
                    Err(PrepareFailure::Unchecked(error)) => Err(NotReady::Unchecked(error)),
                }
            })
            .await?;
        checked.clone().map_err(NotReady::Refused)
    }
}
