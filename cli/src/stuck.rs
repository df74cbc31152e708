//! `hookledger stuck`: the auditor's stuck list now: `claimed` rows claimed longer ago than the
//! threshold (an inline claim whose delivery died mid-transaction, or deferred work the worker
//! has not reached) and `processing` rows whose lease expired (a worker died), per source, and
//! the oldest keys. The same statements as the auditor (`shared::ledger::audit::stuck`,
//! `stuck_keys`); read-only.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use shared::audit::{StuckKey, CAP};
use shared::db::Pool;
use shared::ledger::audit as sql;
use shared::telemetry::rfc3339;
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

/// One source's stuck work: `{"count", "oldest_age_secs"}`.
#[derive(Debug, Serialize)]
struct SourceStuck {
    count: u64,
    oldest_age_secs: u64,
}

/// The list: `{"at", "stuck_after_secs", "total", "capped", "sources", "keys"}`.
#[derive(Debug, Serialize)]
struct StuckReport {
    /// The database's time of the read, RFC 3339.
    at: String,
    stuck_after_secs: u64,
    /// Stuck rows over all sources.
    total: u64,
    /// Whether a count reached the cap (the numbers mean "at least").
    capped: bool,
    sources: BTreeMap<String, SourceStuck>,
    /// The oldest stuck keys, oldest first (at most --limit).
    keys: Vec<StuckKey>,
}

/// Reads and prints the stuck list.
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
        .map_err(|e| anyhow::anyhow!(shared::db::describe_pool(&e)))?;
    // Ages against the database's clock (which stamped claimed_at), not this host's.
    let now = shared::db::now(&conn)
        .await
        .context("reading the database's clock")?;
    let claimed_before = now
        .checked_sub(Duration::from_secs(stuck_after_secs))
        .unwrap_or(std::time::UNIX_EPOCH);
    let cap = CAP as i64;
    let figures = sql::stuck(&conn, claimed_before, now, cap)
        .await
        .context("reading the stuck claims")?;
    let keys = sql::stuck_keys(&conn, claimed_before, now, args.limit)
        .await
        .context("reading the stuck keys")?;
    let since = |at: std::time::SystemTime| now.duration_since(at).map_or(0, |d| d.as_secs());
    let report = StuckReport {
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
                        oldest_age_secs: figure.oldest.map_or(0, since),
                    },
                )
            })
            .collect(),
        keys: keys
            .into_iter()
            .map(|key| StuckKey {
                age_secs: since(key.since),
                source: key.source,
                event_id: key.event_id,
            })
            .collect(),
    };
    crate::print_report(args.json, &report, || summary(&report))
}

fn summary(report: &StuckReport) -> String {
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
