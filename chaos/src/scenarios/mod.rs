//! The scenarios, one file each, registered in [`all`] (one line each).
//!
//! A scenario implements [`Scenario`]: it gets a [`Context`] (the cluster, the binaries, the
//! seed, the receiver count, where logs go) and returns a [`ScenarioReport`]. See the crate
//! docs for how one is written.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use crate::cluster::{Cluster, Database};
use crate::lambda::{Fleet, ProcessSpec};
use crate::report::ScenarioReport;

pub mod frozen;
pub mod half_open;
pub mod out_of_order;
pub mod postgres_restarted;
pub mod receiver_killed;
pub mod retry_storm;
pub mod timed;
pub mod worker_killed;

/// One scenario.
#[async_trait::async_trait]
pub trait Scenario: Send + Sync {
    /// The name `--scenario` selects and the report file is named after (`retry_storm`).
    fn name(&self) -> &'static str;
    /// One line on what it does, for RELIABILITY.md.
    fn title(&self) -> &'static str;
    /// Runs it. An `Err` is a harness failure (the scenario counts as failed); a pass-rule
    /// violation is a report with `pass = false`.
    async fn run(&self, ctx: &Context) -> Result<ScenarioReport>;
}

/// Every scenario, in the order `make chaos` runs them.
pub fn all() -> Vec<Box<dyn Scenario>> {
    vec![
        Box::new(retry_storm::RetryStorm),
        Box::new(receiver_killed::ReceiverKilled),
        Box::new(worker_killed::WorkerKilled),
        Box::new(postgres_restarted::PostgresRestarted),
        Box::new(frozen::Frozen),
        Box::new(half_open::HalfOpen),
        Box::new(out_of_order::OutOfOrder),
    ]
}

/// The sources every scenario's receivers get unless it builds its own: `stripe` (inline) and
/// `stripe-deferred` (deferred); secrets only for this run's loopback deliveries.
pub const DEFAULT_SOURCES: &str = r#"[
  {"name": "stripe", "scheme": "stripe", "secrets": ["whsec_chaos_inline_secret"], "mode": "inline", "tolerance_secs": 300},
  {"name": "stripe-deferred", "scheme": "stripe", "secrets": ["whsec_chaos_deferred_secret"], "mode": "deferred", "max_attempts": 25}
]"#;

/// What a scenario runs with.
pub struct Context {
    /// The harness's PostgreSQL (chaos-b restarts it through `data_dir` / `pg_ctl()`).
    pub cluster: Arc<Cluster>,
    /// The `chaos-receiver` binary.
    pub receiver_bin: PathBuf,
    /// The `chaos-worker` binary.
    pub worker_bin: PathBuf,
    /// The run's seed (each scenario derives its own streams from it).
    pub seed: u64,
    /// Receiver environments (`--receivers`, default 8).
    pub receivers: usize,
    /// Where the processes' logs go (`<out>/logs/<scenario>/`).
    pub log_root: PathBuf,
    /// `RUST_LOG` for the functions (`CHAOS_RUST_LOG`, default `warn`: one JSON line per
    /// delivery at `info` costs the 2-core machine more than the deliveries).
    pub rust_log: String,
    /// Scale factor for event counts (`--scale`, 1.0 = the issue's figures).
    pub scale: f64,
}

impl Context {
    /// A fresh migrated database named `chaos_<scenario>`.
    ///
    /// # Errors
    /// As [`Cluster::database`].
    pub async fn database(&self, scenario: &str) -> Result<Database> {
        self.cluster.database(&format!("chaos_{scenario}")).await
    }

    /// `n` scaled by `--scale` (at least 1).
    pub fn scaled(&self, n: usize) -> usize {
        ((n as f64 * self.scale).round() as usize).max(1)
    }

    /// The environment every function process gets: the database, the sources, `RUST_LOG`,
    /// one pooled connection (as one Lambda environment uses), then `extra`.
    pub fn function_env(
        &self,
        database: &Database,
        sources_json: &str,
        extra: &[(&str, &str)],
    ) -> Vec<(String, String)> {
        let mut env: HashMap<String, String> = [
            ("DATABASE_URL", database.url.as_str()),
            ("HOOKLEDGER_SOURCES", sources_json),
            ("RUST_LOG", self.rust_log.as_str()),
            ("HOOKLEDGER_DB_POOL_SIZE", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        for (k, v) in extra {
            env.insert((*k).to_owned(), (*v).to_owned());
        }
        env.into_iter().collect()
    }

    /// Starts `count` `chaos-receiver` environments for `scenario` (logs under
    /// `<log_root>/<scenario>/`), with the template's receiver timeout (10 s) and a 10 s
    /// bound on waiting for an idle environment.
    ///
    /// # Errors
    /// As [`Fleet::start`].
    pub async fn receiver_fleet(
        &self,
        scenario: &str,
        count: usize,
        env: Vec<(String, String)>,
    ) -> Result<Arc<Fleet>> {
        let spec = ProcessSpec {
            name: "receiver".into(),
            binary: self.receiver_bin.clone(),
            env,
            log_dir: self.log_root.join(scenario),
        };
        Ok(Arc::new(
            Fleet::start(
                spec,
                count,
                Duration::from_secs(10),
                Duration::from_secs(10),
            )
            .await?,
        ))
    }

    /// Starts `count` `chaos-worker` environments for `scenario`, with `timeout` (the
    /// template's worker timeout is 300 s) and the same bound on waiting for an idle one.
    /// `timeout` must exceed `HOOKLEDGER_WORKER_MARGIN_MS` (10 s) plus
    /// `HOOKLEDGER_HANDLER_TIMEOUT_MS`, or the worker leases nothing and answers
    /// `"out_of_time": true`.
    ///
    /// # Errors
    /// As [`Fleet::start`].
    pub async fn worker_fleet(
        &self,
        scenario: &str,
        count: usize,
        env: Vec<(String, String)>,
        timeout: Duration,
    ) -> Result<Arc<Fleet>> {
        let spec = ProcessSpec {
            name: "worker".into(),
            binary: self.worker_bin.clone(),
            env,
            log_dir: self.log_root.join(scenario),
        };
        Ok(Arc::new(
            Fleet::start(spec, count, timeout, Duration::from_secs(10)).await?,
        ))
    }
}

/// The fleet's panics and unexpected exits, as report lines.
pub fn process_findings(fleet: &Fleet) -> (Vec<String>, Vec<String>) {
    let exits = fleet
        .unexpected_exits()
        .into_iter()
        .map(|e| format!("{}: {}", e.process, e.status))
        .collect();
    (fleet.panics(), exits)
}

/// A report line with the fleet's delivery outcomes ([`Fleet::outcomes`]).
pub fn outcomes_note(fleet: &Fleet) -> String {
    let outcomes: Vec<String> = fleet
        .outcomes()
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    format!(
        "the receivers' own outcome per answered delivery (their metric lines): {}",
        if outcomes.is_empty() {
            "none".to_owned()
        } else {
            outcomes.join(", ")
        }
    )
}
