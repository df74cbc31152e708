//! The transaction a handler runs in, and its completion.
//!
//! A [`Tx`] can run statements but cannot end the transaction: it refuses transaction control
//! and session `SET`s, and only [`Tx::complete`] commits, together with the guarded completion of
//! the ledger row. Three ways to own a row:
//!
//! - **inline**: the claim's own transaction, already open (the row was inserted by it);
//! - **leased** (the worker): lazy; `BEGIN` goes out with the handler's first statement, so what
//!   the handler does before its first statement (HTTP calls, anything slow) runs outside any
//!   transaction, and the completion is fenced by the lease token;
//! - **shadow**: a duplicate re-processed in shadow mode: the handler's writes only.
//!
//! The completion statement fails (and so aborts the transaction, and the pipelined `COMMIT`
//! rolls back) when it matches no row: the handler's writes never commit beside an unfinished
//! claim or a lease that was lost.
//!
//! Outbox messages ([`Tx::outbox`], and the source's built-in targets queued by
//! `handlers::apply`) are held here until [`Tx::complete`], then written by one statement
//! (`ledger::outbox`'s `ENQUEUE`) pipelined between the deferred writes and the completion: no
//! round trip of their own, committed with the claim and the business writes or not at all.

use std::time::SystemTime;

use futures_util::FutureExt;
use tokio_postgres::types::{Json, ToSql, Type};
use tokio_postgres::Row;

use super::{Connection, LedgerError, StoredResponse};
use crate::config::targets::Target;
use crate::db::pipeline::{all_in_order, in_order};
use crate::db::{Prepared, Sql};
use crate::effect::HandlerError;

/// What entitles a transaction to complete its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Guard {
    /// The row was inserted by this transaction's claim (inline mode).
    Claimed,
    /// The row is leased by a worker under this lease token.
    Leased { token: i64 },
    /// Shadow mode's re-processing of a duplicate: the effect only, the ledger untouched.
    Shadow,
    /// A plain-SQL handler deciding its effect before the claim (`super::one_statement`): no
    /// statement is sent; its deferred writes are collected, and one that runs a statement
    /// now makes the event take the transaction shape instead.
    Plan,
}

/// One statement a handler deferred to the end of its transaction.
pub(crate) struct Deferred {
    pub(crate) sql: &'static Sql,
    pub(crate) params: Vec<Box<dyn ToSql + Sync + Send>>,
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deferred")
            .field("sql", &self.sql.text)
            .field("params", &self.params.len())
            .finish()
    }
}

/// One outbox message queued in a [`Tx`], written at completion as number `n` = its position
/// (1-based) in the queue.
struct Queued {
    target: String,
    payload: Vec<u8>,
    content_type: &'static str,
    /// The payload is the event's body as verified (a built-in target's message, which the
    /// target's `transform` applies to), not a handler's own `tx.outbox` payload.
    verified_body: bool,
}

/// The open (or, for a worker, not yet begun) transaction that owns an event. Dropping it
/// without [`Tx::complete`] rolls it back (the `ROLLBACK` is queued on the connection at once),
/// so a retry starts clean.
pub struct Tx<'c> {
    conn: &'c Connection,
    guard: Guard,
    /// `BEGIN` has been sent.
    begun: bool,
    /// A transaction is open on the connection and must be ended.
    open: bool,
    deferred: Vec<Deferred>,
    /// The event's source's built-in targets: the names [`Tx::outbox`] accepts.
    targets: &'c [Target],
    /// The event's type, stored with its messages.
    event_type: &'c str,
    /// Outbox messages, in order (message `n` is `queued[n - 1]`).
    queued: Vec<Queued>,
    /// When the messages are due (`None`: the transaction's `now()`).
    due_at: Option<SystemTime>,
    /// A plan ([`Guard::Plan`]) tried to run a statement now.
    touched: bool,
    /// What a leased event's completion stores as its payload instead of the body as received
    /// ([`Tx::completed_payload`]): `Some(None)` keeps digests only.
    completed_payload: Option<Option<Vec<u8>>>,
}

impl std::fmt::Debug for Tx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tx")
            .field("guard", &self.guard)
            .field("begun", &self.begun)
            .field("deferred", &self.deferred.len())
            .field("outbox", &self.queued.len())
            .finish()
    }
}

/// Why [`Tx::complete`] did not commit. Nothing of the transaction is committed in any case.
#[derive(Debug, thiserror::Error)]
pub enum CompleteError {
    /// A deferred write, or the response body the handler returned, was refused: the handler's
    /// failure (classify it with `HandlerError::from`).
    #[error("deferred write or response body refused")]
    Write(#[source] crate::db::PgError),
    /// The completion matched no row: the claim or the lease is not ours (a lease that expired
    /// and was taken over). The transaction was rolled back.
    #[error("the completion matched no ledger row: the claim or lease is not ours")]
    Lost,
    /// The completion or the commit failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// The statement kinds a handler may run through a [`Tx`] (its first keyword): reads, writes and
/// transaction-scoped locks. Everything else (transaction control, `SET`, `DISCARD`,
/// `DEALLOCATE`, `LISTEN`, `DO`, `CALL`, DDL such as `CREATE TEMP TABLE`) either ends the
/// transaction or leaves session state that would outlive it, on someone else's session behind a
/// pooler. `SET LOCAL` is allowed: it ends with the transaction.
const ALLOWED: [&str; 9] = [
    "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "TABLE", "MERGE", "LOCK",
];

/// Functions that change session state from inside an allowed statement: `set_config` (session
/// settings; use `SET LOCAL`) and the session-level advisory locks (use the `_xact_` ones).
const REFUSED_FUNCTIONS: [&str; 5] = [
    "set_config",
    "pg_advisory_lock",
    "pg_advisory_lock_shared",
    "pg_try_advisory_lock",
    "pg_try_advisory_lock_shared",
];

/// The first keyword of `sql` (after whitespace, `--` and `/* */` comments, nested as
/// PostgreSQL nests them) and the word after it, as written (compare case-insensitively).
pub(crate) fn leading_words(sql: &str) -> (&str, &str) {
    let mut rest = sql;
    loop {
        rest = rest.trim_start();
        if let Some(comment) = rest.strip_prefix("--") {
            // PostgreSQL ends a `--` comment at a newline or a carriage return.
            rest = comment
                .split_once(['\n', '\r'])
                .map(|(_, r)| r)
                .unwrap_or("");
        } else if rest.starts_with("/*") {
            rest = after_block_comment(rest);
        } else {
            break;
        }
    }
    let mut words = rest
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty());
    (words.next().unwrap_or(""), words.next().unwrap_or(""))
}

/// The refused function `sql` calls, if any: every `(` is checked against the identifier
/// before it (one pass, no allocation: this runs for every handler statement).
fn refused_call(sql: &str) -> Option<&'static str> {
    let bytes = sql.as_bytes();
    for (open, _) in sql.match_indices('(') {
        let mut end = open;
        while end > 0 && bytes[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        let mut start = end;
        while start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            start -= 1;
        }
        let name = &sql[start..end];
        if let Some(refused) = REFUSED_FUNCTIONS
            .iter()
            .find(|f| f.eq_ignore_ascii_case(name))
        {
            return Some(refused);
        }
    }
    None
}

/// What follows the block comment `text` starts with (nested comments included); empty when
/// it never ends.
fn after_block_comment(text: &str) -> &str {
    super::gate::block_comment_end(text.as_bytes(), 0).map_or("", |end| &text[end..])
}

/// Allows only reads, writes and transaction-scoped statements (see [`ALLOWED`] and
/// [`REFUSED_FUNCTIONS`]). A guard against mistakes in trusted handler code, not a sandbox.
pub(crate) fn check_statement(sql: &Sql) -> Result<(), HandlerError> {
    let (first, second) = leading_words(sql.text);
    let allowed = ALLOWED.iter().any(|k| k.eq_ignore_ascii_case(first))
        || (first.eq_ignore_ascii_case("SET") && second.eq_ignore_ascii_case("LOCAL"));
    if !allowed {
        let shown = if first.is_empty() {
            "this".to_owned()
        } else {
            first.to_ascii_uppercase()
        };
        return Err(HandlerError::fatal(format!(
            "a handler may not run {shown} statements: only reads, writes and SET LOCAL; the \
             ledger ends the transaction, and session state would leak to other transactions \
             behind a pooler"
        )));
    }
    if let Some(function) = refused_call(sql.text) {
        return Err(HandlerError::fatal(format!(
            "a handler may not call {function}: it changes session state that outlives the \
             transaction (use SET LOCAL, or pg_advisory_xact_lock)"
        )));
    }
    Ok(())
}

static COMPLETE: Sql = Sql {
    text: "\
WITH done AS (
    UPDATE webhook_event
    SET status = 'completed',
        attempts = attempts + 1,
        response_status = $3,
        response_body = $4,
        completed_at = now()
    WHERE source = $1
      AND event_id = $2
      -- Guarded by the expected state: the row this transaction's claim inserted.
      AND status = 'claimed'
    -- The stored text is what the first answer and every retry send, byte for byte.
    RETURNING response_body::text AS body
)
SELECT (SELECT body FROM done) AS body,
       -- No row: fail the statement (division by zero), so the transaction aborts and the
       -- pipelined COMMIT rolls back the handler's writes instead of committing them.
       1 / (SELECT count(*) FROM done) AS owned",
    types: &[Type::TEXT, Type::TEXT, Type::INT2, Type::JSONB],
};

static COMPLETE_LEASED: Sql = Sql {
    text: "\
WITH done AS (
    UPDATE webhook_event
    SET status = 'completed',
        response_status = $3,
        response_body = $4,
        completed_at = now(),
        lease_expires_at = NULL,
        next_attempt_at = NULL,
        -- The completed event's copy (the source's redact fields replaced) when $6; the body
        -- as received, kept while the event was unfinished, otherwise stays.
        payload = CASE WHEN $6 THEN $7 ELSE payload END
    WHERE source = $1
      AND event_id = $2
      -- Fenced by the lease: the row is ours while it is processing under our token. A lease
      -- that expired and was taken over carries a newer token, and this matches nothing.
      AND status = 'processing'
      AND lease_token = $5
    RETURNING response_body::text AS body
)
SELECT (SELECT body FROM done) AS body,
       -- No row: fail the statement (division by zero), so the transaction aborts and the
       -- pipelined COMMIT rolls back the handler's writes: a lost lease never applies.
       1 / (SELECT count(*) FROM done) AS owned",
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::INT2,
        Type::JSONB,
        Type::INT8,
        Type::BOOL,
        Type::BYTEA,
    ],
};

impl<'c> Tx<'c> {
    /// A transaction already opened by the caller (the claim's).
    pub(crate) fn open(conn: &'c Connection, guard: Guard) -> Self {
        Self {
            conn,
            guard,
            begun: true,
            open: true,
            deferred: Vec::new(),
            targets: &[],
            event_type: "",
            queued: Vec::new(),
            due_at: None,
            touched: false,
            completed_payload: None,
        }
    }

    /// A transaction that begins with its first statement.
    pub(crate) fn lazy(conn: &'c Connection, guard: Guard) -> Self {
        Self {
            conn,
            guard,
            begun: false,
            open: false,
            deferred: Vec::new(),
            targets: &[],
            event_type: "",
            queued: Vec::new(),
            due_at: None,
            touched: false,
            completed_payload: None,
        }
    }

    /// Runs `sql` now and returns its rows (one round trip; in a worker's transaction the first
    /// statement also carries `BEGIN`).
    ///
    /// # Errors
    /// [`HandlerError`] classified from the database error (see `HandlerError::from`), or fatal
    /// for a statement that would end the transaction or set session state.
    pub async fn query(
        &mut self,
        sql: &'static Sql,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, HandlerError> {
        match self.send(sql, params, Want::Rows).await? {
            Sent::Rows(rows) => Ok(rows),
            Sent::Count(_) => Ok(Vec::new()),
        }
    }

    /// Runs `sql` now and returns its first row, if any.
    ///
    /// # Errors
    /// As [`Tx::query`].
    pub async fn query_opt(
        &mut self,
        sql: &'static Sql,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, HandlerError> {
        Ok(self.query(sql, params).await?.into_iter().next())
    }

    /// Runs `sql` now and returns the number of rows it changed.
    ///
    /// # Errors
    /// As [`Tx::query`].
    pub async fn execute(
        &mut self,
        sql: &'static Sql,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, HandlerError> {
        match self.send(sql, params, Want::Count).await? {
            Sent::Count(n) => Ok(n),
            Sent::Rows(rows) => Ok(rows.len() as u64),
        }
    }

    /// Queues `sql` to run at the end of the transaction, pipelined with the completion and
    /// `COMMIT` (no round trip of its own). Use it for writes whose result the handler does not
    /// need. A failure makes the whole event fail (nothing is committed) and is classified like
    /// a failure of [`Tx::execute`].
    ///
    /// # Errors
    /// Fatal when `sql` would end the transaction or set session state.
    pub fn defer(
        &mut self,
        sql: &'static Sql,
        params: Vec<Box<dyn ToSql + Sync + Send>>,
    ) -> Result<(), HandlerError> {
        check_statement(sql)?;
        self.deferred.push(Deferred { sql, params });
        Ok(())
    }

    /// Queues an outbox message for `target` with `payload` (sent as `application/json`): a row
    /// in `outbox`, written with the completion and committed with the claim and the business
    /// writes, or not at all (a handler error, a lost lease, a failed deferred write). No round
    /// trip of its own. The message is number `n` of the event, after the source's built-in
    /// messages and the handler's earlier ones, so its idempotency key is
    /// `{source}:{event_id}:{n}` (`crate::outbox::idempotency_key`); a re-run of the same event
    /// (re-drive, shadow mode) queues no second copy. The worker dispatches it after commit.
    ///
    /// The targets are the source's as `crate::apply::apply` passes them; a `Tx` used outside
    /// `apply` knows none.
    ///
    /// # Errors
    /// [`HandlerError::Fatal`] when `target` is not one of the event's source's configured
    /// targets (`"targets"` in its configuration), or `payload` does not serialise (serde's
    /// error its source): the same event always fails the same way.
    pub fn outbox(
        &mut self,
        target: &str,
        payload: &serde_json::Value,
    ) -> Result<(), HandlerError> {
        if !self.targets.iter().any(|t| t.name == target) {
            let known: Vec<&str> = self.targets.iter().map(|t| t.name.as_str()).collect();
            return Err(HandlerError::fatal(format!(
                "outbox target {target:?} is not configured for this event's source (its \
                 targets: {known:?})"
            )));
        }
        let payload = serde_json::to_vec(payload).map_err(|e| HandlerError::Fatal {
            reason: "outbox payload".to_owned(),
            source: Some(Box::new(e)),
        })?;
        self.queue(target, payload, crate::outbox::JSON, false);
        Ok(())
    }

    /// The event this transaction applies, for its outbox messages: the targets
    /// [`Tx::outbox`] accepts (the event's source's) and the event's type.
    pub(crate) fn for_event(mut self, targets: &'c [Target], event_type: &'c str) -> Self {
        self.targets = targets;
        self.event_type = event_type;
        self
    }

    /// Messages this transaction queues are due at `at` rather than at the transaction's
    /// `now()` (the worker's clock, so its own drain dispatches them).
    pub(crate) fn messages_due_at(mut self, at: SystemTime) -> Self {
        self.due_at = Some(at);
        self
    }

    /// A leased event's completion stores `payload` as the row's payload (the completed copy:
    /// the source's `redact` fields replaced; `None` keeps digests only) instead of keeping the
    /// body as received. Ignored by every other guard (an inline claim stored its completed
    /// copy already).
    pub(crate) fn completed_payload(mut self, payload: Option<Vec<u8>>) -> Self {
        self.completed_payload = Some(payload);
        self
    }

    /// Queues a built-in target's message, the event's body as verified, without checking its
    /// target (from the configuration itself). Its row is marked `verified_body`, so the
    /// target's `transform` applies to it at dispatch.
    pub(crate) fn queue_verified_body(
        &mut self,
        target: &str,
        payload: Vec<u8>,
        content_type: &'static str,
    ) {
        self.queue(target, payload, content_type, true);
    }

    fn queue(
        &mut self,
        target: &str,
        payload: Vec<u8>,
        content_type: &'static str,
        verified_body: bool,
    ) {
        self.queued.push(Queued {
            target: target.to_owned(),
            payload,
            content_type,
            verified_body,
        });
    }

    async fn send(
        &mut self,
        sql: &'static Sql,
        params: &[&(dyn ToSql + Sync)],
        want: Want,
    ) -> Result<Sent, HandlerError> {
        check_statement(sql)?;
        if self.guard == Guard::Plan {
            // Reading before deciding: this handler is not plain SQL after all. What it does
            // with this error does not matter, its result is discarded.
            self.touched = true;
            return Err(HandlerError::retryable(
                "a plain-SQL handler ran a statement before the claim",
            ));
        }
        let conn = self.conn;
        let statement = conn.prepare(sql).await?;
        let run = async {
            match want {
                Want::Rows => conn.query(&statement, params).await.map(Sent::Rows),
                Want::Count => conn.execute(&statement, params).await.map(Sent::Count),
            }
        };
        if self.begun {
            return Ok(run.await?);
        }
        // The first statement of a worker's transaction: BEGIN goes out with it.
        self.begun = true;
        self.open = true;
        let (begun, sent) = in_order(conn.begin(), run).await;
        begun?;
        Ok(sent?)
    }

    /// Runs the deferred writes, stores `status` and `body` as the event's response, marks the
    /// row completed (guarded by how this transaction owns it), and commits: one round trip, all
    /// pipelined. Returns the response exactly as stored, which is what the caller must send.
    ///
    /// # Errors
    /// [`CompleteError::Write`] when a deferred write fails, [`CompleteError::Lost`] when the
    /// completion matched no row, [`CompleteError::Ledger`] when the completion or the commit
    /// fails. Nothing is committed in any of these cases.
    pub async fn complete(
        self,
        key: (&str, &str),
        status: u16,
        body: &serde_json::Value,
    ) -> Result<StoredResponse, CompleteError> {
        Ok(self.complete_counting(key, status, body).await?.0)
    }

    /// [`Tx::complete`], also returning how many outbox messages the commit added (messages
    /// already queued by an earlier run of the event are not counted).
    pub(crate) async fn complete_counting(
        mut self,
        key: (&str, &str),
        status: u16,
        body: &serde_json::Value,
    ) -> Result<(StoredResponse, u64), CompleteError> {
        if self.guard == Guard::Plan {
            // A plan is applied by `super::one_statement`, never committed from here.
            return Err(CompleteError::Lost);
        }
        let conn = self.conn;
        let deferred = std::mem::take(&mut self.deferred);
        let queued = std::mem::take(&mut self.queued);
        let enqueue: Option<Prepared> = if queued.is_empty() {
            None
        } else {
            Some(
                conn.prepare(&super::outbox::ENQUEUE)
                    .await
                    .map_err(LedgerError::from)?,
            )
        };
        let targets: Vec<&str> = queued.iter().map(|m| m.target.as_str()).collect();
        let payloads: Vec<&[u8]> = queued.iter().map(|m| m.payload.as_slice()).collect();
        let content_types: Vec<&str> = queued.iter().map(|m| m.content_type).collect();
        let verified_bodies: Vec<bool> = queued.iter().map(|m| m.verified_body).collect();
        let enqueue_params: [&(dyn ToSql + Sync); 8] = [
            &key.0,
            &key.1,
            &self.event_type,
            &targets,
            &payloads,
            &content_types,
            &self.due_at,
            &verified_bodies,
        ];
        let mut statements = Vec::with_capacity(deferred.len());
        for write in &deferred {
            statements.push(conn.prepare(write.sql).await.map_err(LedgerError::from)?);
        }
        let completion_sql = match self.guard {
            Guard::Shadow | Guard::Plan => None,
            Guard::Claimed => Some(&COMPLETE),
            Guard::Leased { .. } => Some(&COMPLETE_LEASED),
        };
        let completion: Option<Prepared> = match completion_sql {
            Some(sql) => Some(conn.prepare(sql).await.map_err(LedgerError::from)?),
            None => None,
        };
        let token = match self.guard {
            Guard::Leased { token } => Some(token),
            _ => None,
        };
        let status_param = i16::try_from(status).unwrap_or(500);
        let body_param = Json(body);
        let replace_payload = self.completed_payload.is_some();
        let completed_payload = self.completed_payload.take().flatten();
        let mut completion_params: Vec<&(dyn ToSql + Sync)> =
            vec![&key.0, &key.1, &status_param, &body_param];
        if let Some(token) = &token {
            completion_params.push(token);
            completion_params.push(&replace_payload);
            completion_params.push(&completed_payload);
        }
        let write_params: Vec<Vec<&(dyn ToSql + Sync)>> = deferred
            .iter()
            .map(|w| {
                w.params
                    .iter()
                    .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                    .collect()
            })
            .collect();
        let writes: Vec<_> = statements
            .iter()
            .zip(&write_params)
            .map(|(statement, params)| conn.execute(statement, params).boxed())
            .collect();
        let need_begin = !self.begun;
        let begin = async {
            if need_begin {
                conn.begin().await
            } else {
                Ok(())
            }
        };
        let enqueued = async {
            match &enqueue {
                Some(statement) => conn.execute(statement, &enqueue_params).await,
                None => Ok(0),
            }
        };
        let completed = async {
            match &completion {
                Some(statement) => conn.query_opt(statement, &completion_params).await,
                None => Ok(None),
            }
        };
        // From here the COMMIT (or, after an error, its implicit rollback) ends the transaction.
        self.begun = true;
        self.open = false;
        let commit = conn.batch_execute("COMMIT");

        // BEGIN if needed, every write, the outbox messages, the completion, then COMMIT, before
        // awaiting any answer.
        let ((begun, (written, (enqueued, completed))), committed) = in_order(
            in_order(
                begin,
                in_order(all_in_order(writes), in_order(enqueued, completed)),
            ),
            commit,
        )
        .await;
        begun.map_err(LedgerError::from)?;
        // A failed statement aborted the transaction; COMMIT then answers ROLLBACK without an
        // error, so every result must be checked, not only the commit's. The first failure is
        // the cause; the statements after it only report the aborted transaction.
        for result in written {
            result.map_err(|e| CompleteError::Write(e.into()))?;
        }
        let enqueued = enqueued.map_err(LedgerError::from)?;
        let row = match completed {
            Ok(row) => row,
            Err(error)
                if error.code() == Some(&tokio_postgres::error::SqlState::DIVISION_BY_ZERO) =>
            {
                return Err(CompleteError::Lost)
            }
            // A data exception from the completion is the response body the handler chose
            // (e.g. a `\u0000` that jsonb refuses): the handler's failure, like a write's.
            Err(error) if error.code().is_some_and(|c| c.code().starts_with("22")) => {
                return Err(CompleteError::Write(error.into()))
            }
            Err(error) => return Err(LedgerError::from(error).into()),
        };
        committed.map_err(LedgerError::from)?;
        let response = match row {
            Some(row) => StoredResponse {
                status,
                body: row.try_get(0).map_err(LedgerError::from)?,
            },
            // Shadow mode: the handler's response as it returned it.
            None => StoredResponse {
                status,
                body: body.to_string(),
            },
        };
        Ok((response, enqueued))
    }

    /// Rolls the transaction back: a claim disappears as if the delivery never arrived; a
    /// worker's writes are undone (its lease stands until it records the outcome).
    ///
    /// # Errors
    /// [`LedgerError::Db`] when the connection fails (the server rolls back on its own then).
    pub async fn rollback(mut self) -> Result<(), LedgerError> {
        if std::mem::replace(&mut self.open, false) {
            self.conn.batch_execute("ROLLBACK").await?;
        }
        Ok(())
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open {
            // Polling once sends the ROLLBACK on the connection (tokio-postgres queues the
            // message on first poll, as its own Transaction does on drop); the reply is ignored.
            let _ = self.conn.batch_execute("ROLLBACK").now_or_never();
        }
    }
}

enum Want {
    Rows,
    Count,
}

enum Sent {
    Rows(Vec<Row>),
    Count(u64),
}

impl<'c> Tx<'c> {
    /// A plan: a handler's `Tx` that sends nothing (see [`Guard::Plan`]).
    pub(crate) fn plan(conn: &'c Connection) -> Self {
        Self::lazy(conn, Guard::Plan)
    }

    /// The writes the handler deferred through this plan: `None` when it cannot ride in one
    /// statement (it ran a statement, or queued outbox messages, which the transaction shape
    /// writes).
    pub(crate) fn into_plan_writes(mut self) -> Option<Vec<Deferred>> {
        if self.touched || !self.queued.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut self.deferred))
    }
}

/// A transaction for shadow mode's re-processing of a duplicate: the handler runs and its
/// writes commit as a naive receiver's would, and the ledger is not touched. It begins with the
/// handler's first statement (or at completion).
pub fn begin_shadow(conn: &Connection) -> Tx<'_> {
    Tx::lazy(conn, Guard::Shadow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(text: &'static str) -> &'static Sql {
        Box::leak(Box::new(Sql { text, types: &[] }))
    }

    #[test]
    fn transaction_control_and_session_state_are_refused() {
        for text in [
            "COMMIT",
            "  commit;",
            "-- done\nROLLBACK",
            "end",
            "BEGIN",
            "SET statement_timeout = 0",
            "set session lock_timeout = 0",
            "RESET ALL",
            "SAVEPOINT a",
            "DISCARD ALL",
            "PREPARE TRANSACTION 'x'",
            "/* done */ COMMIT",
            "/* a /* nested */ comment */\n  commit",
            "-- one\n/* two */ -- three\nROLLBACK",
            "-- ended by a carriage return\rCOMMIT",
            "DEALLOCATE ALL",
            "DO $$ BEGIN COMMIT; END $$",
            "CALL commits()",
            "CREATE TEMP TABLE t (a int)",
            "LISTEN x",
            "SELECT set_config('synchronous_commit', 'off', false)",
            "select SET_CONFIG ('a.b', 'c', true)",
            "SELECT pg_advisory_lock(1)",
            "WITH x AS (SELECT pg_try_advisory_lock(1)) SELECT * FROM x",
            "",
        ] {
            assert!(check_statement(sql(text)).is_err(), "{text}");
        }
        for text in [
            "SELECT 1",
            "INSERT INTO orders VALUES ($1)",
            "-- a comment\nUPDATE t SET a = 1",
            "SET LOCAL lock_timeout = 100",
            "WITH x AS (SELECT 1) SELECT * FROM x",
            "SELECT pg_advisory_xact_lock(1)",
            "DELETE FROM t WHERE a = 1",
            "LOCK TABLE orders IN SHARE MODE",
            "INSERT INTO notes (text) VALUES ('set_config is just a word here')",
        ] {
            assert!(check_statement(sql(text)).is_ok(), "{text}");
        }
    }
}
