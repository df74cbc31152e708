//! `hookledger audit`: the auditor's figures now, as a table per source or JSON.

use anyhow::Context;
use shared::audit::AuditReport;
use shared::db::Pool;
use shared::Settings;

/// Options of `hookledger audit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the report as JSON (what the auditor function returns).
    #[arg(long)]
    json: bool,
    /// Record this run as the last run, as the function does (by default the CLI only reads, so
    /// the function's next "new since the last run" figures still cover this moment).
    #[arg(long)]
    record: bool,
    /// Count a claim as stuck after this many seconds, 1 to 86400 (default:
    /// HOOKLEDGER_AUDIT_STUCK_AFTER_SECS, else 300).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    stuck_after_secs: Option<u64>,
    /// Count sessions idle in a transaction longer than this many seconds, 1 to 86400
    /// (default: HOOKLEDGER_AUDIT_IDLE_IN_TRANSACTION_SECS, else 30).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    idle_in_transaction_secs: Option<u64>,
}

/// Runs one audit and prints its report.
///
/// # Errors
/// When the database is unreachable or a statement fails.
pub async fn run(settings: &Settings, pool: &Pool, args: Args) -> anyhow::Result<()> {
    let mut thresholds = settings.audit;
    if let Some(secs) = args.stuck_after_secs {
        thresholds.stuck_after_secs = secs;
    }
    if let Some(secs) = args.idle_in_transaction_secs {
        thresholds.idle_in_transaction_after_secs = secs;
    }
    let conn = pool
        .get()
        .await
        .map_err(shared::db::NoConnection::from)
        .context("no database connection")?;
    // Ages against the database's clock (which stamped claimed_at and dead_at), not this host's.
    let now = shared::db::now(&conn)
        .await
        .map_err(shared::db::PgError::from)
        .context("reading the database's clock")?;
    let report = if args.record {
        shared::audit::run(&conn, &settings.sources, &thresholds, now).await
    } else {
        shared::audit::peek(&conn, &settings.sources, &thresholds, now).await
    }
    .context("audit failed")?;
    crate::print_report(args.json, &report, || summary(&report))
}

/// A short age: `45s`, `12m`, `5h`, `3d`.
pub(crate) fn age(secs: u64) -> String {
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        7200..=172_799 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

fn optional_age(secs: Option<u64>) -> String {
    secs.map_or_else(|| "-".to_owned(), age)
}

/// The readable summary: a header, one table per source, the stuck keys and the sessions idle
/// in a transaction.
fn summary(report: &AuditReport) -> String {
    let mut text = format!(
        "audit at {} ({} ms); \"new\" counts since {}{}{}\n",
        report.at,
        report.duration_ms,
        report.since,
        if report.first_run { " (first run)" } else { "" },
        if report.recorded {
            ", recorded"
        } else {
            ", not recorded (--record to record)"
        },
    );
    for (source, audit) in &report.sources {
        text.push_str(&format!(
            "\n{source}{}{}\n",
            if audit.configured {
                ""
            } else {
                " (not configured: default retention)"
            },
            if audit.quiet { "  QUIET" } else { "" },
        ));
        let horizon = audit.retry_horizon_secs.map_or_else(|| "-".to_owned(), age);
        let rows: Vec<(&str, String)> = vec![
            (
                "stuck claims",
                format!(
                    "{} (oldest {})",
                    audit.stuck_claims,
                    age(audit.stuck_oldest_age)
                ),
            ),
            (
                "backlog due",
                format!(
                    "{} (oldest {})",
                    audit.backlog_due,
                    age(audit.backlog_oldest_age)
                ),
            ),
            (
                "dead letters",
                format!(
                    "{} ({} new, oldest {})",
                    audit.dead_letters,
                    audit.dead_letters_new,
                    age(audit.dead_letter_oldest_age)
                ),
            ),
            (
                "outbox backlog",
                format!(
                    "{} (oldest {})",
                    audit.outbox_backlog,
                    age(audit.outbox_backlog_oldest_age)
                ),
            ),
            (
                "outbox dead",
                format!(
                    "{} ({} new, oldest {})",
                    audit.outbox_dead,
                    audit.outbox_dead_new,
                    age(audit.outbox_dead_oldest_age)
                ),
            ),
            ("ordering ties new", audit.ordering_ties_new.to_string()),
            (
                "oldest key",
                format!(
                    "{} (horizon {horizon}, retention {}){}",
                    optional_age(audit.oldest_key_age),
                    age(audit.retention_secs),
                    if audit.oldest_key_too_young {
                        ", younger than the horizon"
                    } else {
                        ""
                    }
                ),
            ),
            (
                "newest key",
                format!(
                    "{}{}",
                    optional_age(audit.newest_key_age),
                    audit
                        .expected_interval_secs
                        .map(|e| format!(" (expected every {})", age(e)))
                        .unwrap_or_default()
                ),
            ),
            (
                "past retention",
                format!(
                    "{} ({} over an hour past)",
                    audit.past_retention, audit.past_retention_overdue
                ),
            ),
        ];
        for (label, value) in rows {
            text.push_str(&format!("  {label:<18} {value}\n"));
        }
        if !audit.capped.is_empty() {
            text.push_str(&format!(
                "  {:<18} {} (at least)\n",
                "capped",
                audit.capped.join(", ")
            ));
        }
    }
    if !report.stuck_keys.is_empty() {
        text.push_str("\nstuck keys (oldest first):\n");
        for key in &report.stuck_keys {
            text.push_str(&format!(
                "  {}/{} ({})\n",
                key.source,
                key.event_id,
                age(key.age_secs)
            ));
        }
    }
    let idle = &report.idle_in_transaction;
    text.push_str(&format!(
        "\nsessions idle in a transaction: {} (longest {}){}\n",
        idle.sessions,
        age(idle.longest_secs),
        if idle.pids.is_empty() {
            String::new()
        } else {
            format!(
                ", pids {}",
                idle.pids
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        }
    ));
    text
}
