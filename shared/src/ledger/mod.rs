//! Every statement on `webhook_event`: the claim, the lookup, and completion.
//!
//! The claim is one `INSERT ... ON CONFLICT (source, event_id) DO NOTHING RETURNING` and nothing
//! is read before it: the primary key is the concurrency control. A second claim of the same key
//! blocks on the first's uncommitted tuple (bounded by `lock_timeout`) and sees the conflict
//! once the first commits; if the first rolls back, the second wins.
//!
//! Round trips for a new event (inline mode): `BEGIN` + claim pipelined; then the handler's
//! writes + completion + `COMMIT` pipelined. Statements are prepared once per connection.

mod deferred;
mod lease;
mod pipeline;

pub use deferred::{accept, Accept};
pub use lease::{begin_leased, fail, lease_due, release, Failure, Leased};

use deadpool_postgres::ClientWrapper;
use futures_util::FutureExt;
use tokio_postgres::types::{Json, ToSql};

use crate::db;
use pipeline::in_order;

/// A connection from the pool (statements are prepared once per connection through it).
pub type Connection = ClientWrapper;

/// The ledger row's status: the `event_status` enum, in the design's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Durably accepted, not processed. In: the receiver's claim. Out: inline completion in the
    /// same transaction, or a worker's lease.
    Claimed,
    /// Leased by a worker until `lease_expires_at`. Out: complete, fail, or an expired lease.
    Processing,
    /// The effect and the response are durable. Terminal (until the sweeper deletes the row).
    Completed,
    /// The handler failed; retried at `next_attempt_at`. In/out: the worker.
    Failed,
    /// Attempts exhausted; kept for a human. In: the worker. Out: replay's re-drive.
    Dead,
}

impl Status {
    /// The enum label in PostgreSQL.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Claimed => "claimed",
            Status::Processing => "processing",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Dead => "dead",
        }
    }

    /// Parses the PostgreSQL enum label.
    ///
    /// # Errors
    /// [`LedgerError::UnknownStatus`] for a label this build does not know.
    pub fn parse(label: &str) -> Result<Self, LedgerError> {
        Ok(match label {
            "claimed" => Status::Claimed,
            "processing" => Status::Processing,
            "completed" => Status::Completed,
            "failed" => Status::Failed,
            "dead" => Status::Dead,
            other => return Err(LedgerError::UnknownStatus(other.to_owned())),
        })
    }
}

/// Why a ledger statement failed. Expected outcomes (duplicate, in flight, digest mismatch)
/// are [`Claim`] values, not errors.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// PostgreSQL refused or could not run a statement. Retryable when
    /// [`LedgerError::is_unavailable`] says so (the provider's retry will succeed later).
    #[error("database error: {}", db::describe(.0))]
    Db(#[from] tokio_postgres::Error),
    /// A statement that must touch one row touched none: the row changed under us.
    #[error("{0}: no row matched the expected state")]
    Lost(&'static str),
    /// The database holds a status this build does not know (schema ahead of code).
    #[error("unknown event_status {0:?}")]
    UnknownStatus(String),
}

impl LedgerError {
    /// Whether this is the database being unavailable (connection, timeout, resources):
    /// answer 503 so the provider retries.
    pub fn is_unavailable(&self) -> bool {
        match self {
            LedgerError::Db(e) => db::is_unavailable(e),
            _ => false,
        }
    }
}

/// The event being claimed. `digest` is the SHA-256 of the raw body.
#[derive(Debug, Clone, Copy)]
pub struct NewEvent<'a> {
    /// Source name (the ledger key's first half).
    pub source: &'a str,
    /// The provider's event id (the ledger key's second half), 1 to 255 bytes.
    pub event_id: &'a str,
    /// The provider's event type, e.g. `payment_intent.succeeded`.
    pub event_type: &'a str,
    /// SHA-256 of the raw body (32 bytes).
    pub digest: &'a [u8; 32],
    /// The raw body when the source keeps payloads, `None` to keep the digest only.
    pub payload: Option<&'a [u8]>,
}

/// A stored response: what every retry of a completed event is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// HTTP status, e.g. 200.
    pub status: u16,
    /// The response body, JSON text exactly as stored (`response_body::text`).
    pub body: String,
}

/// The decision a claim returns.
#[derive(Debug)]
pub enum Claim<'c> {
    /// This delivery owns the event: apply the effect through the open transaction, then
    /// [`ClaimTx::complete`] (or drop / [`ClaimTx::rollback`] to release the claim).
    Won(ClaimTx<'c>),
    /// The event was completed before with the same body: answer with the stored response.
    Completed(StoredResponse),
    /// The event is claimed but not completed (another delivery holds it, or its lock wait
    /// hit `lock_timeout`): answer 409 with `Retry-After`.
    InFlight,
    /// The same event id arrived before with a different body: 409, the row is untouched.
    DigestMismatch,
}

/// A row as [`lookup`] reads it.
#[derive(Debug, Clone)]
pub struct EventRow {
    /// Current status.
    pub status: Status,
    /// SHA-256 of the body first claimed.
    pub payload_digest: Vec<u8>,
    /// The stored response, present when completed.
    pub response: Option<StoredResponse>,
}

/// The claim's INSERT: the whole concurrency control of the receive path.
const CLAIM: &str = "\
INSERT INTO webhook_event (source, event_id, event_type, payload_digest, payload, status)
VALUES ($1, $2, $3, $4, $5, 'claimed')
-- A concurrent claim of the same key waits here for the first to commit or roll back.
ON CONFLICT (source, event_id) DO NOTHING
RETURNING 1";

/// Claims `event` on `conn`: opens a transaction and inserts the ledger row.
///
/// On [`Claim::Won`] the transaction stays open in the returned [`ClaimTx`]; on every other
/// outcome it is already rolled back. A lost claim reads the existing row in a new statement
/// (its own snapshot, so it sees the winner's commit) and compares digests.
///
/// One round trip when won (`BEGIN` and the INSERT are pipelined); two when lost.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails (check [`LedgerError::is_unavailable`]). A
/// `lock_timeout` while waiting on an in-flight claim is [`Claim::InFlight`], not an error.
pub async fn claim<'c>(
    conn: &'c Connection,
    event: &NewEvent<'_>,
) -> Result<Claim<'c>, LedgerError> {
    let statement = conn.prepare_cached(CLAIM).await?;
    let digest: &[u8] = event.digest;
    let params: [&(dyn ToSql + Sync); 5] = [
        &event.source,
        &event.event_id,
        &event.event_type,
        &digest,
        &event.payload,
    ];
    // The guard exists before anything is sent: if this future is dropped while the INSERT
    // waits (a cancelled duplicate), the guard's Drop queues ROLLBACK, so the connection never
    // returns to the pool inside an open transaction holding an orphaned claim.
    let tx = ClaimTx {
        conn,
        open: true,
        guard: Guard::Claimed,
    };
    // BEGIN is sent before the INSERT: `in_order` polls (and so sends) in the order given.
    let (begin, inserted) = in_order(
        conn.batch_execute("BEGIN"),
        conn.query_opt(&statement, &params),
    )
    .await;
    begin?;
    match inserted {
        Ok(Some(_)) => return Ok(Claim::Won(tx)),
        Ok(None) => {}
        Err(error) if is_lock_timeout(&error) => {
            tx.rollback().await?;
            return Ok(Claim::InFlight);
        }
        Err(error) => return Err(error.into()),
    }
    // Lost: release our (empty) transaction and read the winner's row.
    let (rolled_back, row) = in_order(
        tx.finish("ROLLBACK"),
        lookup(conn, event.source, event.event_id),
    )
    .await;
    rolled_back?;
    Ok(match row? {
        // Deleted between the conflict and the read (sweeper): the provider's retry decides.
        None => Claim::InFlight,
        Some(row) if row.payload_digest.as_slice() != event.digest.as_slice() => {
            Claim::DigestMismatch
        }
        Some(EventRow {
            response: Some(response),
            status: Status::Completed,
            ..
        }) => Claim::Completed(response),
        Some(_) => Claim::InFlight,
    })
}

const LOOKUP: &str = "\
SELECT status::text, payload_digest, response_status, response_body::text
FROM webhook_event
WHERE source = $1
  AND event_id = $2";

/// Reads one ledger row by key.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails; [`LedgerError::UnknownStatus`] for a status
/// this build does not know.
pub async fn lookup(
    conn: &Connection,
    source: &str,
    event_id: &str,
) -> Result<Option<EventRow>, LedgerError> {
    let statement = conn.prepare_cached(LOOKUP).await?;
    let Some(row) = conn.query_opt(&statement, &[&source, &event_id]).await? else {
        return Ok(None);
    };
    let status = Status::parse(row.try_get::<_, &str>(0)?)?;
    let response_status: Option<i16> = row.try_get(2)?;
    let response_body: Option<String> = row.try_get(3)?;
    Ok(Some(EventRow {
        status,
        payload_digest: row.try_get(1)?,
        response: match (response_status, response_body) {
            (Some(status), Some(body)) => Some(StoredResponse {
                status: u16::try_from(status).unwrap_or(500),
                body,
            }),
            _ => None,
        },
    }))
}

/// One statement a handler wants run in the claim's transaction, pipelined with the
/// completion and `COMMIT` by [`ClaimTx::complete`].
pub struct Write {
    /// The SQL, prepared once per connection.
    pub sql: &'static str,
    /// Its parameters, `$1..$n`.
    pub params: Vec<Box<dyn ToSql + Sync + Send>>,
}

impl std::fmt::Debug for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Write")
            .field("sql", &self.sql)
            .field("params", &self.params.len())
            .finish()
    }
}

const COMPLETE: &str = "\
UPDATE webhook_event
SET status = 'completed',
    attempts = attempts + 1,
    response_status = $3,
    response_body = $4,
    completed_at = now()
WHERE source = $1
  AND event_id = $2
  -- Guarded by the expected state: zero rows means the row is not ours to complete.
  AND status = 'claimed'
-- The stored text is what the first answer and every retry send, byte for byte.
RETURNING response_body::text";

const COMPLETE_LEASED: &str = "\
UPDATE webhook_event
SET status = 'completed',
    response_status = $3,
    response_body = $4,
    completed_at = now(),
    lease_expires_at = NULL,
    next_attempt_at = NULL
WHERE source = $1
  AND event_id = $2
  -- Guarded by the lease: the row is ours while it is processing under our attempt number
  -- (begin_leased also holds its row lock for the whole transaction).
  AND status = 'processing'
  AND attempts = $5
RETURNING response_body::text";

/// What entitles a transaction to complete its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guard {
    /// The row was inserted by this transaction's claim (inline mode).
    Claimed,
    /// The row is leased by a worker under this attempt number.
    Leased { attempts: i32 },
    /// Shadow mode's re-processing of a duplicate: the effect only, the ledger untouched.
    Shadow,
}

/// The open transaction that owns an event: a won inline claim, or a worker's leased row
/// ([`begin_leased`]). Dropping it without [`ClaimTx::complete`] rolls it back (the `ROLLBACK`
/// is queued on the connection at once), so a retry starts clean.
#[derive(Debug)]
pub struct ClaimTx<'c> {
    conn: &'c Connection,
    open: bool,
    guard: Guard,
}

impl<'c> ClaimTx<'c> {
    /// The connection, for statements the handler must read back before deciding.
    pub fn connection(&self) -> &'c Connection {
        self.conn
    }

    /// Runs `writes` in order, stores `status` and `body` as the event's response, marks it
    /// completed, and commits: one round trip, all pipelined. Returns the response exactly as
    /// stored, which is what the caller must send.
    ///
    /// # Errors
    /// [`LedgerError::Db`] when any write, the completion or the commit fails; nothing is
    /// committed then (a failed statement aborts the transaction and `COMMIT` rolls back).
    /// [`LedgerError::Lost`] when the row was not in `claimed` state (the transaction is
    /// rolled back).
    pub async fn complete(
        mut self,
        key: (&str, &str),
        status: u16,
        body: &serde_json::Value,
        writes: &[Write],
    ) -> Result<StoredResponse, LedgerError> {
        let conn = self.conn;
        let mut statements = Vec::with_capacity(writes.len());
        for write in writes {
            statements.push(conn.prepare_cached(write.sql).await?);
        }
        // Shadow mode writes the effect only; otherwise the completion is guarded by how this
        // transaction owns the row.
        let (completion_sql, attempts) = match self.guard {
            Guard::Shadow => (None, None),
            Guard::Claimed => (Some(COMPLETE), None),
            Guard::Leased { attempts } => (Some(COMPLETE_LEASED), Some(attempts)),
        };
        let completion_statement = match completion_sql {
            Some(sql) => Some(conn.prepare_cached(sql).await?),
            None => None,
        };
        let status_param = i16::try_from(status).unwrap_or(500);
        let body_param = Json(body);
        let mut completion_params: Vec<&(dyn ToSql + Sync)> =
            vec![&key.0, &key.1, &status_param, &body_param];
        if let Some(attempts) = &attempts {
            completion_params.push(attempts);
        }
        let write_params: Vec<Vec<&(dyn ToSql + Sync)>> = writes
            .iter()
            .map(|w| {
                w.params
                    .iter()
                    .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                    .collect()
            })
            .collect();
        let write_futures: Vec<_> = statements
            .iter()
            .zip(&write_params)
            .map(|(statement, params)| conn.execute(statement, params).boxed())
            .collect();
        let completion = async {
            match &completion_statement {
                Some(statement) => conn.query_opt(statement, &completion_params).await,
                None => Ok(None),
            }
        };
        self.open = false;
        let commit = conn.batch_execute("COMMIT");

        // Send every write, then the completion, then COMMIT, before awaiting any answer.
        let ((written, completed), committed) = in_order(
            in_order(pipeline::all_in_order(write_futures), completion),
            commit,
        )
        .await;
        // A failed statement aborted the transaction; COMMIT then answers ROLLBACK without an
        // error, so every result must be checked, not only the commit's.
        for result in written {
            result?;
        }
        let row = completed?;
        committed?;
        match (row, completion_statement) {
            (Some(row), _) => Ok(StoredResponse {
                status,
                body: row.try_get(0)?,
            }),
            // Shadow mode: the handler's response as it returned it.
            (None, None) => Ok(StoredResponse {
                status,
                body: body.to_string(),
            }),
            // The UPDATE matched nothing, so COMMIT committed only the writes: impossible for a
            // row this transaction inserted itself or holds locked under its lease (see
            // begin_leased), but say so rather than report success.
            (None, Some(_)) => Err(LedgerError::Lost("complete")),
        }
    }

    /// Rolls the claim back: the row disappears as if the delivery never arrived.
    ///
    /// # Errors
    /// [`LedgerError::Db`] when the connection fails (the server rolls back on its own then).
    pub async fn rollback(self) -> Result<(), LedgerError> {
        self.finish("ROLLBACK").await
    }

    async fn finish(mut self, command: &'static str) -> Result<(), LedgerError> {
        self.open = false;
        self.conn.batch_execute(command).await?;
        Ok(())
    }
}

impl Drop for ClaimTx<'_> {
    fn drop(&mut self) {
        if self.open {
            // Polling once sends the ROLLBACK on the connection (tokio-postgres queues the
            // message on first poll, as its own Transaction does on drop); the reply is ignored.
            let _ = self.conn.batch_execute("ROLLBACK").now_or_never();
        }
    }
}

/// Opens a transaction for shadow mode's re-processing of a duplicate: the handler runs and its
/// writes commit as a naive receiver's would, and the ledger is not touched.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn begin_shadow(conn: &Connection) -> Result<ClaimTx<'_>, LedgerError> {
    let tx = ClaimTx {
        conn,
        open: true,
        guard: Guard::Shadow,
    };
    conn.batch_execute("BEGIN").await?;
    Ok(tx)
}

fn is_lock_timeout(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE)
}
