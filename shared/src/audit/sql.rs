//! The auditor's statements: read-only figures over `webhook_event`, `outbox`, `ordering_tie`
//! and `pg_stat_activity`, plus the one row of `audit_run` that remembers the last run.
//!
//! Every statement reads through an index (the end-to-end test
//! `audit_queries_are_served_by_indexes` checks each plan on a million rows), and every count
//! over a set that can grow without bound is taken over at most `cap` rows (a `LIMIT` under
//! the `count`), so an audit stays fast however far behind the worker or the sweeper is:
//!
//! | statement | index |
//! |---|---|
//! | [`STUCK_SUMMARY`], [`STUCK_KEYS`] | claims: `webhook_event_stuck_claim_idx` (V11, index-only for the summary); leases: `webhook_event_processing_idx` (V10) |
//! | [`BACKLOG`] | `webhook_event_due_idx` |
//! | [`NEWEST_KEY`] | `webhook_event_source_claimed_at_idx`, backward |
//! | [`PAST_RETENTION`] | `webhook_event_source_claimed_at_idx`, `webhook_event_dead_idx` |
//! | [`DEAD_LETTERS`] | `webhook_event_dead_idx` |
//! | [`TIES_SINCE`] | `ordering_tie_seen_at_idx` |
//! | [`OUTBOX_BACKLOG`] | `outbox_due_idx` (index-only) |
//! | [`OUTBOX_DEAD`] | `outbox_dead_idx` |
//!
//! The public statics are the exact texts run, so the plan test explains what runs.

use std::collections::BTreeMap;
use std::time::SystemTime;

use tokio_postgres::types::Type;

use crate::db::Sql;
use crate::ledger::{Connection, LedgerError};

/// Locks the single `audit_run` row and reads `last_run_at` (NULL before the first recorded
/// run). A second audit at the same time waits here (bounded by `lock_timeout`).
pub static LOCK_RUN: Sql = Sql {
    text: "SELECT last_run_at FROM audit_run WHERE id FOR UPDATE",
    types: &[],
};

/// Reads `last_run_at` without locking: a read-only audit ([`crate::audit::peek`]) neither waits
/// on a recording one nor makes it wait.
pub static READ_RUN: Sql = Sql {
    text: "SELECT last_run_at FROM audit_run WHERE id",
    types: &[],
};

/// Moves `last_run_at` to `$1`, never backwards (a clock behind the last run's leaves it).
pub static RECORD_RUN: Sql = Sql {
    text: "UPDATE audit_run SET last_run_at = GREATEST(last_run_at, $1) WHERE id",
    types: &[Type::TIMESTAMPTZ],
};

/// Stuck work per source: `claimed` rows claimed before `$1` (now - stuck_after) and
/// `processing` rows whose lease expired before `$2` (now; `webhook_event_processing_idx`). `(source, count, oldest since)`, where
/// "since" is `claimed_at` for a claim and `lease_expires_at` for an expired lease; each half
/// reads at most `$3` rows, oldest first.
pub static STUCK_SUMMARY: Sql = Sql {
    text: "\
WITH stuck AS (
    (SELECT source, claimed_at AS since
     FROM webhook_event
     WHERE status = 'claimed' AND claimed_at < $1
     ORDER BY claimed_at
     LIMIT $3)
    UNION ALL
    (SELECT source, lease_expires_at
     FROM webhook_event
     WHERE status = 'processing' AND lease_expires_at < $2
     ORDER BY lease_expires_at
     LIMIT $3)
)
SELECT source, count(*), min(since) FROM stuck GROUP BY source",
    types: &[Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// The `$3` oldest stuck keys (as [`STUCK_SUMMARY`]): `(source, event_id, since)`, oldest
/// first.
pub static STUCK_KEYS: Sql = Sql {
    text: "\
(SELECT source, event_id, claimed_at AS since
 FROM webhook_event
 WHERE status = 'claimed' AND claimed_at < $1
 ORDER BY claimed_at
 LIMIT $3)
UNION ALL
(SELECT source, event_id, lease_expires_at
 FROM webhook_event
 WHERE status = 'processing' AND lease_expires_at < $2
 ORDER BY lease_expires_at
 LIMIT $3)
ORDER BY since, source, event_id
LIMIT $3",
    types: &[Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// The deferred backlog per source: `claimed` and `failed` rows due at `$1` (now),
/// `(source, count, oldest next_attempt_at)` over at most `$2` rows, the longest due first.
pub static BACKLOG: Sql = Sql {
    text: "\
SELECT source, count(*), min(next_attempt_at)
FROM (
    SELECT source, next_attempt_at
    FROM webhook_event
    WHERE status IN ('claimed', 'failed') AND next_attempt_at <= $1
    ORDER BY next_attempt_at
    LIMIT $2
) due
GROUP BY source",
    types: &[Type::TIMESTAMPTZ, Type::INT8],
};

/// The outbox backlog per source: messages not yet delivered nor dead (`pending`, including
/// those waiting for a retry, and `processing`), `(source, count, oldest created_at)` over at
/// most `$1` rows, the longest due first (exact when under the cap).
pub static OUTBOX_BACKLOG: Sql = Sql {
    text: "\
SELECT source, count(*), min(created_at)
FROM (
    SELECT source, created_at
    FROM outbox
    WHERE status IN ('pending', 'processing')
    ORDER BY next_attempt_at
    LIMIT $1
) backlog
GROUP BY source",
    types: &[Type::INT8],
};

/// `$1`'s dead outbox messages, as [`DEAD_LETTERS`] for events: the oldest `dead_at`, how many
/// (at most `$4`), and how many went dead in `[$2, $3)` (at most `$4`).
pub static OUTBOX_DEAD: Sql = Sql {
    text: "\
SELECT
    (SELECT min(dead_at) FROM outbox WHERE source = $1 AND status = 'dead'),
    (SELECT count(*) FROM (
        SELECT 1 FROM outbox WHERE source = $1 AND status = 'dead'
        LIMIT $4) total),
    (SELECT count(*) FROM (
        SELECT 1 FROM outbox
        WHERE source = $1 AND status = 'dead' AND dead_at >= $2 AND dead_at < $3
        LIMIT $4) new)",
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// The `claimed_at` of `$1`'s newest key (any status): one backward probe.
pub static NEWEST_KEY: Sql = Sql {
    text: "\
SELECT claimed_at
FROM webhook_event
WHERE source = $1
ORDER BY claimed_at DESC
LIMIT 1",
    types: &[Type::TEXT],
};

/// Rows of `$1` the sweeper should have deleted: `completed` claimed before `$2` and `dead`
/// dead before `$3` (the retention cutoffs), each counted over at most `$4` rows.
pub static PAST_RETENTION: Sql = Sql {
    text: "\
SELECT
    (SELECT count(*) FROM (
        SELECT 1 FROM webhook_event
        WHERE source = $1 AND claimed_at < $2 AND status = 'completed'
        LIMIT $4) completed),
    (SELECT count(*) FROM (
        SELECT 1 FROM webhook_event
        WHERE source = $1 AND status = 'dead' AND dead_at < $3
        LIMIT $4) dead)",
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// `$1`'s dead letters: the oldest `dead_at`, how many (at most `$4`), and how many went dead
/// in `[$2, $3)` (since the last run, at most `$4`).
pub static DEAD_LETTERS: Sql = Sql {
    text: "\
SELECT
    (SELECT min(dead_at) FROM webhook_event WHERE source = $1 AND status = 'dead'),
    (SELECT count(*) FROM (
        SELECT 1 FROM webhook_event WHERE source = $1 AND status = 'dead'
        LIMIT $4) total),
    (SELECT count(*) FROM (
        SELECT 1 FROM webhook_event
        WHERE source = $1 AND status = 'dead' AND dead_at >= $2 AND dead_at < $3
        LIMIT $4) new)",
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// Ordering ties seen in `[$1, $2)`, resolved or not, per source (at most `$3` read).
pub static TIES_SINCE: Sql = Sql {
    text: "\
SELECT source, count(*)
FROM (
    SELECT source FROM ordering_tie
    WHERE seen_at >= $1 AND seen_at < $2
    ORDER BY seen_at
    LIMIT $3
) ties
GROUP BY source",
    types: &[Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// Sessions on this database `idle in transaction` (or `(aborted)`) for more than `$1`
/// seconds, by the server's clock: `(count, longest seconds, the first $2 pids)`. Only the
/// sessions this role may see: another role's session shows a NULL state unless the role has
/// `pg_read_all_stats` (or `pg_monitor`), or is a superuser.
pub static IDLE_IN_TRANSACTION: Sql = Sql {
    text: "\
SELECT count(*),
       COALESCE(max(extract(epoch FROM statement_timestamp() - state_change)), 0)::float8,
       COALESCE((array_agg(pid ORDER BY state_change))[1:$2::int4], '{}')
FROM pg_stat_activity
WHERE datname = current_database()
  AND pid <> pg_backend_pid()
  AND state IN ('idle in transaction', 'idle in transaction (aborted)')
  AND state_change < statement_timestamp() - $1 * interval '1 second'",
    types: &[Type::INT8, Type::INT8],
};

/// Returns the last recorded run, `None` before the first; with `lock`, locks the `audit_run`
/// row first ([`LOCK_RUN`], for a run that records), else reads it without a lock
/// ([`READ_RUN`]). Run inside the audit's transaction.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails (including `lock_timeout` behind another audit).
pub async fn lock_run(conn: &Connection, lock: bool) -> Result<Option<SystemTime>, LedgerError> {
    let statement = conn
        .prepare(if lock { &LOCK_RUN } else { &READ_RUN })
        .await?;
    match conn.query_opt(&statement, &[]).await? {
        Some(row) => Ok(row.try_get(0)?),
        None => Ok(None),
    }
}

/// Records a run at `now` ([`RECORD_RUN`]), in the audit's transaction.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn record_run(conn: &Connection, now: SystemTime) -> Result<(), LedgerError> {
    let statement = conn.prepare(&RECORD_RUN).await?;
    conn.execute(&statement, &[&now]).await?;
    Ok(())
}

/// A per-source figure: how many rows, and the oldest timestamp among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figure {
    /// Rows counted (at most the cap given).
    pub count: u64,
    /// The oldest relevant timestamp among them.
    pub oldest: Option<SystemTime>,
}

/// One stuck key, with the time it has been stuck since (`claimed_at` or `lease_expires_at`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StuckKey {
    /// The source.
    pub source: String,
    /// The event id.
    pub event_id: String,
    /// `claimed_at` (a claim) or `lease_expires_at` (an expired lease).
    pub since: SystemTime,
}

fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

async fn figures(
    conn: &Connection,
    sql: &'static Sql,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<BTreeMap<String, Figure>, LedgerError> {
    let statement = conn.prepare(sql).await?;
    let mut by_source = BTreeMap::new();
    for row in conn.query(&statement, params).await? {
        by_source.insert(
            row.try_get::<_, String>(0)?,
            Figure {
                count: count(row.try_get(1)?),
                oldest: row.try_get(2)?,
            },
        );
    }
    Ok(by_source)
}

/// Stuck work per source ([`STUCK_SUMMARY`]): claims from before `claimed_before` and leases
/// expired before `now`, each half over at most `cap` rows.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn stuck(
    conn: &Connection,
    claimed_before: SystemTime,
    now: SystemTime,
    cap: i64,
) -> Result<BTreeMap<String, Figure>, LedgerError> {
    figures(conn, &STUCK_SUMMARY, &[&claimed_before, &now, &cap]).await
}

/// The `limit` oldest stuck keys ([`STUCK_KEYS`]), oldest first.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn stuck_keys(
    conn: &Connection,
    claimed_before: SystemTime,
    now: SystemTime,
    limit: i64,
) -> Result<Vec<StuckKey>, LedgerError> {
    let statement = conn.prepare(&STUCK_KEYS).await?;
    conn.query(&statement, &[&claimed_before, &now, &limit])
        .await?
        .iter()
        .map(|row| {
            Ok(StuckKey {
                source: row.try_get(0)?,
                event_id: row.try_get(1)?,
                since: row.try_get(2)?,
            })
        })
        .collect()
}

/// The due deferred backlog per source ([`BACKLOG`]): count and the oldest `next_attempt_at`,
/// over at most `cap` rows.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn backlog(
    conn: &Connection,
    now: SystemTime,
    cap: i64,
) -> Result<BTreeMap<String, Figure>, LedgerError> {
    figures(conn, &BACKLOG, &[&now, &cap]).await
}

/// The `claimed_at` of `source`'s newest key ([`NEWEST_KEY`]), `None` when it has none.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn newest_key(
    conn: &Connection,
    source: &str,
) -> Result<Option<SystemTime>, LedgerError> {
    let statement = conn.prepare(&NEWEST_KEY).await?;
    match conn.query_opt(&statement, &[&source]).await? {
        Some(row) => Ok(Some(row.try_get(0)?)),
        None => Ok(None),
    }
}

/// Rows of `source` past retention still present ([`PAST_RETENTION`]):
/// `(completed claimed before completed_cutoff, dead before dead_cutoff)`, each at most `cap`.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn past_retention(
    conn: &Connection,
    source: &str,
    completed_cutoff: SystemTime,
    dead_cutoff: SystemTime,
    cap: i64,
) -> Result<(u64, u64), LedgerError> {
    let statement = conn.prepare(&PAST_RETENTION).await?;
    let rows = conn
        .query(
            &statement,
            &[&source, &completed_cutoff, &dead_cutoff, &cap],
        )
        .await?;
    match rows.first() {
        Some(row) => Ok((count(row.try_get(0)?), count(row.try_get(1)?))),
        None => Ok((0, 0)),
    }
}

/// `source`'s dead letters ([`DEAD_LETTERS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetters {
    /// The oldest `dead_at`.
    pub oldest: Option<SystemTime>,
    /// How many (at most the cap).
    pub total: u64,
    /// How many went dead in the window (at most the cap).
    pub new: u64,
}

/// `source`'s dead letters: the oldest, the total and those that went dead in `[since, until)`,
/// counts at most `cap`.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn dead_letters(
    conn: &Connection,
    source: &str,
    since: SystemTime,
    until: SystemTime,
    cap: i64,
) -> Result<DeadLetters, LedgerError> {
    dead_in(conn, &DEAD_LETTERS, source, since, until, cap).await
}

/// `source`'s dead outbox messages ([`OUTBOX_DEAD`]), as [`dead_letters`] for events.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn outbox_dead(
    conn: &Connection,
    source: &str,
    since: SystemTime,
    until: SystemTime,
    cap: i64,
) -> Result<DeadLetters, LedgerError> {
    dead_in(conn, &OUTBOX_DEAD, source, since, until, cap).await
}

/// The outbox backlog per source ([`OUTBOX_BACKLOG`]): count and the oldest `created_at`, over
/// at most `cap` rows.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn outbox_backlog(
    conn: &Connection,
    cap: i64,
) -> Result<BTreeMap<String, Figure>, LedgerError> {
    figures(conn, &OUTBOX_BACKLOG, &[&cap]).await
}

async fn dead_in(
    conn: &Connection,
    sql: &'static Sql,
    source: &str,
    since: SystemTime,
    until: SystemTime,
    cap: i64,
) -> Result<DeadLetters, LedgerError> {
    let statement = conn.prepare(sql).await?;
    let rows = conn
        .query(&statement, &[&source, &since, &until, &cap])
        .await?;
    match rows.first() {
        Some(row) => Ok(DeadLetters {
            oldest: row.try_get(0)?,
            total: count(row.try_get(1)?),
            new: count(row.try_get(2)?),
        }),
        None => Ok(DeadLetters {
            oldest: None,
            total: 0,
            new: 0,
        }),
    }
}

/// Ordering ties seen in `[since, until)` per source ([`TIES_SINCE`]), at most `cap` read.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn ties_since(
    conn: &Connection,
    since: SystemTime,
    until: SystemTime,
    cap: i64,
) -> Result<BTreeMap<String, u64>, LedgerError> {
    let statement = conn.prepare(&TIES_SINCE).await?;
    let mut by_source = BTreeMap::new();
    for row in conn.query(&statement, &[&since, &until, &cap]).await? {
        by_source.insert(row.try_get::<_, String>(0)?, count(row.try_get(1)?));
    }
    Ok(by_source)
}

/// Sessions idle in a transaction ([`IDLE_IN_TRANSACTION`]).
#[derive(Debug, Clone, PartialEq)]
pub struct IdleSessions {
    /// How many, longer than the threshold.
    pub count: u64,
    /// The longest, seconds (0 when none).
    pub longest_secs: f64,
    /// Their backend pids (at most the limit given), longest idle first.
    pub pids: Vec<i32>,
}

/// Sessions on this database idle in a transaction for more than `threshold_secs` (the
/// server's clock), with at most `pid_limit` of their pids.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn idle_in_transaction(
    conn: &Connection,
    threshold_secs: i64,
    pid_limit: i64,
) -> Result<IdleSessions, LedgerError> {
    let statement = conn.prepare(&IDLE_IN_TRANSACTION).await?;
    let rows = conn
        .query(&statement, &[&threshold_secs, &pid_limit])
        .await?;
    match rows.first() {
        Some(row) => Ok(IdleSessions {
            count: count(row.try_get(0)?),
            longest_secs: row.try_get(1)?,
            pids: row.try_get(2)?,
        }),
        None => Ok(IdleSessions {
            count: 0,
            longest_secs: 0.0,
            pids: Vec::new(),
        }),
    }
}
