//! The statements of the delivery path on `webhook_event`: the claim and its lookup ([`claim`]),
//! the transaction a handler runs in and its completion ([`tx`]), deferred mode's accept
//! ([`deferred`]), the worker's lease, start, failure and release ([`lease`]), one event's
//! full read ([`inspect`]) and the rule that names a row's outcome ([`outcome`]), with
//! pipelining from `crate::db`; and the statements on `outbox` that the ledger's transaction and
//! the worker run: queue an event's messages with its completion, lease due messages, record
//! their outcome ([`outbox`]). The scheduled and operator jobs keep their statements beside
//! their logic: the sweep's in [`crate::sweep::sql`], the auditor's in [`crate::audit::sql`],
//! the re-drive's in [`crate::redrive::sql`] and [`crate::redrive::outbox_sql`].
//!
//! The claim is one `INSERT ... ON CONFLICT DO NOTHING RETURNING` and nothing is read before it:
//! the primary key is the concurrency control. A second claim of the same key blocks on the
//! first's uncommitted tuple (bounded by `lock_timeout`) and sees the conflict once the first
//! commits; if the first rolls back, the second wins. The same holds for the replay guard
//! (`replay_guard`, unique per source when set, migration V17): a delivery whose event id or
//! type is not signed ([`NewEvent::unsigned_id`]) records its body's digest there, so the same
//! body under another id conflicts in the same INSERT and is answered as a duplicate
//! ([`Claim::BodyReplayed`]).
//!
//! Round trips for a new event (inline mode), in one of two shapes:
//!
//! - **one statement** ([`one_statement`]) when the handler's effect is plain SQL (or there is
//!   no handler) and nothing goes to the outbox: the claim, the handler's writes and the
//!   completed response in one statement, one round trip; a completed duplicate is answered
//!   from the same round trip;
//! - **the transaction** otherwise: `BEGIN` (with its `SET LOCAL` limits) + claim pipelined;
//!   then the handler's deferred writes + its outbox messages (one statement) + completion +
//!   `COMMIT` pipelined.

pub mod claim;
pub mod deferred;
mod gate;
pub mod inspect;
pub mod lease;
pub mod one_statement;
pub mod outbox;
pub mod outcome;
pub mod tx;

pub use crate::status::Status;
// For `crate::sql_handler`: whether a configured statement rides in the one statement, and
// its parameter count.
pub use claim::{
    claim, lookup, lookup_many, record_dead, Claim, EventRow, Expiry, NewEvent, Original,
    StoredResponse,
};
pub use deferred::{accept, Accept};
pub(crate) use gate::{gate, highest_parameter};
pub use inspect::{inspect, EventDetail, MessageDetail};
pub use lease::{fail, lease_due, release, start, Failure, Leased};
pub use outcome::{EventOutcome, EVENT_OUTCOME_SQL};
pub use tx::{begin_shadow, CompleteError, Tx};

/// A connection from the pool.
pub type Connection = crate::db::Connection;

/// Why a ledger statement failed. Expected outcomes (duplicate, in flight, digest mismatch, a
/// lost lease) are values, not errors.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// PostgreSQL refused or could not run a statement. Retryable when
    /// [`LedgerError::is_unavailable`] says so (the provider's retry will succeed later).
    #[error("database error")]
    Db(#[source] crate::db::PgError),
    /// The database holds a status this build does not know (schema ahead of code).
    #[error("unknown event_status {0:?}")]
    UnknownStatus(String),
}

impl From<crate::status::UnknownStatus> for LedgerError {
    fn from(error: crate::status::UnknownStatus) -> Self {
        LedgerError::UnknownStatus(error.0)
    }
}

impl From<tokio_postgres::Error> for LedgerError {
    fn from(error: tokio_postgres::Error) -> Self {
        LedgerError::Db(error.into())
    }
}

impl LedgerError {
    /// Whether this is the database being unavailable (connection, timeout, resources):
    /// answer 503 so the provider retries.
    pub fn is_unavailable(&self) -> bool {
        match self {
            LedgerError::Db(e) => e.is_unavailable(),
            LedgerError::UnknownStatus(_) => false,
        }
    }
}

/// `last_error` is for humans: at most this many characters are kept (events and outbox
/// messages alike).
pub const MAX_ERROR_CHARS: usize = 2000;

/// `error` cut to [`MAX_ERROR_CHARS`] characters, for a `last_error` column.
pub(crate) fn bounded_error(error: &str) -> String {
    error.chars().take(MAX_ERROR_CHARS).collect()
}

pub(crate) fn is_lock_timeout(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE)
}
