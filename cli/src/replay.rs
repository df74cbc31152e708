//! `hookledger replay`: pull a window of events back from the provider's API through the same
//! claim path as a verified delivery (`shared::replay`, what the replay function runs), or, for
//! GitHub, ask GitHub to redeliver what the ledger lacks.

use shared::App;
use std::time::Duration;

use shared::db::Pool;
use shared::doorbell::Doorbell;
use shared::replay::{ReplayOptions, ReplayReport, ReplayRequest, Replayer};
use shared::{Receiver, Settings};

use crate::progress::Progress;

/// Options of `hookledger replay`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The source, as configured (scheme stripe, paddle or github, with its API credential).
    #[arg(long)]
    source: String,
    /// Window start (inclusive), RFC 3339, e.g. 2026-12-01T09:20:00Z; not before now minus the
    /// source's replay look-back.
    #[arg(long, value_name = "TIME", value_parser = crate::args::rfc3339)]
    since: String,
    /// Window end (inclusive), RFC 3339; default now.
    #[arg(long, value_name = "TIME", value_parser = crate::args::rfc3339)]
    until: Option<String>,
    /// Count what would happen and write nothing (GitHub: ask for no redelivery).
    #[arg(long)]
    dry_run: bool,
    /// Continue a stopped run from the `next_cursor` it printed.
    #[arg(long, value_name = "CURSOR")]
    starting_after: Option<String>,
    /// Stripe only: list only the events whose delivery has not succeeded
    /// (`delivery_success=false`).
    #[arg(long)]
    failed_only: bool,
    /// Print the report as JSON (what the replay function returns).
    #[arg(long)]
    json: bool,
}

/// Runs one replay to the end of the window (no invocation deadline here: the run stops only
/// when the window is done or the provider fails) and prints its report; on a failure prints
/// how far it got and the cursor to resume from, then fails.
///
/// # Errors
/// Everything [`Replayer::run`] refuses or stops on (invalid window, beyond the look-back,
/// unsupported scheme, refused credential, malformed page, provider or database failure).
pub async fn run(app: App, settings: &Settings, pool: &Pool, args: Args) -> anyhow::Result<()> {
    let request = ReplayRequest {
        source: args.source.clone(),
        since: args.since.clone(),
        until: args.until.clone(),
        dry_run: args.dry_run,
        starting_after: args.starting_after.clone(),
        delivery_success: args.failed_only.then_some(false),
    };
    let receiver = Receiver::new(settings, pool.clone(), app.handlers(&settings.sources)?)
        .with_doorbell(Doorbell::new(settings.worker_function.as_deref()).await);
    let replayer = Replayer::new(ReplayOptions::default())?;
    let what = if args.dry_run {
        "events read (dry run)"
    } else {
        "events read"
    };
    let mut progress = Progress::new(!args.json, None, what);
    // Operators run this by hand: no deadline, the window decides when it ends.
    let outcome = replayer
        .run(
            &receiver,
            &request,
            || Duration::from_secs(u64::from(u32::MAX)),
            |report| progress.set(report.fetched),
        )
        .await;
    progress.finish();
    match outcome {
        Ok(report) => crate::print_report(args.json, &report, || summary(&args, &report)),
        // Refused, or stopped before reading anything: the reason is the whole answer.
        Err(error) if error.kind.is_refusal() || error.report.fetched == 0 => {
            Err(anyhow::Error::new(error))
        }
        Err(error) => {
            // How far it got goes to stdout (as the report), the reason to stderr.
            crate::print_report(args.json, &error.report, || summary(&args, &error.report))?;
            Err(anyhow::Error::new(error))
        }
    }
}

/// The report for people: one line of counts, and how to resume when a cursor is left.
fn summary(args: &Args, report: &ReplayReport) -> String {
    let mut out = format!(
        "replay {}{}: fetched {}, new {}, duplicates {}, redelivered {}, failed {}",
        args.source,
        if args.dry_run { " (dry run)" } else { "" },
        report.fetched,
        report.new,
        report.duplicates,
        report.redelivered,
        report.failed,
    );
    if let Some(cursor) = &report.next_cursor {
        out.push_str(&format!(
            "\nnot finished: run again with --starting-after {cursor} and the same window"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_count_and_how_to_resume() {
        let args = Args {
            source: "stripe".to_owned(),
            since: "2026-12-01T09:00:00Z".to_owned(),
            until: None,
            dry_run: false,
            starting_after: None,
            failed_only: false,
            json: false,
        };
        let report = ReplayReport {
            fetched: 4812,
            new: 22,
            duplicates: 4790,
            redelivered: 0,
            failed: 0,
            next_cursor: Some("evt_9".to_owned()),
        };
        assert_eq!(
            summary(&args, &report),
            "replay stripe: fetched 4812, new 22, duplicates 4790, redelivered 0, failed 0\n\
             not finished: run again with --starting-after evt_9 and the same window"
        );
    }
}
