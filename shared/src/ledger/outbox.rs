//! Every statement on `outbox`: queue an event's messages ([`ENQUEUE`], pipelined by
//! [`super::Tx`] with the completion and `COMMIT`), lease due messages ([`lease_due`]) and record
//! what their dispatch did ([`record`]).
//!
//! Status transitions (the migration's table says who moves a row):
//!
//! | from | to | statement |
//! |---|---|---|
//! | (none) | `pending` | [`ENQUEUE`], in the claim's transaction |
//! | `pending` (due), `processing` (lease expired) | `processing` | [`lease_due`] |
//! | `processing` | `delivered` | [`record`], [`Outcome::Delivered`] |
//! | `processing` | `pending` | [`record`], [`Outcome::Retry`] or [`Outcome::Release`] |
//! | `processing` | `dead` | [`record`], [`Outcome::Dead`] or [`Outcome::Abandoned`] |
//!
//! **The lease counts the attempt.** Unlike `webhook_event` (whose worker commits a separate
//! `start` just before the handler), the worker dispatches every message it leases at once, so
//! [`lease_due`] bumps `attempts` itself: one statement fewer per message, and a dispatch that
//! kills its worker still counts once its lease expires. A leased message the worker does not
//! dispatch after all (out of invocation time) is given back with [`Outcome::Release`], which
//! undoes that attempt.
//!
//! Every outcome is fenced by the lease token (`status = 'processing' AND lease_token = n`): a
//! worker whose lease expired and was taken over records nothing, and the message is counted as
//! lost rather than overwriting the new owner's state.
//!
//! Statements and round trips (each function below is one statement in its own transaction,
//! `BEGIN`, the statement and `COMMIT` pipelined: one round trip):
//!
//! - queueing: no round trip of its own, one statement per **event** whatever its number of
//!   messages (pipelined with the completion and `COMMIT`);
//! - dispatching: [`lease_due`] once per batch plus [`record`] once per batch: 2 statements and
//!   2 round trips per batch, `2 / B` per message (`B` is the worker's `outbox_concurrency`,
//!   16 by default: 0.125 of each per message), plus one empty [`lease_due`] that ends the drain.
//!
//! Measured with `log_statement = 'all'` (2026-12): 8 inline events with 2 messages each logged
//! 8 `INSERT INTO outbox` (one per event, between the claim and the completion); the drain that
//! then delivered all 16 logged 2 outbox leases (16 messages, then none) and 1 record.

use std::time::SystemTime;

use tokio_postgres::types::{ToSql, Type};

use super::{Connection, LedgerError};
use crate::db::Sql;
use crate::outbox::Message;

/// Queues an event's messages: one row per message, all in one statement, in the claim's
/// transaction (pipelined with the completion by [`super::Tx`]).
///
/// A message is identified by its target and its rank among the event's messages to that
/// target (the first to `billing`, the second to `billing`, ...), not by its position in the
/// list: a re-run of the same event (re-drive of an ignored event, shadow mode) queues only the
/// messages no earlier run queued, numbered after the existing ones, so a target added to the
/// configuration since gets its message, and a target that already had one gets no second copy
/// under a new key, whatever the order of the targets now. On an event's first run (the hot
/// path) the look-up of earlier messages is one probe of the primary key that finds nothing.
///
/// Only the messages of the key's current life count as queued: those created since its
/// `life_started_at` (migration V19: the first claim, or the retake of the expired key). A key
/// past its retention, claimed again (swept or not), is a new life of the event, so every
/// target gets it again, numbered after the earlier life's messages (new idempotency keys),
/// which stay in the outbox until the sweep deletes them by their own age (a delivered message
/// outlives its key: it is kept for the retention from its delivery).
pub(crate) static ENQUEUE: Sql = Sql {
    text: "\
WITH life AS (
    -- No ledger row (never the case in a claim's transaction): every message counts.
    SELECT coalesce(
        (SELECT life_started_at FROM webhook_event WHERE source = $1 AND event_id = $2),
        '-infinity') AS started_at
),
numbered AS (
    SELECT coalesce(max(n), 0) AS last
    FROM outbox
    WHERE source = $1 AND event_id = $2
),
existing AS (
    SELECT o.target, o.n, row_number() OVER (PARTITION BY o.target ORDER BY o.n) AS k
    FROM outbox o, life
    WHERE o.source = $1 AND o.event_id = $2
      -- An earlier life's messages (the key expired and was claimed again) were for that life.
      AND o.created_at >= life.started_at
),
incoming AS (
    SELECT m.ord, m.target, m.payload, m.content_type, m.verified_body,
           row_number() OVER (PARTITION BY m.target ORDER BY m.ord) AS k
    FROM unnest($4::text[], $5::bytea[], $6::text[], $8::bool[]) WITH ORDINALITY
        AS m (target, payload, content_type, verified_body, ord)
),
fresh AS (
    SELECT i.target, i.payload, i.content_type, i.verified_body,
           row_number() OVER (ORDER BY i.ord) AS position
    FROM incoming i
    WHERE NOT EXISTS (SELECT 1 FROM existing e WHERE e.target = i.target AND e.k = i.k)
)
INSERT INTO outbox
    (source, event_id, n, event_type, target, payload, content_type, verified_body,
     next_attempt_at)
SELECT $1, $2, (SELECT last FROM numbered) + f.position, $3, f.target,
       -- verified_body: a built-in target's message (the event's body as verified, which the
       -- target's transform applies to at dispatch), not a handler's tx.outbox (V21).
       f.payload, f.content_type, f.verified_body,
       -- Due at once: the worker passes its own clock (so its drain sees what it wrote), the
       -- receiver the transaction's.
       coalesce($7, now())
FROM fresh f
-- Two re-runs at once (shadow duplicates) may pick the same number: the first stands.
ON CONFLICT (source, event_id, n) DO NOTHING",
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT_ARRAY,
        Type::BYTEA_ARRAY,
        Type::TEXT_ARRAY,
        Type::TIMESTAMPTZ,
        Type::BOOL_ARRAY,
    ],
};

/// One leased message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    /// The message, as a target dispatches it (`attempts` = attempts before this one).
    pub message: Message,
    /// This attempt's number (1 for the first): the lease counted it.
    pub attempt: i32,
    /// This lease's fencing token.
    pub lease_token: i64,
}

static LEASE_DUE: Sql = Sql {
    text: "\
WITH due AS (
    SELECT source, event_id, n
    FROM outbox
    -- Pending messages whose time has come, and processing ones whose lease expired (a worker
    -- died mid-dispatch): leasing sets next_attempt_at to the lease's expiry, so one range on
    -- the partial index outbox_due_idx finds both, oldest first.
    WHERE status IN ('pending', 'processing')
      AND next_attempt_at <= $1
    ORDER BY next_attempt_at
    LIMIT $3
    -- Messages another worker is leasing or dispatching right now are skipped, not waited for.
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox AS o
SET status = 'processing',
    -- A new token for every lease: the previous holder's outcome no longer matches.
    lease_token = o.lease_token + 1,
    lease_expires_at = $2,
    next_attempt_at = $2,
    -- The worker dispatches what it leases at once, so the lease counts the attempt (a
    -- release undoes it).
    attempts = o.attempts + 1
FROM due
WHERE o.source = due.source
  AND o.event_id = due.event_id
  AND o.n = due.n
RETURNING o.source, o.event_id, o.n, o.event_type, o.target, o.payload, o.content_type,
          o.attempts, o.lease_token, o.created_at, o.verified_body",
    types: &[Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// Leases at most `limit` due messages at `now` until `lease_expires_at`, counting an attempt
/// of each, in one statement (one round trip). Concurrent workers get disjoint messages. An
/// empty vector means nothing is due.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn lease_due(
    conn: &Connection,
    now: SystemTime,
    lease_expires_at: SystemTime,
    limit: i64,
) -> Result<Vec<Leased>, LedgerError> {
    let rows = conn
        .autocommit(&LEASE_DUE, &[&now, &lease_expires_at, &limit])
        .await?;
    rows.iter()
        .map(|row| {
            let attempt: i32 = row.try_get(7)?;
            Ok(Leased {
                message: Message {
                    source: row.try_get(0)?,
                    event_id: row.try_get(1)?,
                    n: row.try_get(2)?,
                    event_type: row.try_get(3)?,
                    target: row.try_get(4)?,
                    payload: row.try_get(5)?,
                    content_type: row.try_get(6)?,
                    verified_body: row.try_get(10)?,
                    attempts: attempt - 1,
                    created_at: row.try_get(9)?,
                },
                attempt,
                lease_token: row.try_get(8)?,
            })
        })
        .collect()
}

/// What a leased message's dispatch came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The target accepted it: `delivered`, with its status code when it has one.
    Delivered {
        /// The target's status code (HTTP).
        status: Option<u16>,
    },
    /// A retryable failure: `pending` again, due at `at`.
    Retry {
        /// When it is due again.
        at: SystemTime,
        /// Why, for `last_error` (bounded to [`super::MAX_ERROR_CHARS`]).
        error: String,
        /// The target's status code, when it answered.
        status: Option<u16>,
    },
    /// A fatal failure, or the attempts are used up: `dead`, kept for an operator.
    Dead {
        /// Why, for `last_error` (bounded as for `Retry`).
        error: String,
        /// The target's status code, when it answered.
        status: Option<u16>,
    },
    /// Not dispatched after all (the invocation ran out of time): `pending`, due at `at`, the
    /// attempt the lease counted undone, `last_error` and `last_status` untouched.
    Release {
        /// When it is due again.
        at: SystemTime,
    },
    /// Not dispatched because the attempts were already used up (the last one's worker died
    /// before recording it): `dead`, the attempt the lease counted undone.
    Abandoned {
        /// Why, for `last_error`.
        error: String,
    },
}

impl Outcome {
    fn label(&self) -> &'static str {
        match self {
            Outcome::Delivered { .. } => "delivered",
            Outcome::Retry { .. } => "retry",
            Outcome::Dead { .. } => "dead",
            Outcome::Release { .. } => "release",
            Outcome::Abandoned { .. } => "abandoned",
        }
    }
}

static RECORD: Sql = Sql {
    text: "\
UPDATE outbox AS o
SET status = CASE r.outcome
        WHEN 'delivered' THEN 'delivered'
        WHEN 'dead' THEN 'dead'
        WHEN 'abandoned' THEN 'dead'
        ELSE 'pending'
    END::outbox_status,
    -- A release or an abandoned message was never dispatched: undo the lease's attempt.
    attempts = o.attempts - CASE WHEN r.outcome IN ('release', 'abandoned') THEN 1 ELSE 0 END,
    next_attempt_at = coalesce(r.next_attempt_at, o.next_attempt_at),
    lease_expires_at = NULL,
    -- A delivered message has no error any more (its earlier failures are in `attempts`).
    last_error = CASE WHEN r.outcome = 'release' THEN o.last_error
                      WHEN r.outcome = 'delivered' THEN NULL
                      ELSE coalesce(r.last_error, o.last_error) END,
    last_status = CASE WHEN r.outcome IN ('release', 'abandoned') THEN o.last_status ELSE r.last_status END,
    delivered_at = CASE WHEN r.outcome = 'delivered' THEN now() END,
    -- Dead messages keep their own retention, counted from here.
    dead_at = CASE WHEN r.outcome IN ('dead', 'abandoned') THEN now() END
FROM unnest($1::text[], $2::text[], $3::int4[], $4::int8[], $5::text[], $6::timestamptz[],
            $7::text[], $8::int2[])
    AS r (source, event_id, n, lease_token, outcome, next_attempt_at, last_error, last_status)
WHERE o.source = r.source
  AND o.event_id = r.event_id
  AND o.n = r.n
  -- Fenced by the lease: a worker whose lease expired and was taken over records nothing.
  AND o.status = 'processing'
  AND o.lease_token = r.lease_token
RETURNING o.source, o.event_id, o.n",
    types: &[
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
        Type::INT4_ARRAY,
        Type::INT8_ARRAY,
        Type::TEXT_ARRAY,
        Type::TIMESTAMPTZ_ARRAY,
        Type::TEXT_ARRAY,
        Type::INT2_ARRAY,
    ],
};

/// Records the outcomes of a batch of leased messages, each fenced by its lease token, in one
/// statement (one round trip, whatever the batch's size). Returns, in the order given, whether
/// each was recorded: `false` means its lease was lost (expired and taken over by another
/// worker), an outcome, not an error. An empty batch sends nothing.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails (nothing is recorded then; the leases expire and
/// the messages come back).
pub async fn record(
    conn: &Connection,
    outcomes: &[(&Leased, Outcome)],
) -> Result<Vec<bool>, LedgerError> {
    if outcomes.is_empty() {
        return Ok(Vec::new());
    }
    let mut sources = Vec::with_capacity(outcomes.len());
    let mut event_ids = Vec::with_capacity(outcomes.len());
    let mut ns = Vec::with_capacity(outcomes.len());
    let mut tokens = Vec::with_capacity(outcomes.len());
    let mut labels = Vec::with_capacity(outcomes.len());
    let mut next = Vec::with_capacity(outcomes.len());
    let mut errors = Vec::with_capacity(outcomes.len());
    let mut statuses = Vec::with_capacity(outcomes.len());
    for (leased, outcome) in outcomes {
        sources.push(leased.message.source.as_str());
        event_ids.push(leased.message.event_id.as_str());
        ns.push(leased.message.n);
        tokens.push(leased.lease_token);
        labels.push(outcome.label());
        let (at, error, status) = match outcome {
            Outcome::Delivered { status } => (None, None, *status),
            Outcome::Retry { at, error, status } => (Some(*at), Some(error.as_str()), *status),
            Outcome::Dead { error, status } => (None, Some(error.as_str()), *status),
            Outcome::Release { at } => (Some(*at), None, None),
            Outcome::Abandoned { error } => (None, Some(error.as_str()), None),
        };
        next.push(at);
        errors.push(error.map(super::bounded_error));
        statuses.push(status.map(|s| i16::try_from(s).unwrap_or(i16::MAX)));
    }
    let params: [&(dyn ToSql + Sync); 8] = [
        &sources, &event_ids, &ns, &tokens, &labels, &next, &errors, &statuses,
    ];
    let rows = conn.autocommit(&RECORD, &params).await?;
    let mut recorded = std::collections::HashSet::with_capacity(rows.len());
    for row in &rows {
        let source: String = row.try_get(0)?;
        let event_id: String = row.try_get(1)?;
        let n: i32 = row.try_get(2)?;
        recorded.insert((source, event_id, n));
    }
    Ok(outcomes
        .iter()
        .map(|(leased, _)| {
            let m = &leased.message;
            recorded.contains(&(m.source.clone(), m.event_id.clone(), m.n))
        })
        .collect())
}
