//! `hookledger forget`: erase one event's payload, stored response, error and outbox payloads,
//! or those of every event of a data subject, keeping its key so a retry is still a duplicate
//! (`shared::forget::run`, what the replay function's `forget` input and the console's Forget
//! action run).

use std::io::{BufRead, IsTerminal, Write};

use shared::db::Pool;
use shared::forget::{ForgetReport, ForgetRequest};
use shared::Settings;

/// Options of `hookledger forget`: one event by `--event-id`, or every event of a data
/// subject by `--subject` (the identifier the payloads name, hashed with the source's
/// `subject` key).
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["event_id", "subject"])))]
pub struct Args {
    /// The source, as configured.
    #[arg(long)]
    source: String,
    /// The event to erase, by id.
    #[arg(long = "event-id", value_name = "ID", conflicts_with = "subject")]
    event_id: Option<String>,
    /// Erase every event of this data subject (e.g. a Stripe customer id): looked up by the
    /// keyed hash the source's `subject` setting stores when an event arrives. Never printed
    /// or stored.
    #[arg(long, value_name = "IDENTIFIER")]
    subject: Option<String>,
    /// Who asks (an operator, a ticket): recorded in each erased event's history.
    #[arg(long, value_name = "NAME")]
    by: String,
    /// Why, recorded beside it (never the subject's identifier).
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// Count what would be erased and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Do not ask for confirmation (needed when stdin is not a terminal).
    #[arg(long)]
    yes: bool,
    /// Print the report as JSON (what the replay function returns for a `forget` input).
    #[arg(long)]
    json: bool,
}

impl Args {
    /// The request, as the replay function's `forget` input would carry it.
    fn request(&self, dry_run: bool) -> ForgetRequest {
        ForgetRequest {
            source: self.source.clone(),
            event_id: self.event_id.clone(),
            subject: self.subject.clone(),
            by: self.by.clone(),
            reason: self.reason.clone(),
            dry_run,
        }
    }
}

/// Runs one erasure (after a dry run and a confirmation, unless `--yes` or `--dry-run`) and
/// prints its report.
///
/// # Errors
/// An invalid request, an unknown source, `--subject` on a source without `subject`, no
/// confirmation, or a database failure (batches erased before it stay erased).
pub async fn run(settings: &Settings, pool: &Pool, args: Args) -> anyhow::Result<()> {
    let sources = &settings.sources;
    if !args.dry_run && !args.yes {
        let preview = shared::forget::run(pool, sources, &args.request(true)).await?;
        if preview.erased > 0 && !confirmed(&preview)? {
            anyhow::bail!("nothing erased: not confirmed");
        }
    }
    let report = shared::forget::run(pool, sources, &args.request(args.dry_run)).await?;
    let what = match &args.event_id {
        Some(id) => format!("{}/{id}", report.source),
        None => format!("{}: the subject's events", report.source),
    };
    crate::print_report(args.json, &report, || summary(&report, &what))
}

/// Asks on the terminal whether to erase what `preview` counted.
fn confirmed(preview: &ForgetReport) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "forget erases for good: confirm with --yes (stdin is not a terminal to ask on), \
             or look first with --dry-run"
        );
    }
    let mut stderr = std::io::stderr();
    write!(
        stderr,
        "erase {} events and {} outbox messages of {}? This cannot be undone. [y/N] ",
        preview.erased, preview.outbox_messages, preview.source
    )?;
    stderr.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES"))
}

/// The ids listed after a label: the first 20, then how many more.
fn ids(ids: &[String], total: u64) -> String {
    const SHOWN: usize = 20;
    let mut text = ids
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    let shown = ids.len().min(SHOWN) as u64;
    if total > shown {
        text.push_str(&format!(" ... ({} more)", total - shown));
    }
    text
}

/// The readable report, e.g. `stripe: the subject's events: erased 3 events and emptied 2
/// outbox messages`, then what was left and why. Names no erased value.
fn summary(report: &ForgetReport, what: &str) -> String {
    let mut text = if report.events == 0 {
        format!("{what}: not in the ledger; nothing to erase\n")
    } else if report.dry_run {
        format!(
            "{what}: dry run: would erase {} of {} events and empty {} outbox messages; \
             nothing written\n",
            report.erased, report.events, report.outbox_messages
        )
    } else if report.erased == 0 && report.unfinished_count == 0 && report.done {
        format!("{what}: nothing left to erase (already erased)\n")
    } else {
        format!(
            "{what}: erased {} events (payload, stored response, last error, history values) \
             and emptied {} outbox messages, in {} batches; keys, digests and times stay, so \
             a retry is still answered as a duplicate\n",
            report.erased, report.outbox_messages, report.batches
        )
    };
    if report.unfinished_count > 0 {
        text.push_str(&format!(
            "  unfinished, kept with their payload (the worker still needs it): {}: {}\n  \
             run the same forget again once they have completed or died\n",
            report.unfinished_count,
            ids(&report.unfinished, report.unfinished_count)
        ));
    }
    if !report.dry_run && !report.done {
        text.push_str("  stopped after its batches: run the same command again\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_what_was_erased_and_names_the_unfinished_ids() {
        let report = ForgetReport {
            source: "stripe".into(),
            target: "subject".into(),
            dry_run: false,
            events: 5,
            erased: 3,
            outbox_messages: 2,
            unfinished_count: 1,
            unfinished: vec!["evt_pending".into()],
            batches: 2,
            done: true,
        };
        let text = summary(&report, "stripe: the subject's events");
        assert!(
            text.starts_with("stripe: the subject's events: erased 3 events"),
            "{text}"
        );
        assert!(
            text.contains("emptied 2 outbox messages, in 2 batches"),
            "{text}"
        );
        assert!(text.contains("unfinished"), "{text}");
        assert!(text.contains(": 1: evt_pending"), "{text}");
        let dry = ForgetReport {
            dry_run: true,
            unfinished_count: 0,
            unfinished: Vec::new(),
            ..report.clone()
        };
        assert!(summary(&dry, "s/e").contains("would erase 3 of 5 events"));
        let gone = ForgetReport { events: 0, ..dry };
        assert!(summary(&gone, "s/e").contains("not in the ledger"));
        let many: Vec<String> = (0..25).map(|i| format!("e{i}")).collect();
        assert!(ids(&many, 120).ends_with("(100 more)"));
    }
}
