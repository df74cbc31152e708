//! The sweep's run: plan the expired rows per source and kind ([`Sweep::plan`]), delete them in
//! batches with pauses between ([`run`]), and report what went ([`SweepReport`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use super::payload::{drop_message_payloads, drop_payloads, payload_bounds};
use super::sql::{
    delete_expired, oldest_key, outbox_sources_present, sources_present, Deleted, Expired,
};
use crate::config::{Sources, SweepSettings};
use crate::ledger::{Connection, LedgerError};

/// What a work item does to its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    /// Deletes the rows of this kind ([`delete_expired`]).
    Delete(Expired),
    /// Drops the payloads and stored responses of completed rows, keeping the rows
    /// ([`drop_payloads`]).
    DropPayloads,
    /// Empties the payloads of delivered outbox messages, keeping the messages
    /// ([`drop_message_payloads`]).
    DropMessagePayloads,
}

/// One source's expired keys of one kind (or payloads past their retention), and how far the
/// run has got through them.
#[derive(Debug, Clone)]
struct Item {
    source: String,
    work: Work,
    cutoff: SystemTime,
    after: SystemTime,
    done: bool,
}

/// One batch's results: rows worked, deleted by source, rejected-delivery counts deleted,
/// payloads dropped by source.
type BatchDone = (u64, Vec<(String, u64)>, u64, Vec<(String, u64)>);

/// A planned sweep on one connection: call [`Sweep::batch`] until it comes back short.
#[derive(Debug)]
pub struct Sweep<'c> {
    conn: &'c Connection,
    batch_size: i64,
    items: Vec<Item>,
    deleted_by_source: BTreeMap<String, u64>,
    payloads_dropped_by_source: BTreeMap<String, u64>,
    rejected_deleted: u64,
    unconfigured: Vec<String>,
}

impl<'c> Sweep<'c> {
    /// Plans a sweep at `now`: every source with keys in the ledger, with its configured
    /// retention (or the defaults when it is not configured), then the counts of rejected
    /// deliveries past `settings.rejected_retention_days`; batches of `settings.batch_size`.
    ///
    /// # Errors
    /// [`LedgerError::Db`] when PostgreSQL fails.
    pub async fn plan(
        conn: &'c Connection,
        sources: &Sources,
        now: SystemTime,
        settings: &SweepSettings,
    ) -> Result<Self, LedgerError> {
        let mut items = Vec::new();
        let mut unconfigured = Vec::new();
        let present = sources_present(conn).await?;
        // Sources with outbox messages too: messages can outlive their events' keys.
        let mut names: std::collections::BTreeSet<String> = present.iter().cloned().collect();
        names.extend(outbox_sources_present(conn).await?);
        for source in names {
            if sources.get(&source).is_none() {
                unconfigured.push(source.clone());
            }
            let retention = sources.retention(&source);
            let keys = present.contains(&source);
            for (expired, cutoff) in [
                (Expired::Completed, retention.completed_cutoff(now)),
                (Expired::Dead, retention.dead_cutoff(now)),
                (Expired::Delivered, retention.completed_cutoff(now)),
                (Expired::DeadMessages, retention.dead_cutoff(now)),
            ] {
                if !keys && matches!(expired, Expired::Completed | Expired::Dead) {
                    continue;
                }
                items.push(Item {
                    source: source.clone(),
                    work: Work::Delete(expired),
                    cutoff,
                    after: SystemTime::UNIX_EPOCH,
                    done: false,
                });
            }
            // Payloads past the source's payload retention: events from the source's watermark
            // to the earlier of the cutoff and its oldest pending row; delivered messages from
            // theirs to the cutoff.
            let payload_retention = sources
                .get(&source)
                .and_then(|config| config.retention.payload_retention);
            if let Some(payload_retention) = payload_retention {
                let cutoff = now
                    .checked_sub(payload_retention)
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                let bounds = payload_bounds(conn, &source, cutoff).await?;
                for (work, after, before) in [
                    (
                        Work::DropPayloads,
                        bounds.events_after,
                        bounds.events_before,
                    ),
                    (
                        Work::DropMessagePayloads,
                        bounds.messages_after,
                        bounds.messages_before,
                    ),
                ] {
                    items.push(Item {
                        source: source.clone(),
                        work,
                        cutoff: before,
                        after,
                        done: after >= before,
                    });
                }
            }
        }
        // Every source's counts at once (a small table: sources x 5 reasons x hours).
        items.push(Item {
            source: String::new(),
            work: Work::Delete(Expired::Rejected),
            cutoff: now
                .checked_sub(settings.rejected_retention())
                .unwrap_or(SystemTime::UNIX_EPOCH),
            after: SystemTime::UNIX_EPOCH,
            done: false,
        });
        Ok(Self {
            conn,
            batch_size: settings.batch_size.max(1),
            items,
            deleted_by_source: BTreeMap::new(),
            payloads_dropped_by_source: BTreeMap::new(),
            rejected_deleted: 0,
            unconfigured,
        })
    }

    /// Runs one batch in its own transaction (`BEGIN` with the session's limits, one DELETE (or
    /// payload drop) per work item it reaches, `COMMIT`): deletes or empties at most
    /// `batch_size` rows and returns how many. Fewer than `batch_size` means nothing expired is
    /// left.
    ///
    /// # Errors
    /// [`LedgerError::Db`] when PostgreSQL fails; the batch is rolled back.
    pub async fn batch(&mut self) -> Result<u64, LedgerError> {
        if self.items.iter().all(|item| item.done) {
            return Ok(0);
        }
        self.conn.begin().await?;
        match self.delete_batch().await {
            Ok(deleted) => {
                self.conn.batch_execute("COMMIT").await?;
                for (source, rows) in deleted.1 {
                    *self.deleted_by_source.entry(source).or_default() += rows;
                }
                for (source, rows) in deleted.3 {
                    *self.payloads_dropped_by_source.entry(source).or_default() += rows;
                }
                self.rejected_deleted += deleted.2;
                Ok(deleted.0)
            }
            Err(error) => {
                // The transaction is aborted (or the connection gone): give it back clean.
                let _ = self.conn.batch_execute("ROLLBACK").await;
                Err(error)
            }
        }
    }

    /// One batch's work: (rows, ledger rows and outbox messages deleted by source,
    /// rejected-delivery counts, payloads dropped by source).
    async fn delete_batch(&mut self) -> Result<BatchDone, LedgerError> {
        let mut total = 0u64;
        let mut by_source = Vec::new();
        let mut rejected = 0u64;
        let mut dropped = Vec::new();
        for item in self.items.iter_mut().filter(|item| !item.done) {
            let limit = self.batch_size - total as i64;
            if limit <= 0 {
                break;
            }
            let deleted: Deleted = match item.work {
                Work::Delete(expired) => {
                    delete_expired(
                        self.conn,
                        &item.source,
                        expired,
                        item.after,
                        item.cutoff,
                        limit,
                    )
                    .await?
                }
                Work::DropPayloads => {
                    drop_payloads(self.conn, &item.source, item.after, item.cutoff, limit).await?
                }
                Work::DropMessagePayloads => {
                    drop_message_payloads(self.conn, &item.source, item.after, item.cutoff, limit)
                        .await?
                }
            };
            total += deleted.rows;
            match item.work {
                Work::Delete(Expired::Rejected) => rejected += deleted.rows,
                _ if deleted.rows == 0 => {}
                Work::Delete(_) => by_source.push((item.source.clone(), deleted.rows)),
                Work::DropPayloads | Work::DropMessagePayloads => {
                    dropped.push((item.source.clone(), deleted.rows))
                }
            }
            match deleted.last {
                Some(last) if deleted.rows as i64 == limit => item.after = last,
                // Short: this item has nothing expired left.
                _ => item.done = true,
            }
        }
        Ok((total, by_source, rejected, dropped))
    }

    /// Sources with keys in the ledger that the configuration does not name: swept under the
    /// default retention (30 and 90 days).
    pub fn unconfigured(&self) -> &[String] {
        &self.unconfigured
    }

    /// Ledger rows and outbox messages deleted so far, by source.
    pub fn deleted_by_source(&self) -> &BTreeMap<String, u64> {
        &self.deleted_by_source
    }

    /// Payloads (and stored responses) dropped so far, by source.
    pub fn payloads_dropped_by_source(&self) -> &BTreeMap<String, u64> {
        &self.payloads_dropped_by_source
    }

    /// Counts of rejected deliveries (hour buckets) deleted so far.
    pub fn rejected_deleted(&self) -> u64 {
        self.rejected_deleted
    }
}

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// A batch came back short: nothing expired is left.
    Done,
    /// `max_batches` batches ran; the next run continues.
    MaxBatches,
    /// Less than the margin of the invocation's time was left; the next run continues.
    OutOfTime,
}

impl Stopped {
    /// The name in the report and the log line: `done`, `max_batches`, `out_of_time`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::MaxBatches => "max_batches",
            Self::OutOfTime => "out_of_time",
        }
    }
}

/// What a run did: `{"deleted", "batches", "duration_ms", "oldest_remaining", "stopped",
/// "deleted_by_source", "payloads_dropped", "payloads_dropped_by_source", "rejected_deleted",
/// "unconfigured"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// Rows deleted: ledger keys, outbox messages and counts of rejected deliveries.
    pub deleted: u64,
    /// Completed events whose payload and stored response were dropped, and delivered outbox
    /// messages whose payload was emptied (the rows stay), past their source's
    /// `payload_retention_hours`.
    pub payloads_dropped: u64,
    /// Batches run (transactions), including the last, short one.
    pub batches: u32,
    /// Wall time of the run, milliseconds.
    pub duration_ms: u64,
    /// The `claimed_at` of the oldest key left in the ledger (RFC 3339), `null` when empty.
    pub oldest_remaining: Option<String>,
    /// Why the run stopped.
    pub stopped: Stopped,
    /// Ledger keys and outbox messages deleted per source.
    pub deleted_by_source: BTreeMap<String, u64>,
    /// Payloads dropped per source.
    pub payloads_dropped_by_source: BTreeMap<String, u64>,
    /// Counts of rejected deliveries deleted (hour buckets of `rejected_delivery` past
    /// `HOOKLEDGER_REJECTED_RETENTION_DAYS`, every source's).
    pub rejected_deleted: u64,
    /// Sources with keys that the configuration does not name, swept under the default
    /// retention (a removed source; or the wrong sources given to the CLI).
    pub unconfigured: Vec<String>,
}

impl SweepReport {
    /// Logs the report (one `sweep` line) and counts the `swept` EMF metric per source.
    pub fn emit(&self) {
        tracing::info!(
            deleted = self.deleted,
            payloads_dropped = self.payloads_dropped,
            batches = self.batches,
            duration_ms = self.duration_ms,
            oldest_remaining = self.oldest_remaining.as_deref().unwrap_or(""),
            stopped = self.stopped.as_str(),
            rejected_deleted = self.rejected_deleted,
            "sweep"
        );
        if !self.unconfigured.is_empty() {
            tracing::warn!(
                unconfigured = self.unconfigured.join(",").as_str(),
                "sources not in the configuration were swept under the default retention"
            );
        }
        for (source, rows) in &self.deleted_by_source {
            crate::telemetry::count(crate::telemetry::MetricName::Swept, source, *rows);
        }
    }
}

/// The pause after a batch that took `took`: at least `least`, and long enough that batches
/// fill at most `duty_percent` of the time.
pub fn pause_after(took: Duration, least: Duration, duty_percent: u64) -> Duration {
    let duty = u32::try_from(duty_percent.clamp(1, 100)).unwrap_or(100);
    least.max(took * (100 - duty) / duty)
}

/// Sweeps at `now` within `settings`' bounds; `remaining` says how much of the invocation's
/// time is left (stop before a batch when it is below `settings.margin_ms`).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails; batches committed before stay committed.
pub async fn run(
    conn: &Connection,
    sources: &Sources,
    settings: &SweepSettings,
    now: SystemTime,
    remaining: impl Fn() -> Duration,
) -> Result<SweepReport, LedgerError> {
    run_with_progress(conn, sources, settings, now, remaining, |_, _| {}).await
}

/// [`run`], calling `progress(deleted_so_far, batches_so_far)` after each batch (the operator
/// CLI's progress bar).
///
/// # Errors
/// As [`run`].
pub async fn run_with_progress(
    conn: &Connection,
    sources: &Sources,
    settings: &SweepSettings,
    now: SystemTime,
    remaining: impl Fn() -> Duration,
    mut progress: impl FnMut(u64, u32),
) -> Result<SweepReport, LedgerError> {
    let started = Instant::now();
    let margin = Duration::from_millis(settings.margin_ms);
    let pause = Duration::from_millis(settings.pause_ms);
    let mut sweep = Sweep::plan(conn, sources, now, settings).await?;
    let mut deleted = 0u64;
    let mut batches = 0u32;
    let mut wait = Duration::ZERO;
    let stopped = loop {
        if batches >= settings.max_batches {
            break Stopped::MaxBatches;
        }
        if remaining() < margin.saturating_add(wait) {
            break Stopped::OutOfTime;
        }
        tokio::time::sleep(wait).await;
        let batch_started = Instant::now();
        let rows = sweep.batch().await?;
        batches += 1;
        deleted += rows;
        progress(deleted, batches);
        if (rows as i64) < settings.batch_size {
            break Stopped::Done;
        }
        wait = pause_after(batch_started.elapsed(), pause, settings.duty_percent);
    };
    let mut oldest: Option<SystemTime> = None;
    for source in sources_present(conn).await? {
        if let Some(at) = oldest_key(conn, &source).await? {
            oldest = Some(oldest.map_or(at, |o| o.min(at)));
        }
    }
    let payloads_dropped: u64 = sweep.payloads_dropped_by_source().values().sum();
    Ok(SweepReport {
        deleted: deleted - payloads_dropped,
        payloads_dropped,
        batches,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        oldest_remaining: oldest.map(crate::timestamp::rfc3339),
        stopped,
        deleted_by_source: sweep.deleted_by_source().clone(),
        payloads_dropped_by_source: sweep.payloads_dropped_by_source().clone(),
        rejected_deleted: sweep.rejected_deleted(),
        unconfigured: sweep.unconfigured().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_keeps_batches_within_their_duty_cycle() {
        let least = Duration::from_millis(100);
        // A 60 ms batch at 25 %: 180 ms of pause, 60 / 240 = 25 % of the time in batches.
        assert_eq!(
            pause_after(Duration::from_millis(60), least, 25),
            Duration::from_millis(180)
        );
        // A quick batch still waits the least pause; 100 % duty means only the least pause.
        assert_eq!(pause_after(Duration::from_millis(10), least, 25), least);
        assert_eq!(pause_after(Duration::from_secs(5), least, 100), least);
        // Out-of-range duty is clamped, never a division by zero.
        assert_eq!(
            pause_after(Duration::from_millis(10), Duration::ZERO, 0),
            Duration::from_millis(990)
        );
    }

    #[test]
    fn the_log_line_names_why_a_run_stopped_as_the_report_does() {
        for stopped in [Stopped::Done, Stopped::MaxBatches, Stopped::OutOfTime] {
            assert_eq!(
                serde_json::to_value(stopped).unwrap(),
                serde_json::json!(stopped.as_str())
            );
        }
    }
}
