//! `hookledger stuck`: the auditor's stuck list now: `claimed` rows claimed longer ago than the
//! threshold (an inline claim whose delivery died mid-transaction, or deferred work the worker
//! has not reached) and `processing` rows whose lease expired (a worker died), per source, and
//! the oldest keys. The same statements as the auditor (`shared::audit::stuck_list`, which
//! the console's stuck page shows too); read-only.

use anyhow::Context;
use shared::audit::{stuck_list, StuckList};
use shared::db::Pool;
use shared::Settings;

use crate::audit::age;

/// Options of `hookledger stuck`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the list as JSON.
    #[arg(long)]
    json: bool,
    /// Count a claim as stuck after this many seconds, 1 to 86400 (default:
    /// HOOKLEDGER_AUDIT_STUCK_AFTER_SECS, else 300).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    stuck_after_secs: Option<u64>,
    /// List at most this many keys, oldest first, 1 to 10000.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(i64).range(1..=10_000))]
    limit: i64,
}

/// Reads and prints the stuck list (`shared::audit::stuck_list`).
///
/// # Errors
/// When the database is unreachable or a statement fails.
pub async fn run(settings: &Settings, pool: &Pool, args: Args) -> anyhow::Result<()> {
    let stuck_after_secs = args
        .stuck_after_secs
        .unwrap_or(settings.audit.stuck_after_secs);
    let conn = pool
        .get()
        .await
        .map_err(shared::db::NoConnection::from)
        .context("no database connection")?;
    let report = stuck_list(&conn, stuck_after_secs, args.limit)
        .await
        .context("reading the stuck claims")?;
    crate::print_report(args.json, &report, || summary(&report))
}

fn summary(report: &StuckList) -> String {
    let mut text = format!(
        "{}{} stuck at {} (claimed more than {} ago, or a lease expired)\n",
        report.total,
        if report.capped { "+" } else { "" },
        report.at,
        age(report.stuck_after_secs)
    );
    for (source, figure) in &report.sources {
        text.push_str(&format!(
            "  {source:<18} {} (oldest {})\n",
            figure.count,
            age(figure.oldest_age_secs)
        ));
    }
    if !report.keys.is_empty() {
        text.push_str(&format!(
            "oldest {} (inspect one: hookledger inspect --source SOURCE EVENT_ID):\n",
            report.keys.len()
        ));
        for key in &report.keys {
            text.push_str(&format!(
                "  {}/{} ({})\n",
                key.source,
                key.event_id,
                age(key.age_secs)
            ));
        }
    }
    text
}
