//! The report: one [`ScenarioReport`] per scenario (written to `<out>/<scenario>.json`), and
//! `RELIABILITY.md` ([`write_markdown`]): the table per scenario, the machine, the command,
//! the date and the pass rule.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::simulator::Totals;
use crate::verify::EffectCheck;

/// The figures of one scenario run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ScenarioReport {
    /// Registered name, e.g. `retry_storm`.
    pub name: String,
    /// One line on what it does.
    pub title: String,
    /// Distinct events the simulator sent.
    pub events_sent: u64,
    /// Delivery attempts (all senders, all retries).
    pub attempts: u64,
    /// 2xx answers received.
    pub acks: u64,
    /// Business effects in the database (rows of `chaos_effects`, or the scenario's own).
    pub effects: u64,
    /// Outbox messages the local target received (None: the scenario has no outbox).
    pub outbox_received: Option<u64>,
    /// Deliveries that were duplicates on purpose (beyond one per event).
    pub duplicates_sent: u64,
    /// Events with more than one effect (or outbox messages doubled per idempotency key).
    pub doubled_effects: u64,
    /// Events never acknowledged with a 2xx, or acknowledged and then missing.
    pub lost_events: u64,
    /// The longest time from an event's first attempt to its first 2xx, milliseconds.
    pub longest_wait_ms: u64,
    /// Faults injected, by kind (e.g. `kills`, `kills_after_commit`).
    pub faults: BTreeMap<String, u64>,
    /// Answers by HTTP status (0 = the sender's own timeout).
    pub statuses: BTreeMap<String, u64>,
    /// Ledger rows of the scenario's events by status.
    pub ledger: BTreeMap<String, u64>,
    /// `panicked at` lines found in any process's log.
    pub panics: Vec<String>,
    /// Process exits the harness did not cause.
    pub unexpected_exits: Vec<String>,
    /// Why the scenario failed (empty when it passed).
    pub failures: Vec<String>,
    /// Extra facts worth a line (bounds, settings).
    pub notes: Vec<String>,
    /// Whether the pass rule held.
    pub pass: bool,
    /// Wall time of the scenario, seconds.
    pub duration_s: f64,
    /// The seed of its PRNG.
    pub seed: u64,
    /// The receiver environments it ran.
    pub receivers: usize,
    /// When it ran (RFC 3339, UTC).
    pub date: String,
    /// The command line that produced it.
    pub command: String,
}

impl ScenarioReport {
    /// A report named `name`, with the simulator's totals and the verifier's check folded in
    /// (figures, ledger, the pass-rule failures they show).
    pub fn from_run(name: &str, title: &str, totals: &Totals, check: &EffectCheck) -> Self {
        let mut report = Self {
            name: name.to_owned(),
            title: title.to_owned(),
            events_sent: totals.events,
            attempts: totals.attempts,
            acks: totals.acks,
            effects: check.effects,
            doubled_effects: check.doubled,
            lost_events: check.lost.max(totals.lost)
                + check.acked_without_effect
                + check.acked_not_completed,
            longest_wait_ms: totals.longest_wait_ms,
            statuses: totals
                .statuses
                .iter()
                .map(|(s, n)| (s.to_string(), *n))
                .collect(),
            ledger: check.ledger.clone(),
            ..Default::default()
        };
        if check.doubled > 0 {
            report.failures.push(format!(
                "{} events have more than one effect",
                check.doubled
            ));
        }
        if check.lost.max(totals.lost) > 0 {
            report.failures.push(format!(
                "{} events never got a 2xx",
                check.lost.max(totals.lost)
            ));
        }
        if check.acked_without_effect > 0 {
            report.failures.push(format!(
                "{} acknowledged events have no effect",
                check.acked_without_effect
            ));
        }
        if check.acked_not_completed > 0 {
            report.failures.push(format!(
                "{} acknowledged events have no completed ledger row",
                check.acked_not_completed
            ));
        }
        for example in &check.examples {
            report.notes.push(format!("example: {example}"));
        }
        report
    }

    /// Adds the fleet's panics and unexpected exits, then decides `pass` (no failure, no
    /// panic, no unexpected exit).
    pub fn finish(&mut self, panics: Vec<String>, unexpected_exits: Vec<String>) {
        self.panics.extend(panics);
        self.unexpected_exits.extend(unexpected_exits);
        if !self.panics.is_empty() {
            self.failures.push(format!(
                "{} panics in the processes' logs",
                self.panics.len()
            ));
        }
        if !self.unexpected_exits.is_empty() {
            self.failures.push(format!(
                "{} processes exited without being killed",
                self.unexpected_exits.len()
            ));
        }
        self.pass = self.failures.is_empty();
    }

    /// Writes `<dir>/<name>.json`.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write_json(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{}.json", self.name));
        std::fs::write(&path, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// Reads `<dir>/<name>.json` from an earlier run, if there is one.
pub fn read_json(dir: &Path, name: &str) -> Option<ScenarioReport> {
    let bytes = std::fs::read(dir.join(format!("{name}.json"))).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn opt(v: Option<u64>) -> String {
    v.map(|n| n.to_string()).unwrap_or_else(|| "n/a".into())
}

fn faults(r: &ScenarioReport) -> String {
    if r.faults.is_empty() {
        "none".into()
    } else {
        r.faults
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The pass rule, as printed in RELIABILITY.md.
pub const PASS_RULE: &str = "A scenario passes when every event acknowledged with a 2xx has \
exactly one business effect in the database and a `completed` ledger row, no event has two \
effects (nor an outbox message two deliveries per idempotency key), every event the simulator \
sent was eventually acknowledged (nothing lost), and no process panicked or exited without \
the harness killing it.";

/// Writes RELIABILITY.md at `path` from `reports` (in order), with the machine facts, the
/// command, the build (profile) and the date.
///
/// # Errors
/// The file cannot be written.
pub fn write_markdown(
    path: &Path,
    reports: &[ScenarioReport],
    machine: &serde_json::Value,
    postgres: &serde_json::Value,
    command: &str,
    build: &str,
    date: &str,
) -> Result<()> {
    let mut md = String::new();
    md.push_str("# Reliability under faults\n\n");
    md.push_str(
        "What `make chaos` measured: the receiver and the worker as real separate processes \
(several receiver processes, as several Lambda execution environments, each serving the real \
`function_handler` behind a local Lambda Runtime API), against a throwaway durable \
PostgreSQL, driven by a provider simulator that signs every attempt afresh, retries every \
non-2xx or timeout with backoff (20 ms doubling to 1 s, jittered) until it gets a 2xx, sends \
duplicates on purpose and reorders. Loopback only.\n\n",
    );
    md.push_str(&format!(
        "Command (the same seed gives the same events, order and fault schedule; the timing is the machine's): `{command}`  \nBuild: {build}  \nDate: {date}  \n"
    ));
    let all_pass = reports.iter().all(|r| r.pass);
    md.push_str(&format!(
        "Result: **{}** ({} of {} scenarios passed)\n\n",
        if all_pass { "PASS" } else { "FAIL" },
        reports.iter().filter(|r| r.pass).count(),
        reports.len()
    ));
    md.push_str("## Pass rule\n\n");
    md.push_str(PASS_RULE);
    md.push_str("\n\n## Results\n\n");
    md.push_str(
        "| scenario | pass | events sent | attempts | 2xx received | effects in DB | outbox received | duplicates sent | doubled effects | lost events | longest wait (ms) | faults injected | receivers | seconds |\n",
    );
    md.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n");
    for r in reports {
        md.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |\n",
            r.name,
            if r.pass { "yes" } else { "**no**" },
            r.events_sent,
            r.attempts,
            r.acks,
            r.effects,
            opt(r.outbox_received),
            r.duplicates_sent,
            r.doubled_effects,
            r.lost_events,
            r.longest_wait_ms,
            faults(r),
            r.receivers,
            r.duration_s
        ));
    }
    md.push_str("\n## Per scenario\n");
    for r in reports {
        md.push_str(&format!("\n### `{}`: {}\n\n", r.name, r.title));
        md.push_str(&format!(
            "- Result: {}; seed {}; ran {} at {:.1} s wall time.\n",
            if r.pass { "pass" } else { "FAIL" },
            r.seed,
            r.date,
            r.duration_s
        ));
        if r.command != command {
            md.push_str(&format!("- Command (an earlier run): `{}`\n", r.command));
        }
        let statuses: Vec<String> = r
            .statuses
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        md.push_str(&format!(
            "- Answers by status (0 = the sender's own timeout): {}\n",
            if statuses.is_empty() {
                "none".into()
            } else {
                statuses.join(", ")
            }
        ));
        let ledger: Vec<String> = r.ledger.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        md.push_str(&format!(
            "- Ledger rows of its events: {}\n",
            if ledger.is_empty() {
                "none".into()
            } else {
                ledger.join(", ")
            }
        ));
        md.push_str(&format!("- Faults injected: {}\n", faults(r)));
        for note in &r.notes {
            md.push_str(&format!("- {note}\n"));
        }
        md.push_str(&format!("- Panics: {}\n", r.panics.len()));
        for p in r.panics.iter().take(5) {
            md.push_str(&format!("  - `{p}`\n"));
        }
        md.push_str(&format!(
            "- Exits the harness did not cause: {}\n",
            r.unexpected_exits.len()
        ));
        for e in r.unexpected_exits.iter().take(5) {
            md.push_str(&format!("  - {e}\n"));
        }
        for f in &r.failures {
            md.push_str(&format!("- **Failure:** {f}\n"));
        }
    }
    md.push_str(
        "\n## Machine\n\nShared with other work while it ran (the load average is read when this \
file is written); the wait figures are from that machine, not an idle one.\n\n```json\n",
    );
    md.push_str(&serde_json::to_string_pretty(machine)?);
    md.push_str("\n```\n\nPostgreSQL:\n\n```json\n");
    md.push_str(&serde_json::to_string_pretty(postgres)?);
    md.push_str("\n```\n");
    std::fs::write(path, md).with_context(|| format!("writing {}", path.display()))
}
