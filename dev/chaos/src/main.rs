//! `chaos`: runs the scenarios (all, or those named with `--scenario`), writes each one's
//! figures to `<out>/<scenario>.json` and RELIABILITY.md; exits non-zero when a scenario fails
//! (after writing the report). The throwaway PostgreSQL is stopped on the way out, also after
//! an error or Ctrl-C.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use clap::Parser;

use chaos::cluster::Cluster;
use chaos::report::{self, ScenarioReport};
use chaos::scenarios::{self, Context};

#[derive(Parser, Debug)]
#[command(
    about = "the receiver and the worker as real processes under faults; writes RELIABILITY.md"
)]
struct Args {
    /// A scenario to run (repeatable; default: all, in order).
    #[arg(long = "scenario")]
    scenarios: Vec<String>,
    /// Where the markdown report goes.
    #[arg(long, default_value = "RELIABILITY.md")]
    report: PathBuf,
    /// Where each scenario's JSON and the processes' logs go.
    #[arg(long, default_value = "target/chaos")]
    out: PathBuf,
    /// The PRNG seed (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Receiver environments (processes).
    #[arg(long, default_value_t = 8)]
    receivers: usize,
    /// Scale the event counts (1.0 = the figures; e.g. 0.1 for a quick look).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// The chaos-receiver binary (default: beside this binary).
    #[arg(long)]
    receiver_bin: Option<PathBuf>,
    /// The chaos-worker binary (default: beside this binary).
    #[arg(long)]
    worker_bin: Option<PathBuf>,
    /// The repository root (scripts/postgres.sh).
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
}

fn beside_me(name: &str) -> Result<PathBuf> {
    let me = std::env::current_exe().context("locating this binary")?;
    Ok(me.with_file_name(name))
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let all = scenarios::all();
    if args.list {
        for s in &all {
            println!("{}\t{}", s.name(), s.title());
        }
        return Ok(());
    }
    for name in &args.scenarios {
        if !all.iter().any(|s| s.name() == name) {
            bail!(
                "no scenario {name:?}; known: {}",
                all.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
            );
        }
    }
    let selected: Vec<&dyn scenarios::Scenario> = all
        .iter()
        .map(|s| s.as_ref())
        .filter(|s| args.scenarios.is_empty() || args.scenarios.iter().any(|n| n == s.name()))
        .collect();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let command = std::env::args()
        .enumerate()
        .map(|(i, a)| if i == 0 { "chaos".to_owned() } else { a })
        .chain(
            args.seed
                .is_none()
                .then(|| format!("--seed {seed}"))
                .into_iter(),
        )
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!("chaos: seed {seed} ({command})");
    // Under `make chaos` (scripts/chaos.sh): the make command that reproduces this run.
    let command = match std::env::var("CHAOS_MAKE_ARGS") {
        Ok(make_args) => {
            let mut chaos_args = make_args.trim().to_owned();
            if args.seed.is_none() {
                chaos_args = format!("{chaos_args} --seed {seed}").trim().to_owned();
            }
            format!("make chaos CHAOS_ARGS=\"{chaos_args}\"")
        }
        Err(_) => command,
    };
    let receiver_bin = match &args.receiver_bin {
        Some(p) => p.clone(),
        None => beside_me("chaos-receiver")?,
    };
    let worker_bin = match &args.worker_bin {
        Some(p) => p.clone(),
        None => beside_me("chaos-worker")?,
    };
    for bin in [&receiver_bin, &worker_bin] {
        if !bin.exists() {
            bail!("{} not found (cargo build -p chaos --bins)", bin.display());
        }
    }
    let repo = std::fs::canonicalize(&args.repo)?;
    std::fs::create_dir_all(&args.out)?;
    let out = std::fs::canonicalize(&args.out)?;
    let cluster_dir = std::env::temp_dir().join(format!("chaos-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cluster_dir);
    eprintln!("chaos: starting PostgreSQL in {}", cluster_dir.display());
    let cluster = Arc::new(Cluster::start(
        &repo,
        &cluster_dir,
        "-c max_connections=400",
    )?);
    // Ctrl-C: stop the cluster (the functions die with us: kill_on_drop and SIGKILL).
    {
        let cluster = cluster.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("chaos: interrupted; stopping the functions and PostgreSQL");
                chaos::lambda::kill_all();
                cluster.stop();
                std::process::exit(130);
            }
        });
    }
    let result = run(
        &args,
        &all,
        &selected,
        &cluster,
        seed,
        &command,
        &out,
        receiver_bin,
        worker_bin,
    )
    .await;
    chaos::lambda::kill_all();
    cluster.stop();
    if !result? {
        std::process::exit(1);
    }
    Ok(())
}

/// Runs `selected`, writes the reports; `Ok(false)` when a scenario failed.
#[allow(clippy::too_many_arguments)]
async fn run(
    args: &Args,
    all: &[Box<dyn scenarios::Scenario>],
    selected: &[&dyn scenarios::Scenario],
    cluster: &Arc<Cluster>,
    seed: u64,
    command: &str,
    out: &std::path::Path,
    receiver_bin: PathBuf,
    worker_bin: PathBuf,
) -> Result<bool> {
    let ctx = Context {
        cluster: cluster.clone(),
        receiver_bin,
        worker_bin,
        seed,
        receivers: args.receivers,
        log_root: out.join("logs"),
        rust_log: std::env::var("CHAOS_RUST_LOG").unwrap_or_else(|_| "warn".into()),
        scale: args.scale,
    };
    let postgres = match chaos::cluster::connect(&cluster.url).await {
        Ok(client) => bench::postgres_facts(&client).await.unwrap_or_default(),
        Err(_) => serde_json::Value::Null,
    };
    let mut reports: Vec<ScenarioReport> = Vec::new();
    for scenario in selected {
        eprintln!("chaos: {} ...", scenario.name());
        let date = now_rfc3339();
        let mut report = match scenario.run(&ctx).await {
            Ok(report) => report,
            Err(e) => ScenarioReport {
                name: scenario.name().to_owned(),
                title: scenario.title().to_owned(),
                failures: vec![format!("the harness failed: {e:#}")],
                seed,
                ..Default::default()
            },
        };
        report.pass = report.failures.is_empty();
        report.date = date;
        report.command = command.to_owned();
        if report.title.is_empty() {
            report.title = scenario.title().to_owned();
        }
        report.write_json(out)?;
        eprintln!(
            "chaos: {}: {} (events {}, attempts {}, 2xx {}, effects {}, doubled {}, lost {}, longest wait {} ms, {:.1} s){}",
            report.name,
            if report.pass { "pass" } else { "FAIL" },
            report.events_sent,
            report.attempts,
            report.acks,
            report.effects,
            report.doubled_effects,
            report.lost_events,
            report.longest_wait_ms,
            report.duration_s,
            if report.failures.is_empty() {
                String::new()
            } else {
                format!(": {}", report.failures.join("; "))
            }
        );
        reports.push(report);
    }
    // Scenarios not run this time keep their latest figures (marked with their own command).
    let mut table = Vec::new();
    for scenario in all {
        if let Some(r) = reports.iter().find(|r| r.name == scenario.name()) {
            table.push(r.clone());
        } else if let Some(r) = report::read_json(out, scenario.name()) {
            table.push(r);
        }
    }
    report::write_markdown(
        &args.report,
        &table,
        &bench::machine_facts(),
        &postgres,
        command,
        if cfg!(debug_assertions) {
            "dev profile (unoptimised; the receivers and the worker are the same build)"
        } else {
            "release profile"
        },
        &now_rfc3339(),
    )?;
    eprintln!("chaos: wrote {}", args.report.display());
    Ok(reports.iter().all(|r| r.pass))
}
