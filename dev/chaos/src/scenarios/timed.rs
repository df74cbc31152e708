//! Helpers of the fault scenarios (worker_killed, postgres_restarted, frozen, half_open): a
//! provider that times every attempt (the simulator's records keep only totals), signed
//! deliveries to one chosen environment, the worker driven on a schedule, and the processes'
//! pids (to prove nothing was restarted).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{stream, StreamExt};
use lambda_sim::HttpApiEvent;

use crate::lambda::{scheduled_event, Environment, Fleet, Outcome, Tag};
use crate::rng::Rng;
use crate::simulator::{EventRecord, SimEvent, Simulator};

/// One timed attempt.
#[derive(Debug, Clone, Copy)]
pub struct Attempt {
    /// What API Gateway would answer (0: the sender's own timeout).
    pub status: u16,
    /// From the hand-over to an environment to its answer: the function's own time, what the
    /// client deadline bounds (the wait for an idle environment is not in it).
    pub took: Duration,
    /// Waiting for an idle environment (Lambda's concurrency limit).
    pub queued: Duration,
    /// When it was sent, from the run's start.
    pub sent_at: Duration,
}

/// A run's records (for `verify`) and every attempt, timed.
#[derive(Debug, Default)]
pub struct TimedRun {
    /// One record per event.
    pub records: Vec<EventRecord>,
    /// Every attempt, in completion order.
    pub attempts: Vec<Attempt>,
}

impl TimedRun {
    /// The longest attempt with `status` (any status when `None`), milliseconds.
    pub fn longest_ms(&self, status: Option<u16>) -> u64 {
        self.attempts
            .iter()
            .filter(|a| status.is_none_or(|s| a.status == s))
            .map(|a| a.took.as_millis() as u64)
            .max()
            .unwrap_or(0)
    }

    /// Attempts by status.
    pub fn statuses(&self) -> BTreeMap<u16, u64> {
        let mut statuses = BTreeMap::new();
        for a in &self.attempts {
            *statuses.entry(a.status).or_default() += 1;
        }
        statuses
    }
}

/// Delivers `events` (one sender each, at most `window` at once, event `i` not before
/// `start + i * pace`) through the simulator's fleet, signed with `secrets` (source -> secret),
/// retrying every non-2xx with the simulator's backoff until a 2xx or its give-up bound; times
/// each attempt from `start`.
pub async fn deliver_timed(
    simulator: &Simulator,
    secrets: &HashMap<String, String>,
    events: &[SimEvent],
    window: usize,
    seed: u64,
    start: Instant,
    pace: Duration,
) -> TimedRun {
    let mut rng = Rng::new(seed);
    let policy = simulator.policy.clone();
    let runs: Vec<_> = events
        .iter()
        .enumerate()
        .map(|(i, event)| {
            let mut rng = rng.fork();
            let policy = policy.clone();
            let not_before = start + pace * i as u32;
            async move {
                tokio::time::sleep_until(not_before.into()).await;
                let mut record = EventRecord {
                    source: event.source.clone(),
                    id: event.id.clone(),
                    ..Default::default()
                };
                let mut attempts = Vec::new();
                let first = Instant::now();
                let mut backoff = policy.first_backoff;
                let secret = secrets.get(&event.source).map(String::as_str).unwrap_or("");
                loop {
                    let sent = Instant::now();
                    let tag = Tag {
                        source: event.source.clone(),
                        event_id: event.id.clone(),
                    };
                    let invoke = simulator.fleet().invoke(signed_payload(event, secret), tag);
                    let (status, took, queued) =
                        match tokio::time::timeout(policy.attempt_timeout, invoke).await {
                            Ok(invoked) => (invoked.outcome.status(), invoked.ran, invoked.queued),
                            Err(_) => (0, sent.elapsed(), Duration::ZERO),
                        };
                    attempts.push(Attempt {
                        status,
                        took,
                        queued,
                        sent_at: sent.duration_since(start),
                    });
                    record.attempts += 1;
                    *record.statuses.entry(status).or_default() += 1;
                    if (200..300).contains(&status) {
                        record.acks += 1;
                        record.first_ack_after = Some(first.elapsed());
                        break;
                    }
                    if first.elapsed() > policy.give_up_after {
                        record.gave_up += 1;
                        break;
                    }
                    let high = backoff.as_millis() as u64;
                    tokio::time::sleep(Duration::from_millis(rng.between(high / 2, high))).await;
                    backoff = (backoff * 2).min(policy.max_backoff);
                }
                (record, attempts)
            }
        })
        .collect();
    let done: Vec<(EventRecord, Vec<Attempt>)> = stream::iter(runs)
        .buffer_unordered(window.max(1))
        .collect()
        .await;
    let mut run = TimedRun::default();
    for (record, attempts) in done {
        run.records.push(record);
        run.attempts.extend(attempts);
    }
    run
}

/// `event` as API Gateway would hand it to the receiver, signed now with `secret`.
pub fn signed_payload(event: &SimEvent, secret: &str) -> Bytes {
    let signature = bench::stripe_signature(secret, bench::unix_now(), event.body.as_bytes());
    HttpApiEvent::webhook("chaos", &event.source)
        .header("content-type", "application/json; charset=utf-8")
        .header("stripe-signature", signature)
        .body(event.body.as_str())
        .to_bytes()
}

/// One attempt of `event` on environment `env` (not through the fleet's idle queue): the
/// status and how long it took.
pub async fn invoke_on(
    env: &Environment,
    event: &SimEvent,
    secret: &str,
    timeout: Duration,
) -> (u16, Duration) {
    let started = Instant::now();
    let tag = Tag {
        source: event.source.clone(),
        event_id: event.id.clone(),
    };
    let outcome: Outcome = env
        .invoke(signed_payload(event, secret), tag, timeout)
        .await;
    (outcome.status(), started.elapsed())
}

/// What [`drive_workers`] did.
#[derive(Debug, Default)]
pub struct WorkerDrive {
    /// Invocations by status (200: the drain returned; 502: the process died or errored).
    pub statuses: std::sync::Mutex<BTreeMap<u16, u64>>,
    /// Invocations started.
    pub invocations: AtomicU64,
    /// The longest invocation, milliseconds.
    pub longest_ms: AtomicU64,
    stop: AtomicBool,
}

impl WorkerDrive {
    /// Stops the drivers after their current invocation.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Invocations by status so far.
    pub fn statuses(&self) -> BTreeMap<u16, u64> {
        self.statuses.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// Invokes every worker environment with the schedule's event, back to back (`pause` between
/// two invocations of one environment), until [`WorkerDrive::stop`]; returns the shared
/// counters and the driver tasks.
pub fn drive_workers(
    fleet: &Arc<Fleet>,
    pause: Duration,
) -> (Arc<WorkerDrive>, Vec<tokio::task::JoinHandle<()>>) {
    let drive = Arc::new(WorkerDrive::default());
    let tasks = fleet
        .environments
        .iter()
        .map(|env| {
            let (env, drive, timeout) = (env.clone(), drive.clone(), fleet.invoke_timeout);
            tokio::spawn(async move {
                while !drive.stop.load(Ordering::SeqCst) {
                    drive.invocations.fetch_add(1, Ordering::Relaxed);
                    let tag = Tag {
                        source: "schedule".into(),
                        event_id: "tick".into(),
                    };
                    let began = Instant::now();
                    let status = env.invoke(scheduled_event(), tag, timeout).await.status();
                    drive
                        .longest_ms
                        .fetch_max(began.elapsed().as_millis() as u64, Ordering::Relaxed);
                    if let Ok(mut statuses) = drive.statuses.lock() {
                        *statuses.entry(status).or_default() += 1;
                    }
                    tokio::time::sleep(pause).await;
                }
            })
        })
        .collect();
    (drive, tasks)
}

/// The live pid of every environment of `fleet`, by index (None: none alive right now).
pub fn pids(fleet: &Fleet) -> Vec<Option<u32>> {
    fleet.environments.iter().map(|e| e.pid()).collect()
}

/// Polls `query` (one `bigint` column, one row) until it returns 0 or `timeout` passes;
/// returns the last value.
///
/// # Errors
/// The query fails.
pub async fn wait_until_zero(
    client: &tokio_postgres::Client,
    query: &str,
    timeout: Duration,
) -> anyhow::Result<i64> {
    let started = Instant::now();
    loop {
        let n: i64 = client.query_one(query, &[]).await?.get(0);
        if n == 0 || started.elapsed() > timeout {
            return Ok(n);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The ledger rows not yet `completed` (for [`wait_until_zero`]).
pub const NOT_COMPLETED: &str = "SELECT count(*) FROM webhook_event WHERE status <> 'completed'";

/// Stops `drive` ([`WorkerDrive::stop`]) and waits for its driver tasks to end.
pub async fn stop_drive(drive: &WorkerDrive, drivers: Vec<tokio::task::JoinHandle<()>>) {
    drive.stop();
    for driver in drivers {
        let _ = driver.await;
    }
}
