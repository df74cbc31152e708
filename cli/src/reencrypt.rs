//! `hookledger reencrypt`: seal a source's stored payloads again under the current master key
//! (after configuring a new one, so the old one can be retired), or seal the ones stored in the
//! clear before the source turned `encrypt_payload` on; in bounded batches, resumable.

use anyhow::Context;
use shared::db::Pool;
use shared::reencrypt::ReencryptReport;
use shared::Settings;

/// Options of `hookledger reencrypt`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The source whose payloads to seal again.
    #[arg(long)]
    source: String,
    /// Payloads per batch (one read and one write statement each), 1 to 10000.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(i64).range(1..=10_000))]
    batch_size: i64,
    /// Batches at most, 1 to 100000: a run stops there and prints where to continue.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_batches: u32,
    /// Continue after this event id (what an earlier run printed).
    #[arg(long, default_value = "")]
    after: String,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the job over one source and prints its report.
///
/// # Errors
/// An unknown source, no master key configured, or the database or KMS failing (the batches
/// before stay written; run again with `--after`).
pub async fn run(settings: &Settings, pool: &Pool, args: Args) -> anyhow::Result<()> {
    let source = settings
        .sources
        .get(&args.source)
        .with_context(|| format!("no source named {:?} is configured", args.source))?;
    let keys = settings.payload_keys.as_ref().context(
        "no master key is configured: set HOOKLEDGER_KMS_KEY_ID (or HOOKLEDGER_PAYLOAD_KEYS / \
         HOOKLEDGER_PAYLOAD_KEYS_FILE) to the key new payloads are sealed under",
    )?;
    let conn = pool
        .get()
        .await
        .map_err(shared::db::NoConnection::from)
        .context("no database connection")?;
    let report = shared::reencrypt::reencrypt(
        &conn,
        source,
        keys,
        &args.after,
        args.batch_size,
        args.max_batches,
    )
    .await
    .context("re-encryption failed")?;
    crate::print_report(args.json, &report, || {
        summary(&args.source, keys.current_master_key(), &report)
    })
}

fn summary(source: &str, current: &str, report: &ReencryptReport) -> String {
    let mut out = format!(
        "{source}: {} payloads read in {} batches; under {current} now: {} sealed again, {} \
         sealed from the clear; {} left as they were\n",
        report.read, report.batches, report.resealed, report.sealed, report.unchanged
    );
    if report.responses_resealed > 0 || report.responses_raced > 0 {
        out.push_str(&format!(
            "  stored responses sealed again: {}{}\n",
            report.responses_resealed,
            if report.responses_raced > 0 {
                format!(" ({} changed meanwhile, left)", report.responses_raced)
            } else {
                String::new()
            }
        ));
    }
    if report.raced > 0 {
        out.push_str(&format!(
            "  {} changed meanwhile by the worker, the sweep or an erasure (left to them)\n",
            report.raced
        ));
    }
    if !report.unreadable.is_empty() {
        out.push_str(&format!(
            "  could not be opened (altered, or their master key is gone): {}\n",
            report.unreadable.join(", ")
        ));
    }
    match (&report.next_after, report.done) {
        (_, true) => out.push_str("  done\n"),
        (Some(after), false) => out.push_str(&format!(
            "  stopped at --max-batches: continue with --after {after}\n"
        )),
        (None, false) => {}
    }
    out
}
