//! A new event in one statement and one round trip: the claim, the handler's writes and the
//! completed response together, for handlers whose effect is plain SQL (see
//! `crate::handler::Handler::plain_sql`).
//!
//! The statement, for a handler that deferred one insert:
//!
//! ```sql
//! WITH claimed AS (
//!     INSERT INTO webhook_event (..., status, attempts, response_status, response_body, completed_at, replay_guard, subject_hash)
//!     VALUES (..., 'completed', 1, $7, $8, now(), $9, $10)
//!     ON CONFLICT DO NOTHING
//!     RETURNING response_body::text AS body
//! ),
//! w1 AS (INSERT INTO orders (...) SELECT $11, $12, ... FROM claimed ON CONFLICT (order_id) DO NOTHING)
//! SELECT <no row columns>, true AS won, body, NULL FROM claimed
//! UNION ALL
//! SELECT <the existing row's columns>, false, NULL, event_id FROM webhook_event
//! WHERE source = $1 AND (event_id = $2 OR replay_guard = $9) AND NOT EXISTS (SELECT 1 FROM claimed)
//! ```
//!
//! - **Gated on the claim.** Each write selects its row `FROM claimed` (`super::gate` rewrites
//!   the handler's `INSERT ... VALUES`), and `claimed` returns a row only when the claim
//!   inserted one: a lost claim writes nothing. The statement is atomic: a write that fails
//!   (a CHECK, a unique violation) fails the claim with it, and nothing is left behind.
//! - **Inserted completed.** The row is written once, already `completed` with its response: no
//!   second tuple version, no dead tuple, no `claimed` state anyone could see.
//! - **A duplicate in the same round trip.** When the claim is lost the same statement returns
//!   the existing row as the statement's snapshot sees it, judged like the transaction shape's
//!   lookup (`super::claim::judge`); a row holding the same body under another id (the replay
//!   guard, `$9`, set only when the scheme does not sign the id or type) is
//!   [`Decided::BodyReplayed`], also in the same round trip. A winner that was still uncommitted when the statement
//!   started is invisible to that snapshot (the insert waited for it and then saw the conflict):
//!   only then is a second statement needed, and the caller takes the transaction shape.
//! - **One lock wait.** A `lock_timeout` is answered from this statement: a wait on the ledger
//!   key (a delivery of the same event in flight) as in flight, any other (a business row or
//!   table a write needs) as the database error, a 503. The transaction shape is not tried
//!   after it: it would wait on the same lock again.
//! - **Limits.** When the session's limits live on the database role (`HOOKLEDGER_DB_TRANSACTION_LIMITS=false`,
//!   what the deploy sets up) the statement is sent alone: one statement, one round trip, its
//!   own implicit transaction. Otherwise it is wrapped in `BEGIN` with its `SET LOCAL` limits
//!   and `COMMIT`, still one round trip ([`super::Connection::one_statement`]).
//!
//! Statements are composed once per sequence of handler statements and cached for the life of
//! the process (at most [`MAX_COMPOSED`] of them; past that, the transaction shape).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use tokio_postgres::error::SqlState;
use tokio_postgres::types::{Json, ToSql, Type};

use super::claim::{conflict, judge, Conflict, Verdict};
use super::gate::gate;
use super::tx::Deferred;
use super::{is_lock_timeout, Connection, Expiry, LedgerError, NewEvent, StoredResponse};
use crate::db::Sql;

/// The most distinct composed statements kept (each handler's sequence of deferred statements
/// is one); a process that would compose more takes the transaction shape for the rest.
pub const MAX_COMPOSED: usize = 256;

/// The most parameters one statement can bind (the protocol counts them in 16 bits:
/// PostgreSQL documentation, "Message Formats", Bind); a plan with more takes the transaction
/// shape, whose statements are one write each.
const MAX_PARAMETERS: usize = u16::MAX as usize;

/// The claim's parameters: `$1` source, `$2` event id, `$3` event type, `$4` digest, `$5`
/// payload, `$6` payload identity, `$7` response status, `$8` response body, `$9` replay guard
/// (the digest, or NULL), `$10` subject hash (or NULL). The handler's statements' parameters follow, each shifted past the
/// ones before.
const CLAIM_TYPES: [Type; 10] = [
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::BYTEA,
    Type::BYTEA,
    Type::BYTEA,
    Type::INT2,
    Type::JSONB,
    Type::BYTEA,
    Type::BYTEA,
];

const CLAIMED: &str = "\
WITH claimed AS (
    INSERT INTO webhook_event
        (source, event_id, event_type, payload_digest, payload, status, payload_identity,
         attempts, response_status, response_body, completed_at, replay_guard, subject_hash)
    VALUES ($1, $2, $3, $4, $5, 'completed', $6, 1, $7, $8, now(), $9, $10)
    -- No conflict target: the key, or the replay guard (the same body under another id, V17).
    -- A concurrent claim of either waits here for the first to commit or roll back.
    ON CONFLICT DO NOTHING
    -- The stored text is what the first answer and every retry send, byte for byte.
    RETURNING response_body::text AS body
)";

/// The existing rows' columns in `super::claim`'s lookup order (so `event_row` reads them),
/// then `won`, the stored body and the row's event id: the row of the key, and the row holding
/// the same body under another id when the delivery has a replay guard (`$9`; NULL matches
/// nothing).
const ANSWER: &str = "
SELECT NULL::text, NULL::bytea, NULL::smallint, NULL::text, NULL::bytea, NULL::timestamptz,
       NULL::timestamptz, NULL::boolean, true AS won, body, NULL::text
FROM claimed
UNION ALL
SELECT status::text, payload_digest, response_status, response_body::text, payload_identity,
       claimed_at, dead_at, replayed_at IS NOT NULL, false, NULL, event_id
FROM webhook_event
WHERE source = $1
  AND (event_id = $2 OR replay_guard = $9)
  AND NOT EXISTS (SELECT 1 FROM claimed)";

/// What a plain-SQL handler decided before any claim: the response to store and the writes to
/// apply with it.
#[derive(Debug)]
pub struct Plan {
    /// The response status (a 2xx).
    pub status: u16,
    /// The response body.
    pub body: serde_json::Value,
    /// The handler's deferred writes, in order.
    pub(crate) writes: Vec<Deferred>,
    /// The composed statement for these writes (see the module docs).
    statement: &'static Sql,
    /// What a won claim answers when it is not the body as stored ([`Plan::answering`]).
    answer: Option<String>,
}

impl Plan {
    /// A plan storing `status` and `body` and applying `writes`, or `None` when the writes
    /// cannot ride in one statement (composing and caching the statement the first time).
    pub(crate) fn new(status: u16, body: serde_json::Value, writes: Vec<Deferred>) -> Option<Self> {
        let sqls: Vec<&'static Sql> = writes.iter().map(|w| w.sql).collect();
        let statement = composed(&sqls)?;
        Some(Self {
            status,
            body,
            writes,
            statement,
            answer: None,
        })
    }

    /// The same plan answering a won claim with `answer` instead of the body as stored: the
    /// handler's answer when the stored body is its sealed form (`crate::privacy::response`).
    pub(crate) fn answering(mut self, answer: String) -> Self {
        self.answer = Some(answer);
        self
    }

    /// What a won claim answers: [`Plan::answering`]'s text, else the stored body `stored`.
    pub(crate) fn answer_for(&self, stored: String) -> String {
        self.answer.clone().unwrap_or(stored)
    }
}

/// What the one statement decided.
#[derive(Debug)]
pub enum Decided {
    /// The claim won: the row is committed `completed` with this response (exactly as stored)
    /// and the handler's writes are committed with it.
    Won(StoredResponse),
    /// The claim was lost to a committed row: a completed duplicate (its stored response).
    Completed(StoredResponse),
    /// The claim was lost to a row with another payload: 409, nothing written.
    DigestMismatch,
    /// The claim was lost to a committed row someone else owns now (pending or processing), or
    /// waited past `lock_timeout` on a delivery of the same key still in flight: 409 with
    /// `Retry-After`, nothing written.
    InFlight,
    /// The claim was lost to a committed row holding the same body under another event id
    /// (the replay guard): nothing written; answered like a duplicate of it.
    BodyReplayed(super::Original),
    /// Nothing was written and the statement cannot decide (an expired or dead row to take
    /// again, a winner committed after the statement began, a write the database refused):
    /// take the transaction shape, which decides every case.
    Undecided,
}

/// The composed statement for a sequence of handler statements, or `None` when one of them is
/// not the shape `super::gate` rewrites (or the cache is full).
fn composed(writes: &[&'static Sql]) -> Option<&'static Sql> {
    static CACHE: OnceLock<Mutex<HashMap<Vec<usize>, Option<&'static Sql>>>> = OnceLock::new();
    let key: Vec<usize> = writes
        .iter()
        .map(|sql| *sql as *const Sql as usize)
        .collect();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(found) = cache.get(&key) {
        return *found;
    }
    if cache.len() >= MAX_COMPOSED {
        return None;
    }
    let built = compose(writes);
    cache.insert(key, built);
    built
}

/// Builds (and leaks, once per sequence: see [`composed`]) the statement for `writes`.
fn compose(writes: &[&'static Sql]) -> Option<&'static Sql> {
    let mut text = String::from(CLAIMED);
    let mut types: Vec<Type> = CLAIM_TYPES.to_vec();
    for (n, write) in writes.iter().enumerate() {
        let gated = gate(write.text, write.types.len(), types.len())?;
        text.push_str(&format!(",\nw{} AS (\n{}\n)", n + 1, gated.text));
        // Every declared type is passed (the handler passes one value per declared type).
        types.extend(write.types.iter().cloned());
    }
    if types.len() > MAX_PARAMETERS {
        return None;
    }
    text.push_str(ANSWER);
    let sql: &'static Sql = Box::leak(Box::new(Sql {
        text: Box::leak(text.into_boxed_str()),
        types: Box::leak(types.into_boxed_slice()),
    }));
    Some(sql)
}

/// Claims `event` (a signed delivery, never a replayed one) and applies `plan` in one
/// statement; see the module docs.
///
/// A `lock_timeout` (SQLSTATE 55P03) is decided here, never retried in the transaction shape
/// (which would wait on the same lock a second time: twice the lock timeout, or the client
/// deadline): a wait on the ledger key (an in-flight delivery of the same event: see
/// [`waited_on_the_ledger`]) is [`Decided::InFlight`], any other wait (a business row or table
/// a handler write needs) is the error, answered 503 like the transaction shape's.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails for a reason the transaction shape would fail for
/// too (check [`LedgerError::is_unavailable`]), including a `lock_timeout` on anything but the
/// ledger key. A data exception or integrity violation (SQLSTATE classes 22 and 23: a write or
/// the response body the database refuses) or a cardinality violation (class 21: two writes of
/// one plan upserting the same row, which one statement cannot do) or a feature the composed
/// statement cannot use (class 0A: a write to a table with a `DO ALSO` or conditional rule,
/// which PostgreSQL refuses inside `WITH`) is [`Decided::Undecided`],
/// so the transaction shape runs the handler again and classifies the failure as it always
/// does.
pub async fn claim_and_complete(
    conn: &Connection,
    event: &NewEvent<'_>,
    plan: &Plan,
    expiry: &Expiry,
) -> Result<Decided, LedgerError> {
    debug_assert!(!event.replayed, "replay takes the transaction shape");
    let bound = Bound::new(event, plan);
    let Some(params) = bound.params(event, plan) else {
        // A handler passed more or fewer values than its statement declares: the transaction
        // shape sends it as written and reports the database's error.
        return Ok(Decided::Undecided);
    };
    match conn.one_statement(plan.statement, &params).await {
        Ok(rows) => read(&rows, event, plan, expiry),
        Err(error) => failed(error),
    }
}

/// How many events [`claim_and_complete_all`] sends in one transaction at most: the caller
/// splits a longer run. 500 statements of a few kilobytes each are one pipelined write of about
/// a megabyte and a few milliseconds of server time, well inside the client deadline; a
/// transaction of 5,000 (the most a batch holds, `MAX_BATCH_ITEMS`) would hold 5,000 new keys
/// locked until its commit (a concurrent delivery of any of them waits on it) and, when one
/// statement fails, roll back and send again ten times the work.
pub const MAX_PIPELINED: usize = 500;

/// What [`claim_and_complete_all`] decided for its events.
#[derive(Debug)]
pub enum Pipelined {
    /// The transaction committed: each event's decision, in the order given, read from its
    /// statement's rows as [`claim_and_complete`] reads them (an event whose plan does not
    /// bind was not sent: [`Decided::Undecided`]).
    Committed(Vec<Result<Decided, LedgerError>>),
    /// The statement of the event at `at` failed and the transaction rolled back: nothing of
    /// it is written. `decided` is what [`claim_and_complete`] decides on that failure alone
    /// ([`Decided::InFlight`] on a lock wait for the ledger key, [`Decided::Undecided`] for an
    /// error the transaction shape classifies, else the error). The events before `at` were
    /// not decided and may be sent again; the ones after it were refused only because the
    /// transaction was aborted.
    RolledBack {
        /// The index of the event whose statement failed first.
        at: usize,
        /// That event's decision on its own failure.
        decided: Result<Decided, LedgerError>,
    },
}

/// Claims each of `events` (signed deliveries, never replayed ones; at most [`MAX_PIPELINED`])
/// and applies its plan, each in its own statement as [`claim_and_complete`] does, all in one
/// transaction: `BEGIN` with the session's limits, the statements in order and `COMMIT`
/// pipelined ([`Connection::autocommit_all`]): one round trip and one commit for the lot.
///
/// Each statement sees the ones before it (read committed: a statement's snapshot includes
/// its own transaction's earlier writes), so two events of the list with the same key are
/// decided as if sent one after the other: the second is a completed duplicate (or a digest
/// mismatch) of the first. A deadlock (two transactions claiming overlapping keys in opposite
/// orders, which one statement alone cannot meet) rolls back like any failure and its event is
/// [`Decided::Undecided`]: the per-event path decides it without waiting on anyone's batch.
///
/// # Errors
/// [`LedgerError::Db`] when `BEGIN`, a prepare or `COMMIT` fails: what was committed is then
/// unknown (the per-event path decides each event again, safely: the ledger answers what is
/// already there).
pub async fn claim_and_complete_all(
    conn: &Connection,
    events: &[(NewEvent<'_>, &Plan)],
    expiry: &Expiry,
) -> Result<Pipelined, LedgerError> {
    debug_assert!(events.iter().all(|(event, _)| !event.replayed));
    let bound: Vec<Bound<'_>> = events
        .iter()
        .map(|(event, plan)| Bound::new(event, plan))
        .collect();
    let params: Vec<Option<Vec<&(dyn ToSql + Sync)>>> = events
        .iter()
        .zip(&bound)
        .map(|((event, plan), bound)| bound.params(event, plan))
        .collect();
    let statements: Vec<(&'static Sql, &[&(dyn ToSql + Sync)])> = events
        .iter()
        .zip(&params)
        .filter_map(|((_, plan), params)| Some((plan.statement, params.as_deref()?)))
        .collect();
    let mut results = conn.autocommit_all(&statements).await?.into_iter();
    let mut decided = Vec::with_capacity(events.len());
    for (at, ((event, plan), params)) in events.iter().zip(&params).enumerate() {
        if params.is_none() {
            decided.push(Ok(Decided::Undecided));
            continue;
        }
        match results.next() {
            Some(Ok(rows)) => decided.push(read(&rows, event, plan, expiry)),
            Some(Err(error)) if error.code() == Some(&SqlState::T_R_DEADLOCK_DETECTED) => {
                return Ok(Pipelined::RolledBack {
                    at,
                    decided: Ok(Decided::Undecided),
                })
            }
            Some(Err(error)) => {
                return Ok(Pipelined::RolledBack {
                    at,
                    decided: failed(error),
                })
            }
            // One result per statement sent (`autocommit_all`).
            None => decided.push(Ok(Decided::Undecided)),
        }
    }
    Ok(Pipelined::Committed(decided))
}

/// The values an event's statement binds besides its plan's writes, owned here so that the
/// parameter list can borrow them.
struct Bound<'a> {
    digest: &'a [u8],
    identity: &'a [u8],
    status: i16,
    body: Json<&'a serde_json::Value>,
    guard: Option<&'a [u8]>,
    subject: Option<&'a [u8]>,
}

impl<'a> Bound<'a> {
    fn new(event: &'a NewEvent<'_>, plan: &'a Plan) -> Self {
        Self {
            digest: event.digest,
            identity: event.identity,
            status: i16::try_from(plan.status).unwrap_or(500),
            body: Json(&plan.body),
            guard: event.replay_guard(),
            subject: event.subject.map(<[u8; 32]>::as_slice),
        }
    }

    /// The statement's parameters in order (the claim's, then each write's), or `None` when
    /// their number is not the statement's (a handler passed more or fewer values than its
    /// statement declares).
    fn params(
        &'a self,
        event: &'a NewEvent<'_>,
        plan: &'a Plan,
    ) -> Option<Vec<&'a (dyn ToSql + Sync)>> {
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![
            &event.source,
            &event.event_id,
            &event.event_type,
            &self.digest,
            &event.payload,
            &self.identity,
            &self.status,
            &self.body,
            &self.guard,
            &self.subject,
        ];
        for write in &plan.writes {
            params.extend(
                write
                    .params
                    .iter()
                    .map(|p| p.as_ref() as &(dyn ToSql + Sync)),
            );
        }
        (params.len() == plan.statement.types.len()).then_some(params)
    }
}

/// The decision on a failed statement (see [`claim_and_complete`]'s errors).
fn failed(error: tokio_postgres::Error) -> Result<Decided, LedgerError> {
    // A lock wait that timed out was the claim's (a duplicate of an event still in flight:
    // 409) or a handler write's (a business row or table someone holds: 503). Decided here:
    // the transaction shape would only wait on the same lock again.
    if is_lock_timeout(&error) {
        return if waited_on_the_ledger(&error) {
            Ok(Decided::InFlight)
        } else {
            Err(error.into())
        };
    }
    if error.code().is_some_and(|c| {
        ["0A", "21", "22", "23"]
            .iter()
            .any(|k| c.code().starts_with(k))
    }) {
        return Ok(Decided::Undecided);
    }
    Err(error.into())
}

/// The decision read from the rows of `event`'s statement (see the module docs): the one
/// place both [`claim_and_complete`] and [`claim_and_complete_all`] read it.
fn read(
    rows: &[tokio_postgres::Row],
    event: &NewEvent<'_>,
    plan: &Plan,
    expiry: &Expiry,
) -> Result<Decided, LedgerError> {
    let Some(first) = rows.first() else {
        return Ok(Decided::Undecided);
    };
    if first.try_get::<_, bool>(8)? {
        return Ok(Decided::Won(StoredResponse {
            status: plan.status,
            body: first.try_get(9)?,
        }));
    }
    let existing = match conflict(rows, event.event_id, 10)? {
        Conflict::Own(row) => row,
        Conflict::Guarded(original) => return Ok(Decided::BodyReplayed(original)),
        Conflict::Gone => return Ok(Decided::Undecided),
    };
    Ok(match judge(&existing, event, expiry) {
        Verdict::Completed(response) => Decided::Completed(response),
        Verdict::DigestMismatch => Decided::DigestMismatch,
        Verdict::InFlight => Decided::InFlight,
        Verdict::Expired | Verdict::Dead | Verdict::Known(_) => Decided::Undecided,
    })
}

/// Whether a `lock_timeout` `error` ended a wait on a row of the ledger table itself (the
/// claim's `ON CONFLICT` waiting for an in-flight delivery of the same key to commit or roll
/// back), rather than on a handler's business row or table.
///
/// PostgreSQL says which row a statement waited on in the error's context: a wait for another
/// transaction on a tuple is reported "while inserting index tuple (0,1) in relation
/// \"webhook_event\"" (`XactLockTableWait`'s error context in `src/backend/storage/lmgr/lmgr.c`,
/// the relation's name unqualified, the words translated with `lc_messages`), so the relation's
/// name is looked for as a whole identifier. A wait the context does not name (a table lock, a
/// speculative insertion's token) counts as not the ledger's: the answer is then the 503 of a
/// business lock, which the provider retries just the same.
fn waited_on_the_ledger(error: &tokio_postgres::Error) -> bool {
    error
        .as_db_error()
        .and_then(|db| db.where_())
        .is_some_and(names_the_ledger)
}

/// Whether an error `context` names the ledger table as a whole identifier.
fn names_the_ledger(context: &str) -> bool {
    const TABLE: &str = "webhook_event";
    let identifier = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    context.match_indices(TABLE).any(|(at, _)| {
        let before = context[..at].chars().next_back();
        let after = context[at + TABLE.len()..].chars().next();
        !before.is_some_and(identifier) && !after.is_some_and(identifier)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    static ORDER: Sql = Sql {
        text: "INSERT INTO orders (order_id, total_minor) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        types: &[Type::TEXT, Type::INT8],
    };
    static UPDATE: Sql = Sql {
        text: "UPDATE orders SET total_minor = $2 WHERE order_id = $1",
        types: &[Type::TEXT, Type::INT8],
    };

    /// The example `payment_intent.succeeded` handler's insert, as written there.
    static EXAMPLE_ORDER: Sql = Sql {
        text: "\
INSERT INTO orders (order_id, total_minor, currency, source, event_id)
VALUES ($1, $2, $3, $4, $5)
-- Another event already recorded this order: the first record stands.
ON CONFLICT (order_id) DO NOTHING",
        types: &[Type::TEXT, Type::INT8, Type::TEXT, Type::TEXT, Type::TEXT],
    };

    #[test]
    fn a_lock_wait_is_the_ledgers_only_when_its_context_names_the_ledger_table() {
        for context in [
            "while inserting index tuple (0,1) in relation \"webhook_event\"",
            "beim Einfügen von Indextupel (0,1) in Relation »webhook_event«",
        ] {
            assert!(names_the_ledger(context), "{context}");
        }
        for context in [
            "while inserting index tuple (0,1) in relation \"orders\"",
            "while updating tuple (0,2) in relation \"webhook_event_archive\"",
            "while locking tuple (0,2) in relation \"my_webhook_event\"",
            "",
        ] {
            assert!(!names_the_ledger(context), "{context}");
        }
    }

    #[test]
    fn the_example_handlers_insert_rides_in_the_claims_statement() {
        let sql = composed(&[&EXAMPLE_ORDER]).expect("composed");
        assert!(
            sql.text
                .contains("SELECT $11, $12, $13, $14, $15 FROM claimed"),
            "{}",
            sql.text
        );
    }

    #[test]
    fn writes_are_numbered_after_the_claim_and_each_other() {
        let sql = composed(&[&ORDER, &ORDER]).expect("composed");
        assert!(
            sql.text.contains("SELECT $11, $12 FROM claimed"),
            "{}",
            sql.text
        );
        assert!(
            sql.text.contains("SELECT $13, $14 FROM claimed"),
            "{}",
            sql.text
        );
        assert_eq!(sql.types.len(), 14);
        // Cached: the same sequence is the same statement.
        assert!(std::ptr::eq(
            sql,
            composed(&[&ORDER, &ORDER]).expect("cached")
        ));
        assert!(
            composed(&[]).is_some(),
            "no writes (an ignored event) is one statement too"
        );
        assert!(composed(&[&ORDER, &UPDATE]).is_none());
    }
}
