//! Scenario 3, `worker_killed`: deferred `invoice.paid` events (handler sleep: a window
//! between lease and completion) and inline `charge.refunded` events with a `forward` outbox
//! target pointing at [`crate::target`]; several worker processes invoked on a schedule with
//! short leases; workers SIGKILLed between lease and completion (while an event is
//! `processing`) and in the middle of a dispatch (the target holding its response). Pass:
//! every event completes with one effect, every outbox message is delivered, the target sees
//! every idempotency key (at least once; redeliveries of a key are counted, and each key is
//! one distinct delivery), no panic.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use super::timed::{deliver_timed, drive_workers, stop_drive, wait_until_zero, NOT_COMPLETED};
use super::{close, mixed_event, run_tag, Context, Scenario};
use crate::report::ScenarioReport;
use crate::rng::Rng;
use crate::simulator::{secrets_of, totals, SimEvent, Simulator};
use crate::target::Target;
use crate::verify::check_effects;

/// Deferred events and inline events with an outbox message each (scaled).
pub const EVENTS: usize = 300;
/// Worker environments.
pub const WORKERS: usize = 3;
/// Kill rounds of each kind (between lease and completion; mid-dispatch); each round kills
/// every worker busy at that moment.
pub const KILL_ROUNDS: u64 = 12;
/// How long the deliveries are spread over, so there is work at every kill.
pub const SPREAD: Duration = Duration::from_secs(40);
/// The lease, seconds (HOOKLEDGER_LEASE_SECS): short, so a killed worker's events and messages
/// come back quickly.
pub const LEASE_SECS: u64 = 4;

/// See the module docs.
pub struct WorkerKilled;

fn sources(target_url: &str) -> String {
    json!([
        {"name": "stripe", "scheme": "stripe", "secrets": ["whsec_chaos_inline_secret"],
         "mode": "inline", "tolerance_secs": 300, "max_attempts": 50,
         "targets": [{"name": "chaos-target", "type": "forward", "url": target_url,
                      "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "timeout_ms": 2000,
                      "event_types": ["charge.*"]}]},
        {"name": "stripe-deferred", "scheme": "stripe", "secrets": ["whsec_chaos_deferred_secret"],
         "mode": "deferred", "max_attempts": 50}
    ])
    .to_string()
}

#[async_trait::async_trait]
impl Scenario for WorkerKilled {
    fn name(&self) -> &'static str {
        "worker_killed"
    }

    fn title(&self) -> &'static str {
        "SIGKILL workers between lease and completion and mid-dispatch; short leases; deferred events and outbox messages"
    }

    async fn run(&self, ctx: &Context) -> Result<ScenarioReport> {
        let started = Instant::now();
        let seed = ctx.seed ^ 0x03;
        let db = ctx.database(self.name()).await?;
        let target = Target::start().await?;
        let sources = sources(&target.url("/hooks/chaos"));
        let lease = LEASE_SECS.to_string();
        let worker_extra = [
            ("CHAOS_HANDLER_SLEEP_MS", "300"),
            ("HOOKLEDGER_LEASE_SECS", lease.as_str()),
            ("HOOKLEDGER_WORKER_BATCH", "1"),
            ("HOOKLEDGER_HANDLER_TIMEOUT_MS", "2000"),
            ("HOOKLEDGER_WORKER_MARGIN_MS", "1000"),
            ("HOOKLEDGER_BACKOFF_BASE_SECS", "1"),
            ("HOOKLEDGER_BACKOFF_CAP_SECS", "2"),
            ("HOOKLEDGER_OUTBOX_CONCURRENCY", "4"),
        ];
        let receivers = ctx
            .receiver_fleet(
                self.name(),
                ctx.receivers.min(4),
                ctx.function_env(&db, &sources, &[]),
            )
            .await?;
        let workers = ctx
            .worker_fleet(
                self.name(),
                WORKERS,
                ctx.function_env(&db, &sources, &worker_extra),
                Duration::from_secs(20),
            )
            .await?;
        let simulator = Simulator::new(receivers.clone(), secrets_of(&sources));
        let created = bench::unix_now();
        let run = run_tag(&mut Rng::new(seed));
        let n = ctx.scaled(EVENTS);
        let mut events: Vec<SimEvent> = (0..n)
            .map(|i| mixed_event("wk", &run, i, created, i.is_multiple_of(2), false))
            .collect();
        Rng::new(seed).shuffle(&mut events);
        let expected_keys: BTreeSet<String> = events
            .iter()
            .filter(|e| e.source == "stripe")
            .map(|e| format!("stripe:{}:1", e.id))
            .collect();

        let (drive, drivers) = drive_workers(&workers, Duration::from_millis(100));
        // Every event sent twice (on-purpose duplicates), spread over SPREAD, while the killer
        // works.
        let mut sent: Vec<SimEvent> = events.iter().chain(events.iter()).cloned().collect();
        Rng::new(seed ^ 0x2).shuffle(&mut sent);
        let deliveries = {
            let secrets = secrets_of(&sources);
            let pace = SPREAD / sent.len().max(1) as u32;
            tokio::spawn(async move {
                deliver_timed(&simulator, &secrets, &sent, 16, seed, Instant::now(), pace).await
            })
        };
        let client = db.connect().await?;
        let mut rng = Rng::new(seed ^ 0xdead);
        let (mut rounds_leased, mut rounds_dispatch, mut kills) = (0u64, 0u64, 0u64);
        let kill_deadline = Instant::now() + SPREAD + Duration::from_secs(60);
        let busy_kill = |kills: &mut u64| {
            let mut n = 0;
            for env in workers
                .environments
                .iter()
                .filter(|e| e.in_flight().is_some())
            {
                if env.kill().is_some() {
                    n += 1;
                }
            }
            *kills += n;
            n
        };
        while (rounds_leased < KILL_ROUNDS || rounds_dispatch < KILL_ROUNDS)
            && Instant::now() < kill_deadline
        {
            tokio::time::sleep(Duration::from_millis(rng.between(200, 700))).await;
            let dispatch = rounds_dispatch < KILL_ROUNDS
                && (rounds_leased >= KILL_ROUNDS || rng.below(2) == 0);
            if dispatch {
                // Mid-dispatch: hold the target's answers until a dispatch waits on one, then
                // kill every busy worker (the dispatching one among them).
                target.hold();
                let wait = Instant::now();
                while target.holding() == 0 && wait.elapsed() < Duration::from_secs(3) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                if target.holding() > 0 && busy_kill(&mut kills) > 0 {
                    rounds_dispatch += 1;
                }
                target.release();
            } else {
                // Between lease and completion: an event is `processing` (its handler sleeps).
                let wait = Instant::now();
                loop {
                    let processing: i64 = client
                        .query_one(
                            "SELECT count(*) FROM webhook_event WHERE status = 'processing'",
                            &[],
                        )
                        .await?
                        .get(0);
                    if processing > 0 {
                        if busy_kill(&mut kills) > 0 {
                            rounds_leased += 1;
                        }
                        break;
                    }
                    if wait.elapsed() > Duration::from_secs(2) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
        let records = deliveries.await.unwrap_or_default().records;
        // Every event completes and every message is delivered (leases expire, workers retry).
        let pending_events =
            wait_until_zero(&client, NOT_COMPLETED, Duration::from_secs(120)).await?;
        let pending_messages = wait_until_zero(
            &client,
            "SELECT count(*) FROM outbox WHERE status <> 'delivered'",
            Duration::from_secs(120),
        )
        .await?;
        stop_drive(&drive, drivers).await;
        let check = check_effects(&client, &records).await?;
        let t = totals(&records);
        let mut report = ScenarioReport::from_run(self.name(), self.title(), &t, &check);
        let summary = target.summary();
        let per_key = target.per_key();
        report.outbox_received = Some(summary.received);
        report.duplicates_sent = events.len() as u64;
        let missing: Vec<&String> = expected_keys
            .iter()
            .filter(|k| !per_key.contains_key(*k))
            .collect();
        let unexpected = per_key
            .keys()
            .filter(|k| !expected_keys.contains(*k))
            .count();
        if !missing.is_empty() {
            report.failures.push(format!(
                "{} outbox messages never reached the target (e.g. {:?})",
                missing.len(),
                missing.iter().take(3).collect::<Vec<_>>()
            ));
        }
        if unexpected > 0 {
            report.failures.push(format!(
                "{unexpected} idempotency keys at the target that no event should have produced"
            ));
        }
        if pending_events > 0 {
            report.failures.push(format!(
                "{pending_events} events not completed after the drain"
            ));
        }
        if pending_messages > 0 {
            report.failures.push(format!(
                "{pending_messages} outbox messages not delivered after the drain"
            ));
        }
        let rows: i64 = client
            .query_one("SELECT count(*) FROM outbox", &[])
            .await?
            .get(0);
        if rows as usize != expected_keys.len() {
            report.failures.push(format!(
                "{rows} outbox rows for {} inline events (one message each expected)",
                expected_keys.len()
            ));
        }
        report.faults.insert("worker_kills".into(), kills);
        report.faults.insert(
            "kill_rounds_between_lease_and_completion".into(),
            rounds_leased,
        );
        report
            .faults
            .insert("kill_rounds_mid_dispatch".into(), rounds_dispatch);
        if rounds_leased < KILL_ROUNDS || rounds_dispatch < KILL_ROUNDS {
            report.failures.push(format!(
                "only {rounds_leased} + {rounds_dispatch} kill rounds of {KILL_ROUNDS} + {KILL_ROUNDS} happened"
            ));
        }
        report
            .faults
            .insert("outbox_keys_distinct".into(), summary.keys);
        report
            .faults
            .insert("outbox_redeliveries_same_key".into(), summary.redeliveries);
        report.notes.push(format!(
            "each event sent twice, spread over {} s; {} deferred events and {} inline events with one forward message each; a kill round SIGKILLs every worker busy at that moment (an event `processing`, or a dispatch waiting on the held target); lease {LEASE_SECS} s, batch 1, handler sleep 300 ms, forward timeout 2 s; {WORKERS} workers invoked back to back ({} invocations, by status {:?}); target: {} requests, {} distinct idempotency keys ({} expected), {} redeliveries of an already-received key over {} keys (at-least-once: the dispatcher died before recording the 2xx; the key lets the target deduplicate)",
            SPREAD.as_secs(),
            events.len() - expected_keys.len(),
            expected_keys.len(),
            drive.invocations.load(std::sync::atomic::Ordering::Relaxed),
            drive.statuses(),
            summary.received,
            summary.keys,
            expected_keys.len(),
            summary.redeliveries,
            summary.keys_redelivered
        ));
        Ok(close(
            report,
            &[&receivers, &workers],
            seed,
            ctx.receivers.min(4),
            started,
        )
        .await)
    }
}
