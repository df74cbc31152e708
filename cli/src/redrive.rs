//! `hookledger redrive`: dead letters (by id or by when they went dead) and, with `--ignored`,
//! events that completed as `ignored` before their type had a handler, back to `claimed` for
//! the worker; with `--outbox`, dead outbox messages back to `pending` for its dispatch
//! (`shared::redrive::run`, what the replay function's `redrive` input runs).

use shared::App;
use std::time::Duration;

use shared::db::Pool;
use shared::doorbell::Doorbell;
use shared::redrive::{RedriveReport, RedriveSpec, Which};
use shared::Settings;

use crate::progress::Progress;

/// Options of `hookledger redrive`: dead letters by `--event-id` or by `--since`, or with
/// `--ignored` the ignored events of `--event-type` since `--since`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["event_ids", "since"])))]
pub struct Args {
    /// The source, as configured.
    #[arg(long)]
    source: String,
    /// A dead letter to re-drive, by event id (repeat the flag, or give several after it; at
    /// most 10000).
    #[arg(
        long = "event-id",
        value_name = "ID",
        num_args = 1..,
        conflicts_with_all = ["since", "until", "ignored"]
    )]
    event_ids: Vec<String>,
    /// Window start (inclusive), RFC 3339, e.g. 2026-12-01T09:30:00Z: dead letters that went
    /// dead from then; with --ignored, events first delivered from then.
    #[arg(long, value_name = "TIME", value_parser = crate::args::rfc3339)]
    since: Option<String>,
    /// Window end (exclusive), RFC 3339; default now.
    #[arg(long, value_name = "TIME", requires = "since", value_parser = crate::args::rfc3339)]
    until: Option<String>,
    /// Re-run events that completed as `ignored` (no handler for their type when they arrived)
    /// instead of dead letters: needs --event-type and --since, and a handler for that type now.
    #[arg(long, requires_all = ["event_type", "since"])]
    ignored: bool,
    /// Re-drive dead outbox messages instead of dead events: those of the --event-id events,
    /// or those that went dead from --since. They go back to the worker's dispatch with their
    /// idempotency keys unchanged.
    #[arg(long, conflicts_with = "ignored")]
    outbox: bool,
    /// With --ignored: the event type that has a handler now.
    #[arg(long, value_name = "TYPE", requires = "ignored")]
    event_type: Option<String>,
    /// Count what would move and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON (what the replay function returns for a re-drive).
    #[arg(long)]
    json: bool,
}

impl Args {
    /// The request, as the replay function's `redrive` input would carry it.
    fn spec(&self) -> RedriveSpec {
        RedriveSpec {
            status: if self.ignored {
                Which::Ignored
            } else {
                Which::Dead
            },
            event_ids: (!self.event_ids.is_empty()).then(|| self.event_ids.clone()),
            event_type: self.event_type.clone(),
            since: self.since.clone(),
            until: self.until.clone(),
            outbox: self.outbox,
        }
    }
}

/// Runs one re-drive to the end (no invocation deadline here) and prints its report.
///
/// # Errors
/// An invalid request (bad time, empty id), an unknown source, no handler for the type of
/// ignored events, or a database failure (batches moved before it stay moved).
pub async fn run(app: App, settings: &Settings, pool: &Pool, args: Args) -> anyhow::Result<()> {
    let selection = args.spec().selection()?;
    let handlers = app.handlers(&settings.sources)?;
    // A dry run rings nothing: no AWS client (and none of its region lookups) for it.
    let doorbell = if args.dry_run {
        Doorbell::off()
    } else {
        Doorbell::new(settings.worker_function.as_deref()).await
    };
    // The bar's length is the count the run reads before it moves anything.
    let mut progress = Progress::new(!args.json && !args.dry_run, None, "re-driven");
    let report = shared::redrive::run(
        pool,
        &settings.sources,
        &handlers,
        &doorbell,
        &args.source,
        &selection,
        args.dry_run,
        || Duration::MAX,
        |report| {
            progress.set_total(report.matched);
            progress.set(report.redriven);
        },
    )
    .await;
    progress.finish();
    let report = report?;
    crate::print_report(args.json, &report, || summary(&report, doorbell.is_on()))
}

fn ids(ids: &[String]) -> String {
    const SHOWN: usize = 20;
    let mut text = ids
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    if ids.len() > SHOWN {
        text.push_str(&format!(
            " ... ({} more; --json lists all)",
            ids.len() - SHOWN
        ));
    }
    text
}

/// The readable report, e.g. `stripe: re-drove 3 of 3 dead letters (back to claimed for the
/// worker)`, then the ids refused, not dead and not found.
fn summary(report: &RedriveReport, doorbell: bool) -> String {
    let outbox = report.status == "outbox";
    let what = match report.status.as_str() {
        "ignored" => "ignored events",
        "outbox" => "dead outbox messages",
        _ => "dead letters",
    };
    let mut text = if report.dry_run {
        format!(
            "{}: dry run: would re-drive {} {what}; nothing written\n",
            report.source, report.matched
        )
    } else {
        format!(
            "{}: re-drove {} of {} {what} ({}{})\n",
            report.source,
            report.redriven,
            report.matched,
            if outbox {
                "back to pending: the worker dispatches each again, same idempotency key"
            } else {
                "back to claimed: the worker runs each once"
            },
            if report.redriven == 0 {
                ""
            } else if doorbell {
                "; rang it"
            } else {
                ", on its next scheduled run: HOOKLEDGER_WORKER_FUNCTION is unset"
            }
        )
    };
    let listed = if outbox {
        &report.idempotency_keys
    } else {
        &report.event_ids
    };
    if !listed.is_empty() {
        let more = if (listed.len() as u64) < report.matched.max(report.redriven) {
            " (the first of them)"
        } else {
            ""
        };
        text.push_str(&format!(
            "  {}{more}: {}\n",
            if report.dry_run {
                "would move"
            } else {
                "moved"
            },
            ids(listed)
        ));
    }
    if !report.dry_run && report.redriven < report.matched && report.complete {
        text.push_str(&format!(
            "  {} held by a delivery or a worker right now were left alone: run again later\n",
            report.matched - report.redriven
        ));
    }
    if report.no_payload > 0 {
        text.push_str(&format!(
            "  refused, no payload stored (the source keeps digests only): {}{}\n",
            report.no_payload,
            if report.no_payload_ids.is_empty() {
                String::new()
            } else {
                format!(": {}", ids(&report.no_payload_ids))
            }
        ));
    }
    if !report.not_dead.is_empty() {
        text.push_str(&format!(
            "  not dead (left alone): {}: {}\n",
            report.not_dead.len(),
            ids(&report.not_dead)
        ));
    }
    if !report.not_found.is_empty() {
        text.push_str(&format!(
            "  not in the ledger: {}: {}\n",
            report.not_found.len(),
            ids(&report.not_found)
        ));
    }
    if !report.complete {
        text.push_str("  stopped before the end: run the same command again\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_id_left_alone() {
        let report = RedriveReport {
            source: "stripe".into(),
            status: "dead".into(),
            dry_run: false,
            matched: 2,
            redriven: 2,
            no_payload: 1,
            not_dead: vec!["evt_done".into()],
            not_found: vec!["evt_gone".into()],
            no_payload_ids: vec!["evt_lean".into()],
            event_ids: vec!["evt_moved_1".into(), "evt_moved_2".into()],
            idempotency_keys: Vec::new(),
            complete: true,
        };
        let text = summary(&report, false);
        assert!(text.contains("moved: evt_moved_1 evt_moved_2"), "{text}");
        assert!(
            text.starts_with("stripe: re-drove 2 of 2 dead letters"),
            "{text}"
        );
        for id in ["evt_done", "evt_gone", "evt_lean"] {
            assert!(text.contains(id), "{text}");
        }
        assert!(text.contains("HOOKLEDGER_WORKER_FUNCTION"), "{text}");
        let many: Vec<String> = (0..25).map(|i| format!("e{i}")).collect();
        assert!(ids(&many).ends_with("(5 more; --json lists all)"));
    }
}
