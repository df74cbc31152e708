//! The audit's run: the figures per source and for the database, read in one transaction
//! ([`run`], [`peek`]), their report, log line and EMF documents ([`AuditReport`]), and the stuck
//! list ([`stuck_list`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use super::sql;
use crate::config::{AuditSettings, Sources};
use crate::ledger::{Connection, LedgerError};
use crate::sweep::sql::{oldest_key, outbox_sources_present, sources_present};
use crate::telemetry::{Metric, MetricName};
use crate::timestamp::rfc3339;

/// The most rows any one count reads; a count this high is reported as capped ("at least").
pub const CAP: u64 = 100_000;

/// How many stuck keys the log line names at most (the oldest).
pub const STUCK_KEYS_LOGGED: usize = 50;

/// How many pids of sessions idle in a transaction the report names at most.
pub const IDLE_PIDS_LOGGED: usize = 50;

/// What the first run counts "since the last run" over: the five minutes before it.
pub const FIRST_RUN_WINDOW: Duration = Duration::from_secs(300);

/// How long past its cutoff a key may still be in the ledger before it counts in
/// `past_retention_overdue`: twelve of the sweeper's five-minute periods. `past_retention`
/// itself is rarely 0 under steady traffic (keys keep expiring between two sweeps), so it
/// cannot tell a late sweep from a stalled one; this figure can.
pub const SWEEP_GRACE: Duration = Duration::from_secs(3600);

/// The dimension value of database-wide metrics (no source name can be `*`).
pub const DATABASE_DIMENSION: &str = "*";

/// A stuck key, as logged: `{"source", "event_id", "age_secs"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StuckKey {
    /// The source.
    pub source: String,
    /// The event id.
    pub event_id: String,
    /// Seconds since it was claimed (a claim) or since its lease expired (a lease).
    pub age_secs: u64,
}

/// Sessions idle in a transaction: `{"sessions", "longest_secs", "pids"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleInTransaction {
    /// Sessions on this database idle in a transaction longer than the threshold.
    pub sessions: u64,
    /// The longest of them, seconds (0 when none).
    pub longest_secs: u64,
    /// Their backend pids, longest idle first (at most [`IDLE_PIDS_LOGGED`]): what
    /// `pg_terminate_backend` takes.
    pub pids: Vec<i32>,
}

/// One source's figures (see the module's table). Ages are whole seconds before `now`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceAudit {
    /// Whether the source is configured (an unconfigured one is judged with the defaults).
    pub configured: bool,
    /// Stuck claims and expired leases.
    pub stuck_claims: u64,
    /// Since the oldest of them, seconds (0 when none).
    pub stuck_oldest_age: u64,
    /// The oldest key's age, seconds; `None` when the source has no key.
    pub oldest_key_age: Option<u64>,
    /// The newest key's age, seconds; `None` when the source has no key.
    pub newest_key_age: Option<u64>,
    /// The provider's retry horizon, seconds; `None` for an unconfigured source.
    pub retry_horizon_secs: Option<u64>,
    /// How long a completed key is kept, seconds.
    pub retention_secs: u64,
    /// The oldest key is younger than the retry horizon: informative only (normal for a new
    /// or rarely used source; on an old busy one, something deletes too early).
    pub oldest_key_too_young: bool,
    /// Completed keys past retention plus dead letters past dead-letter retention, still there.
    pub past_retention: u64,
    /// The part of `past_retention` more than [`SWEEP_GRACE`] past its cutoff.
    pub past_retention_overdue: u64,
    /// Dead letters.
    pub dead_letters: u64,
    /// Dead letters added since the last recorded run.
    pub dead_letters_new: u64,
    /// Since the oldest dead letter went dead, seconds (0 when none).
    pub dead_letter_oldest_age: u64,
    /// Ordering ties seen since the last recorded run.
    pub ordering_ties_new: u64,
    /// Due `claimed` and `failed` rows.
    pub backlog_due: u64,
    /// Since the oldest due `next_attempt_at`, seconds (0 when none).
    pub backlog_oldest_age: u64,
    /// Outbox messages not yet delivered nor dead.
    pub outbox_backlog: u64,
    /// Since the oldest of them was committed, seconds (0 when none).
    pub outbox_backlog_oldest_age: u64,
    /// Dead outbox messages.
    pub outbox_dead: u64,
    /// Outbox messages that went dead since the last recorded run.
    pub outbox_dead_new: u64,
    /// Since the oldest dead outbox message went dead, seconds (0 when none).
    pub outbox_dead_oldest_age: u64,
    /// The source's expected interval between deliveries, seconds, when configured.
    pub expected_interval_secs: Option<u64>,
    /// Whether the source has gone quiet (only with an expected interval).
    pub quiet: bool,
    /// Counts of this source that reached [`CAP`] (metric names): they mean "at least".
    pub capped: Vec<&'static str>,
}

impl SourceAudit {
    /// The source's EMF metrics (see the module's table), in a fixed order.
    pub fn metrics(&self) -> Vec<Metric> {
        let mut metrics = vec![
            Metric::new(MetricName::StuckClaims, self.stuck_claims),
            Metric::new(MetricName::StuckOldestAge, self.stuck_oldest_age),
        ];
        if let Some(age) = self.oldest_key_age {
            metrics.push(Metric::new(MetricName::OldestKeyAge, age));
        }
        metrics.extend([
            Metric::new(MetricName::PastRetention, self.past_retention),
            Metric::new(
                MetricName::PastRetentionOverdue,
                self.past_retention_overdue,
            ),
            Metric::new(MetricName::DeadLetters, self.dead_letters),
            Metric::new(MetricName::DeadLettersNew, self.dead_letters_new),
            Metric::new(MetricName::DeadLetterOldestAge, self.dead_letter_oldest_age),
            Metric::new(MetricName::OrderingTiesNew, self.ordering_ties_new),
            Metric::new(MetricName::BacklogDue, self.backlog_due),
            Metric::new(MetricName::BacklogOldestAge, self.backlog_oldest_age),
            Metric::new(MetricName::OutboxBacklog, self.outbox_backlog),
            Metric::new(
                MetricName::OutboxBacklogOldestAge,
                self.outbox_backlog_oldest_age,
            ),
            Metric::new(MetricName::OutboxDead, self.outbox_dead),
            Metric::new(MetricName::OutboxDeadNew, self.outbox_dead_new),
            Metric::new(MetricName::OutboxDeadOldestAge, self.outbox_dead_oldest_age),
        ]);
        if self.expected_interval_secs.is_some() {
            metrics.push(Metric::new(MetricName::SourceQuiet, u64::from(self.quiet)));
        }
        metrics
    }
}

/// What an audit found: `{"at", "since", "first_run", "recorded", "duration_ms",
/// "stuck_keys", "idle_in_transaction", "sources"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditReport {
    /// The audit's `now` (RFC 3339).
    pub at: String,
    /// The start of the "since the last run" window (RFC 3339).
    pub since: String,
    /// No run had been recorded before this one (the window is [`FIRST_RUN_WINDOW`]).
    pub first_run: bool,
    /// Whether this run was recorded as the last run ([`run`]) or only read ([`peek`]).
    pub recorded: bool,
    /// Wall time of the audit, milliseconds.
    pub duration_ms: u64,
    /// The oldest stuck keys, oldest first (at most [`STUCK_KEYS_LOGGED`]).
    pub stuck_keys: Vec<StuckKey>,
    /// Database sessions idle in a transaction.
    pub idle_in_transaction: IdleInTransaction,
    /// Per source, by name.
    pub sources: BTreeMap<String, SourceAudit>,
}

impl AuditReport {
    /// Every EMF document [`AuditReport::emit`] prints, at `timestamp`: one per source (its
    /// metrics) and one for the database (dimension `source` = [`DATABASE_DIMENSION`]).
    pub fn emf_documents(&self, timestamp: SystemTime) -> Vec<serde_json::Value> {
        self.metric_sets()
            .iter()
            .map(|(source, metrics)| crate::telemetry::emf_document(source, metrics, timestamp))
            .collect()
    }

    fn metric_sets(&self) -> Vec<(&str, Vec<Metric>)> {
        let mut sets: Vec<(&str, Vec<Metric>)> = self
            .sources
            .iter()
            .map(|(source, audit)| (source.as_str(), audit.metrics()))
            .collect();
        sets.push((
            DATABASE_DIMENSION,
            vec![
                Metric::new(
                    MetricName::IdleInTransactionSessions,
                    self.idle_in_transaction.sessions,
                ),
                Metric::new(
                    MetricName::IdleInTransactionLongest,
                    self.idle_in_transaction.longest_secs,
                ),
            ],
        ));
        sets
    }

    /// Logs the report (one `audit` line: the totals as numbers, the stuck keys, the quiet
    /// sources and the whole report as JSON in `report`) and prints its EMF documents.
    pub fn emit(&self) {
        let total = |f: fn(&SourceAudit) -> u64| self.sources.values().map(f).sum::<u64>();
        let quiet: Vec<&str> = self
            .sources
            .iter()
            .filter(|(_, audit)| audit.quiet)
            .map(|(source, _)| source.as_str())
            .collect();
        let stuck_keys: Vec<String> = self
            .stuck_keys
            .iter()
            .map(|key| format!("{}/{}", key.source, key.event_id))
            .collect();
        tracing::info!(
            at = %self.at,
            since = %self.since,
            duration_ms = self.duration_ms,
            stuck_claims = total(|a| a.stuck_claims),
            backlog_due = total(|a| a.backlog_due),
            past_retention = total(|a| a.past_retention),
            dead_letters = total(|a| a.dead_letters),
            dead_letters_new = total(|a| a.dead_letters_new),
            outbox_backlog = total(|a| a.outbox_backlog),
            outbox_dead = total(|a| a.outbox_dead),
            ordering_ties_new = total(|a| a.ordering_ties_new),
            idle_in_transaction_sessions = self.idle_in_transaction.sessions,
            quiet_sources = %quiet.join(","),
            stuck_keys = %stuck_keys.join(" "),
            report = %serde_json::to_string(self).unwrap_or_default(),
            "audit"
        );
        for (source, metrics) in self.metric_sets() {
            crate::telemetry::emit_metrics(source, &metrics);
        }
    }
}

/// Audits the ledger at `now` and records the run (the next run counts "new" figures from
/// `now`), in one transaction on `conn`.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails (nothing is recorded).
pub async fn run(
    conn: &Connection,
    sources: &Sources,
    settings: &AuditSettings,
    now: SystemTime,
) -> Result<AuditReport, LedgerError> {
    audit(conn, sources, settings, now, true).await
}

/// The same figures as [`run`] without recording the run: the next recorded run still counts
/// from the last recorded one.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn peek(
    conn: &Connection,
    sources: &Sources,
    settings: &AuditSettings,
    now: SystemTime,
) -> Result<AuditReport, LedgerError> {
    audit(conn, sources, settings, now, false).await
}

async fn audit(
    conn: &Connection,
    sources: &Sources,
    settings: &AuditSettings,
    now: SystemTime,
    record: bool,
) -> Result<AuditReport, LedgerError> {
    let started = Instant::now();
    conn.begin().await?;
    // Custom plans every time: the plans the index test checks are the ones that run, even on
    // a warm connection that has run these statements before.
    let result = match conn
        .batch_execute("SET LOCAL plan_cache_mode = force_custom_plan")
        .await
    {
        Ok(()) => audit_in_transaction(conn, sources, settings, now, record).await,
        Err(error) => Err(error.into()),
    };
    match result {
        Ok(mut report) => {
            conn.batch_execute("COMMIT").await?;
            report.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            Ok(report)
        }
        Err(error) => {
            let _ = conn.batch_execute("ROLLBACK").await;
            Err(error)
        }
    }
}

/// Whole seconds from `at` to `now` (0 when `at` is later).
fn age(now: SystemTime, at: SystemTime) -> u64 {
    now.duration_since(at).map_or(0, |d| d.as_secs())
}

async fn audit_in_transaction(
    conn: &Connection,
    sources: &Sources,
    settings: &AuditSettings,
    now: SystemTime,
    record: bool,
) -> Result<AuditReport, LedgerError> {
    let cap = CAP as i64;
    let last_run = sql::lock_run(conn, record).await?;
    let since = last_run.unwrap_or_else(|| {
        now.checked_sub(FIRST_RUN_WINDOW)
            .unwrap_or(SystemTime::UNIX_EPOCH)
    });
    let claimed_before = now
        .checked_sub(Duration::from_secs(settings.stuck_after_secs))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let stuck = sql::stuck(conn, claimed_before, now, cap).await?;
    let stuck_keys = sql::stuck_keys(conn, claimed_before, now, STUCK_KEYS_LOGGED as i64)
        .await?
        .into_iter()
        .map(|key| StuckKey {
            age_secs: age(now, key.since),
            source: key.source,
            event_id: key.event_id,
        })
        .collect();
    let backlog = sql::backlog(conn, now, cap).await?;
    let outbox_backlog = sql::outbox_backlog(conn, cap).await?;
    let ties = sql::ties_since(conn, since, now, cap).await?;
    let idle = sql::idle_in_transaction(
        conn,
        i64::try_from(settings.idle_in_transaction_after_secs).unwrap_or(i64::MAX),
        IDLE_PIDS_LOGGED as i64,
    )
    .await?;

    let mut names: BTreeSet<String> = sources_present(conn).await?.into_iter().collect();
    names.extend(sources.iter().map(|source| source.name.clone()));
    // A source whose events were swept can still have messages in the outbox.
    names.extend(outbox_sources_present(conn).await?);
    let mut by_source = BTreeMap::new();
    for name in names {
        let configured = sources.get(&name);
        let retention = sources.retention(&name);
        let horizon = configured.map(|source| source.retention.retry_horizon);
        let expected = configured.and_then(|source| source.retention.expected_interval);
        let oldest = oldest_key(conn, &name).await?;
        let newest = sql::newest_key(conn, &name).await?;
        let (completed_past, dead_past) = sql::past_retention(
            conn,
            &name,
            retention.completed_cutoff(now),
            retention.dead_cutoff(now),
            cap,
        )
        .await?;
        let overdue_at = now
            .checked_sub(SWEEP_GRACE)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let (completed_overdue, dead_overdue) = sql::past_retention(
            conn,
            &name,
            retention.completed_cutoff(overdue_at),
            retention.dead_cutoff(overdue_at),
            cap,
        )
        .await?;
        let dead = sql::dead_letters(conn, &name, since, now, cap).await?;
        let outbox_dead = sql::outbox_dead(conn, &name, since, now, cap).await?;
        let outbox = outbox_backlog.get(&name).copied();
        let outbox_count = outbox.map_or(0, |f| f.count);
        let stuck = stuck.get(&name).copied();
        let backlog = backlog.get(&name).copied();
        let oldest_key_age = oldest.map(|at| age(now, at));
        let newest_key_age = newest.map(|at| age(now, at));
        let quiet = match (expected, newest_key_age) {
            (Some(_), None) => true,
            (Some(interval), Some(newest_age)) => newest_age > interval.as_secs(),
            (None, _) => false,
        };
        let ordering_ties_new = ties.get(&name).copied().unwrap_or(0);
        let stuck_claims = stuck.map_or(0, |f| f.count);
        let backlog_due = backlog.map_or(0, |f| f.count);
        let mut capped = Vec::new();
        // Each half of the stuck figure is capped separately; either reaching it makes the
        // per-source number a lower bound.
        for (metric, value) in [
            ("stuck_claims", stuck_claims),
            ("backlog_due", backlog_due),
            ("past_retention", completed_past.max(dead_past)),
            (
                "past_retention_overdue",
                completed_overdue.max(dead_overdue),
            ),
            ("dead_letters", dead.total),
            ("dead_letters_new", dead.new),
            ("outbox_backlog", outbox_count),
            ("outbox_dead", outbox_dead.total),
            ("outbox_dead_new", outbox_dead.new),
        ] {
            if value >= CAP {
                capped.push(metric);
            }
        }
        by_source.insert(
            name,
            SourceAudit {
                configured: configured.is_some(),
                stuck_claims,
                stuck_oldest_age: stuck.and_then(|f| f.oldest).map_or(0, |at| age(now, at)),
                oldest_key_age,
                newest_key_age,
                retry_horizon_secs: horizon.map(|h| h.as_secs()),
                retention_secs: retention.completed.as_secs(),
                oldest_key_too_young: matches!(
                    (oldest_key_age, horizon),
                    (Some(age), Some(horizon)) if age < horizon.as_secs()
                ),
                past_retention: completed_past + dead_past,
                past_retention_overdue: completed_overdue + dead_overdue,
                dead_letters: dead.total,
                dead_letters_new: dead.new,
                dead_letter_oldest_age: dead.oldest.map_or(0, |at| age(now, at)),
                ordering_ties_new,
                backlog_due,
                backlog_oldest_age: backlog.and_then(|f| f.oldest).map_or(0, |at| age(now, at)),
                outbox_backlog: outbox_count,
                outbox_backlog_oldest_age: outbox
                    .and_then(|f| f.oldest)
                    .map_or(0, |at| age(now, at)),
                outbox_dead: outbox_dead.total,
                outbox_dead_new: outbox_dead.new,
                outbox_dead_oldest_age: outbox_dead.oldest.map_or(0, |at| age(now, at)),
                expected_interval_secs: expected.map(|e| e.as_secs()),
                quiet,
                capped,
            },
        );
    }
    if record {
        sql::record_run(conn, now).await?;
    }
    Ok(AuditReport {
        at: rfc3339(now),
        since: rfc3339(since),
        first_run: last_run.is_none(),
        recorded: record,
        duration_ms: 0,
        stuck_keys,
        idle_in_transaction: IdleInTransaction {
            sessions: idle.count,
            longest_secs: idle.longest_secs.max(0.0) as u64,
            pids: idle.pids,
        },
        sources: by_source,
    })
}

/// One source's stuck work in a [`StuckList`]: `{"count", "oldest_age_secs"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SourceStuck {
    /// Stuck claims and expired leases (at most [`CAP`] of each).
    pub count: u64,
    /// Since the oldest of them was claimed (a claim) or its lease expired (a lease), seconds.
    pub oldest_age_secs: u64,
}

/// The stuck list now, as `hookledger stuck` prints it and the console shows it: `{"at",
/// "stuck_after_secs", "total", "capped", "sources", "keys"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StuckList {
    /// The database's time of the read, RFC 3339.
    pub at: String,
    /// A `claimed` row older than this is stuck, seconds.
    pub stuck_after_secs: u64,
    /// Stuck rows over all sources.
    pub total: u64,
    /// Whether a count reached [`CAP`] (the numbers mean "at least").
    pub capped: bool,
    /// Per source, by name (sources with stuck work only).
    pub sources: BTreeMap<String, SourceStuck>,
    /// The oldest stuck keys, oldest first (at most the `limit` asked for).
    pub keys: Vec<StuckKey>,
}

/// The auditor's stuck list at the database's time now: `claimed` rows claimed more than
/// `stuck_after_secs` ago and `processing` rows whose lease expired, per source, and the
/// `limit` oldest keys (the auditor's statements, [`sql::stuck`] and [`sql::stuck_keys`]).
/// Ages against the database's clock, which stamped `claimed_at`. Read-only.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn stuck_list(
    conn: &Connection,
    stuck_after_secs: u64,
    limit: i64,
) -> Result<StuckList, LedgerError> {
    let now = crate::db::now(conn).await?;
    let claimed_before = now
        .checked_sub(Duration::from_secs(stuck_after_secs))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let figures = sql::stuck(conn, claimed_before, now, CAP as i64).await?;
    let keys = sql::stuck_keys(conn, claimed_before, now, limit).await?;
    Ok(StuckList {
        at: rfc3339(now),
        stuck_after_secs,
        total: figures.values().map(|f| f.count).sum(),
        capped: figures.values().any(|f| f.count >= CAP),
        sources: figures
            .into_iter()
            .map(|(source, figure)| {
                (
                    source,
                    SourceStuck {
                        count: figure.count,
                        oldest_age_secs: figure.oldest.map_or(0, |at| age(now, at)),
                    },
                )
            })
            .collect(),
        keys: keys
            .into_iter()
            .map(|key| StuckKey {
                age_secs: age(now, key.since),
                source: key.source,
                event_id: key.event_id,
            })
            .collect(),
    })
}
