//! `hookledger sweep`: one sweep run, without the invocation's time limit.

use std::time::Duration;

use anyhow::Context;
use shared::db::Pool;
use shared::sweep::SweepReport;
use shared::Settings;

use crate::progress::Progress;

/// Options of `hookledger sweep`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the report as JSON (what the sweeper function returns).
    #[arg(long)]
    json: bool,
    /// Rows per batch, 1 to 100000 (default: HOOKLEDGER_SWEEP_BATCH_SIZE, else 1000).
    #[arg(long, value_parser = clap::value_parser!(i64).range(1..=100_000))]
    batch_size: Option<i64>,
    /// Batches at most, 1 to 100000 (default: HOOKLEDGER_SWEEP_MAX_BATCHES, else 1000).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_batches: Option<u32>,
}

/// Runs one sweep and prints its report.
///
/// # Errors
/// When the database is unreachable or a batch fails (batches committed before stay committed).
pub async fn run(settings: &Settings, pool: &Pool, args: Args) -> anyhow::Result<()> {
    let mut limits = settings.sweep;
    if let Some(batch_size) = args.batch_size {
        limits.batch_size = batch_size;
    }
    if let Some(max_batches) = args.max_batches {
        limits.max_batches = max_batches;
    }
    let conn = pool
        .get()
        .await
        .map_err(shared::db::NoConnection::from)
        .context("no database connection")?;
    // Ages against the database's clock (which stamped claimed_at), not this host's.
    let now = shared::db::now(&conn)
        .await
        .map_err(shared::db::PgError::from)
        .context("reading the database's clock")?;
    let mut progress = Progress::new(!args.json, None, "expired keys deleted");
    let report = shared::sweep::run_with_progress(
        &conn,
        &settings.sources,
        &limits,
        now,
        || Duration::MAX,
        |deleted, _batches| progress.set(deleted),
    )
    .await;
    progress.finish();
    let report = report.context("sweep failed")?;
    crate::print_report(args.json, &report, || summary(&report))
}

/// The readable summary, e.g. `deleted 20000 expired keys in 5 batches (812 ms): done`.
fn summary(report: &SweepReport) -> String {
    let mut text = format!(
        "deleted {} expired keys in {} batches ({} ms): {}\n",
        report.deleted,
        report.batches,
        report.duration_ms,
        match report.stopped {
            shared::sweep::Stopped::Done => "nothing expired is left",
            shared::sweep::Stopped::MaxBatches => "stopped after max batches; run again",
            shared::sweep::Stopped::OutOfTime => "stopped for time; run again",
        }
    );
    for (source, rows) in &report.deleted_by_source {
        text.push_str(&format!("  {source}: {rows}\n"));
    }
    if report.payloads_dropped > 0 {
        text.push_str(&format!(
            "dropped {} payloads past their source's payload_retention_hours (the keys stay)\n",
            report.payloads_dropped
        ));
        for (source, rows) in &report.payloads_dropped_by_source {
            text.push_str(&format!("  {source}: {rows}\n"));
        }
    }
    if report.rejected_deleted > 0 {
        text.push_str(&format!(
            "  counts of rejected deliveries (hours past HOOKLEDGER_REJECTED_RETENTION_DAYS): {}\n",
            report.rejected_deleted
        ));
    }
    if !report.unconfigured.is_empty() {
        text.push_str(&format!(
            "not in the sources given, so swept under the default retention (30 days, dead 90): {}\n",
            report.unconfigured.join(", ")
        ));
    }
    text.push_str(&format!(
        "oldest key left: {}\n",
        report
            .oldest_remaining
            .as_deref()
            .unwrap_or("none (the ledger is empty)")
    ));
    text
}
