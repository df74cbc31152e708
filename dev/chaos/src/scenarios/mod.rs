//! The scenarios, one file each, registered in [`all`] (one line each).
//!
//! A scenario implements [`Scenario`]: it gets a [`Context`] (the cluster, the binaries, the
//! seed, the receiver count, where logs go) and returns a [`ScenarioReport`]. See the crate
//! docs for how one is written.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use crate::cluster::{Cluster, Database};
use crate::lambda::{Fleet, ProcessSpec};
use crate::report::ScenarioReport;
use crate::rng::Rng;
use crate::simulator::{secrets_of, SimEvent, Simulator};

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

    /// The usual start of a load scenario: a fresh database for `scenario`
    /// ([`Context::database`]), [`Context::receivers`] receiver environments on
    /// [`DEFAULT_SOURCES`] with `extra` in their environment ([`Context::function_env`]), and a
    /// [`Simulator`] signing for those sources.
    ///
    /// # Errors
    /// As [`Context::database`] and [`Context::receiver_fleet`].
    pub async fn default_receivers(
        &self,
        scenario: &str,
        extra: &[(&str, &str)],
    ) -> Result<(Database, Arc<Fleet>, Simulator)> {
        let db = self.database(scenario).await?;
        let env = self.function_env(&db, DEFAULT_SOURCES, extra);
        let fleet = self.receiver_fleet(scenario, self.receivers, env).await?;
        let simulator = Simulator::new(fleet.clone(), secrets_of(DEFAULT_SOURCES));
        Ok((db, fleet, simulator))
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

/// A run's tag for event ids: the low 32 bits of `rng`'s next draw, in hex (`"9f3c01ab"`), so
/// two runs on one database never share an event id.
pub fn run_tag(rng: &mut Rng) -> String {
    format!("{:x}", rng.next_u64() & 0xffff_ffff)
}

/// A Stripe `invoice.paid` (the handler's transaction shape) on `source`, data object
/// `{"id": invoice, "object": "invoice"}`; `created` in Unix seconds.
pub fn invoice_paid(source: &str, id: &str, created: i64, invoice: &str) -> SimEvent {
    SimEvent::stripe(
        source,
        id,
        crate::handlers::INVOICE_PAID,
        created,
        json!({"id": invoice, "object": "invoice"}),
    )
}

/// A Stripe `charge.refunded` (the plain-SQL one-statement path) on `source`, data object
/// `{"id": charge, "object": "charge"}`; `created` in Unix seconds.
pub fn charge_refunded(source: &str, id: &str, created: i64, charge: &str) -> SimEvent {
    SimEvent::stripe(
        source,
        id,
        crate::handlers::CHARGE_REFUNDED,
        created,
        json!({"id": charge, "object": "charge"}),
    )
}

/// A Stripe `event_type` on the inline `stripe` source whose data object is a refunded charge
/// `{"id": charge, "object": "charge", "amount_refunded": 100 + i, "currency": "usd"}`
/// (`amount_refunded` in cents); `created` in Unix seconds.
pub fn refunded_charge(
    event_type: &str,
    id: &str,
    created: i64,
    charge: &str,
    i: usize,
) -> SimEvent {
    SimEvent::stripe(
        "stripe",
        id,
        event_type,
        created,
        json!({"id": charge, "object": "charge",
               "amount_refunded": 100 + i, "currency": "usd"}),
    )
}

/// Event `i` of a mixed inline/deferred run tagged `tag` (`half`, `pgr`, `wk`): id
/// `evt_<tag>_<run>_<i:05>`; a deferred `invoice.paid` when `deferred`, else an inline
/// `invoice.paid` when `inline_invoice`, else an inline `charge.refunded` (objects
/// `in_<tag>_<i>` / `ch_<tag>_<i>`).
pub fn mixed_event(
    tag: &str,
    run: &str,
    i: usize,
    created: i64,
    deferred: bool,
    inline_invoice: bool,
) -> SimEvent {
    let id = format!("evt_{tag}_{run}_{i:05}");
    let invoice = format!("in_{tag}_{i}");
    if deferred {
        invoice_paid("stripe-deferred", &id, created, &invoice)
    } else if inline_invoice {
        invoice_paid("stripe", &id, created, &invoice)
    } else {
        charge_refunded("stripe", &id, created, &format!("ch_{tag}_{i}"))
    }
}

/// The common end of a scenario: folds in the panics and unexpected exits of `fleets` (in
/// that order), shuts them down (in that order), decides `pass` ([`ScenarioReport::finish`])
/// and stamps the seed, the receiver count and the duration since `started` (seconds).
pub async fn close(
    mut report: ScenarioReport,
    fleets: &[&Fleet],
    seed: u64,
    receivers: usize,
    started: Instant,
) -> ScenarioReport {
    let (mut panics, mut exits) = (Vec::new(), Vec::new());
    for fleet in fleets {
        let (p, e) = process_findings(fleet);
        panics.extend(p);
        exits.extend(e);
    }
    for fleet in fleets {
        fleet.shutdown().await;
    }
    report.finish(panics, exits);
    report.seed = seed;
    report.receivers = receivers;
    report.duration_s = started.elapsed().as_secs_f64();
    report
}
