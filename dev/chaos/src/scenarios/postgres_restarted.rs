//! Scenario 4, `postgres_restarted`: `pg_ctl restart -m immediate` several times under load
//! (inline plain-SQL and transaction-shaped events, deferred events drained by workers
//! invoked on a schedule). Pass: no 2xx for anything not committed (every acknowledged event
//! has its completed ledger row and exactly one effect), and every receiver and worker process
//! recovers WITHOUT being restarted: their pids never change, and a fresh delivery succeeds
//! after each restart.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::timed::{
    deliver_timed, drive_workers, pids, stop_drive, wait_until_zero, NOT_COMPLETED,
};
use super::{charge_refunded, close, mixed_event, run_tag, Context, Scenario, DEFAULT_SOURCES};
use crate::postgres_control::restart_immediate;
use crate::report::ScenarioReport;
use crate::rng::Rng;
use crate::simulator::{secrets_of, totals, EventRecord, SimEvent, Simulator};
use crate::verify::check_effects;

/// Events (scaled): inline `charge.refunded`, inline `invoice.paid`, deferred `invoice.paid`.
pub const EVENTS: usize = 1_200;
/// Restarts.
pub const RESTARTS: usize = 4;
/// Running time before the first restart and between two.
pub const BETWEEN: Duration = Duration::from_secs(5);
/// Worker environments.
pub const WORKERS: usize = 2;

/// See the module docs.
pub struct PostgresRestarted;

#[async_trait::async_trait]
impl Scenario for PostgresRestarted {
    fn name(&self) -> &'static str {
        "postgres_restarted"
    }

    fn title(&self) -> &'static str {
        "pg_ctl restart -m immediate 4 times under inline and deferred load; no process restarted"
    }

    async fn run(&self, ctx: &Context) -> Result<ScenarioReport> {
        let started = Instant::now();
        let seed = ctx.seed ^ 0x04;
        let db = ctx.database(self.name()).await?;
        let worker_extra = [
            ("CHAOS_HANDLER_SLEEP_MS", "20"),
            ("HOOKLEDGER_BACKOFF_BASE_SECS", "1"),
            ("HOOKLEDGER_BACKOFF_CAP_SECS", "2"),
            ("HOOKLEDGER_LEASE_SECS", "20"),
            ("HOOKLEDGER_HANDLER_TIMEOUT_MS", "5000"),
            ("HOOKLEDGER_WORKER_MARGIN_MS", "2000"),
        ];
        let env = ctx.function_env(&db, DEFAULT_SOURCES, &[("CHAOS_HANDLER_SLEEP_MS", "20")]);
        let fleet = ctx.receiver_fleet(self.name(), ctx.receivers, env).await?;
        let workers = ctx
            .worker_fleet(
                self.name(),
                WORKERS,
                ctx.function_env(&db, DEFAULT_SOURCES, &worker_extra),
                Duration::from_secs(30),
            )
            .await?;
        let receiver_pids = pids(&fleet);
        let worker_pids = pids(&workers);
        let (drive, drivers) = drive_workers(&workers, Duration::from_millis(200));
        let simulator = Simulator::new(fleet.clone(), secrets_of(DEFAULT_SOURCES));
        let created = bench::unix_now();
        let run = run_tag(&mut Rng::new(seed));
        let event =
            |i: usize| mixed_event("pgr", &run, i, created, i.is_multiple_of(6), i % 6 == 1);
        let mut events: Vec<SimEvent> = (0..ctx.scaled(EVENTS)).map(event).collect();
        Rng::new(seed).shuffle(&mut events);

        let t0 = Instant::now();
        let restarter = {
            let cluster = ctx.cluster.clone();
            let simulator = Simulator::new(fleet.clone(), secrets_of(DEFAULT_SOURCES));
            let run = run.clone();
            tokio::spawn(async move {
                let mut restarts = Vec::new();
                let mut probes = Vec::new();
                for n in 0..RESTARTS {
                    tokio::time::sleep(BETWEEN).await;
                    let restarted = restart_immediate(&cluster).await;
                    let back = Instant::now();
                    // A fresh delivery after each restart, retried until a 2xx.
                    let probe = charge_refunded(
                        "stripe",
                        &format!("evt_pgr_probe_{run}_{n}"),
                        created,
                        &format!("ch_pgr_probe_{n}"),
                    );
                    let mut record = EventRecord {
                        source: probe.source.clone(),
                        id: probe.id.clone(),
                        ..Default::default()
                    };
                    while back.elapsed() < Duration::from_secs(60) {
                        let status = simulator.attempt(&probe).await;
                        record.attempts += 1;
                        *record.statuses.entry(status).or_default() += 1;
                        if (200..300).contains(&status) {
                            record.acks = 1;
                            record.first_ack_after = Some(back.elapsed());
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    restarts.push(restarted.map_err(|e| e.to_string()));
                    probes.push(record);
                }
                (restarts, probes)
            })
        };
        let pace = (BETWEEN * (RESTARTS as u32 + 1)) / events.len().max(1) as u32;
        let mut timed = deliver_timed(
            &simulator,
            &secrets_of(DEFAULT_SOURCES),
            &events,
            16,
            seed,
            t0,
            pace,
        )
        .await;
        let (restarts, probes) = restarter.await.unwrap_or_default();

        // The deferred events complete (the workers keep draining), then the check.
        let client = db.connect().await?;
        let pending = wait_until_zero(&client, NOT_COMPLETED, Duration::from_secs(120)).await?;
        stop_drive(&drive, drivers).await;
        let recoveries: Vec<Option<u64>> = probes
            .iter()
            .map(|p| p.first_ack_after.map(|d| d.as_millis() as u64))
            .collect();
        timed.records.extend(probes);
        let check = check_effects(&client, &timed.records).await?;
        let t = totals(&timed.records);
        let mut report = ScenarioReport::from_run(self.name(), self.title(), &t, &check);
        report.outbox_received = None;
        let ok_restarts = restarts.iter().filter(|r| r.is_ok()).count();
        report
            .faults
            .insert("postgres_restarts".into(), ok_restarts as u64);
        for (n, r) in restarts.iter().enumerate() {
            match r {
                Ok(r) => report.notes.push(format!(
                    "restart {}: pg_ctl {} ms, accepting after {} ms; first 2xx for a fresh delivery {:?} ms after",
                    n + 1,
                    r.pg_ctl.as_millis(),
                    r.accepting.as_millis(),
                    recoveries.get(n).copied().flatten()
                )),
                Err(e) => report.failures.push(format!("restart {} failed: {e}", n + 1)),
            }
        }
        if recoveries.iter().any(Option::is_none) {
            report
                .failures
                .push("a fresh delivery got no 2xx after a restart".into());
        }
        if pending > 0 {
            report.failures.push(format!(
                "{pending} ledger rows not completed after the drain"
            ));
        }
        let (after_r, after_w) = (pids(&fleet), pids(&workers));
        if after_r != receiver_pids || after_w != worker_pids {
            report.failures.push(format!(
                "a process was restarted: receivers {receiver_pids:?} -> {after_r:?}, workers {worker_pids:?} -> {after_w:?}"
            ));
        }
        report.notes.push(format!(
            "no process restarted: {} receiver and {} worker pids unchanged over the run ({}); worker invocations by status {:?}; deliveries by status {:?}",
            receiver_pids.len(),
            worker_pids.len(),
            if after_r == receiver_pids && after_w == worker_pids { "checked" } else { "CHANGED" },
            drive.statuses(),
            timed.statuses()
        ));
        Ok(close(report, &[&fleet, &workers], seed, ctx.receivers, started).await)
    }
}
