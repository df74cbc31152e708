//! `hookledger rejected`: the deliveries the receiver refused, counted per source and reason
//! (`shared::rejected`, table `rejected_delivery`): bad signatures, unknown sources (all under
//! `(unknown)`), bodies too large, event ids reused with another body, requests it could not
//! read. Counted by the hour; read-only.

use std::time::{Duration, SystemTime};

use anyhow::Context;
use shared::db::Pool;
use shared::rejected::{counts_since, RejectedCount};
use shared::timestamp::rfc3339;
use shared::Settings;

/// Options of `hookledger rejected`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The window, back from now: `<n>m`, `<n>h` or `<n>d` (e.g. 90m, 24h, 7d; at most 3650d).
    /// Counted by the hour: from the start of the hour (UTC) the window's start falls in.
    #[arg(long, default_value = "24h", value_parser = crate::args::duration)]
    since: Duration,
    /// Print the counts as JSON: `{"since", "at", "rejected": [{"source", "reason", "status",
    /// "count", "last_at"}]}`.
    #[arg(long)]
    json: bool,
}

/// Reads and prints the counts (`shared::rejected::counts_since`).
///
/// # Errors
/// When the database is unreachable or the statement fails.
pub async fn run(_settings: &Settings, pool: &Pool, args: Args) -> anyhow::Result<()> {
    let conn = pool
        .get()
        .await
        .map_err(shared::db::NoConnection::from)
        .context("no database connection")?;
    // The window against the database's clock, as the receivers' counts are bucketed by theirs.
    let now = shared::db::now(&conn)
        .await
        .map_err(shared::db::PgError::from)
        .context("reading the database's clock")?;
    let since = now
        .checked_sub(args.since)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let counts = counts_since(&conn, since)
        .await
        .context("reading the rejected deliveries")?;
    let report = serde_json::json!({
        "since": rfc3339(since),
        "at": rfc3339(now),
        "rejected": counts.iter().map(RejectedCount::to_json).collect::<Vec<_>>(),
    });
    crate::print_report(args.json, &report, || table(since, &counts))
}

/// The plain table: a header line, then one line per source and reason.
fn table(since: SystemTime, counts: &[RejectedCount]) -> String {
    let mut text = format!(
        "rejected deliveries since {} (counted by the hour, UTC)\n",
        rfc3339(since)
    );
    if counts.is_empty() {
        text.push_str("none\n");
        return text;
    }
    let width = counts
        .iter()
        .map(|c| c.source.len())
        .max()
        .unwrap_or(0)
        .max("SOURCE".len());
    text.push_str(&format!(
        "{:<width$}  {:<15}  {:>6}  {:>8}  LAST SEEN\n",
        "SOURCE", "REASON", "STATUS", "COUNT"
    ));
    for count in counts {
        text.push_str(&format!(
            "{:<width$}  {:<15}  {:>6}  {:>8}  {}\n",
            count.source,
            count.reason.as_str(),
            count.reason.status(),
            count.count,
            rfc3339(count.last_at)
        ));
    }
    text
}
