//! The paced claim traffic: new events (claim and complete) and duplicates of completed ones
//! (through `shared::ledger::claim` or the BASELINE lookup), each claim timed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use sha2::{Digest, Sha256};
use shared::db::Connection;
use shared::ledger::{self, Claim, Expiry, NewEvent};
use shared::retention::Retention;

use crate::baseline::baseline_duplicate;
use crate::run::{Bench, SOURCES};

/// A live event of the claim traffic: its source, id, body and the body's SHA-256.
#[derive(Clone)]
pub struct LiveEvent {
    source: &'static str,
    id: String,
    body: Vec<u8>,
    digest: [u8; 32],
}

impl LiveEvent {
    /// Event number `n`: source alternating, a 1.0 to 1.8 KB body.
    fn new(n: u64) -> Self {
        let source = SOURCES[(n % 2) as usize];
        let id = format!("evt_live_{n:09}");
        // A realistic body: 1.0 to 1.8 KB of JSON.
        let pad_len = 900 + (n * 7919 % 800) as usize;
        let pad: String = std::iter::repeat_n(format!("{:016x}", n.wrapping_mul(0x9e37_79b9)), 64)
            .collect::<String>()
            .chars()
            .take(pad_len)
            .collect();
        let body = serde_json::to_vec(&serde_json::json!({
            "id": id, "object": "event", "type": "payment_intent.succeeded",
            "data": {"object": {"id": format!("pi_{n}"), "amount": 1000 + n, "currency": "usd",
                "description": pad}}
        }))
        .unwrap_or_default();
        let digest: [u8; 32] = Sha256::digest(&body).into();
        Self {
            source,
            id,
            body,
            digest,
        }
    }

    /// The event as the ledger claims it.
    fn as_new(&self) -> NewEvent<'_> {
        NewEvent {
            source: self.source,
            event_id: &self.id,
            event_type: "payment_intent.succeeded",
            digest: &self.digest,
            identity: &self.digest,
            payload: Some(&self.body),
            replayed: false,
        }
    }
}

/// Latencies of one phase, microseconds.
#[derive(Default)]
pub struct Samples {
    /// New events: claim + `Tx::complete` (the whole inline transaction, handler empty).
    pub new: Vec<u64>,
    /// Duplicates through `shared::ledger::claim` (lookup with `claimed_at, dead_at` and the
    /// age check).
    pub dup_current: Vec<u64>,
    /// Duplicates through the BASELINE lookup.
    pub dup_baseline: Vec<u64>,
    /// Claims that failed.
    pub errors: u64,
    /// Claims answered otherwise than expected (a new event lost, a duplicate not answered).
    pub unexpected: u64,
    pub first_error: Option<String>,
}

impl Samples {
    /// Adds `other`'s samples and counts to these (the first error kept).
    fn merge(&mut self, other: Samples) {
        self.new.extend(other.new);
        self.dup_current.extend(other.dup_current);
        self.dup_baseline.extend(other.dup_baseline);
        self.errors += other.errors;
        self.unexpected += other.unexpected;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// Percentile `q` (0..1) of sorted `v`, milliseconds.
pub fn pct(v: &[u64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1] as f64 / 1000.0
}

impl Bench {
    /// Paced claim traffic on every connection until `deadline`, or until `finished` is set
    /// (the phase's sweep is done). Returns the samples and how long it ran.
    pub async fn traffic(
        &self,
        deadline: Instant,
        finished: Option<Arc<AtomicBool>>,
    ) -> Result<(Samples, Duration)> {
        let started = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let period = Duration::from_secs_f64(self.args.connections as f64 / self.args.rate);
        let mut tasks = Vec::new();
        for task in 0..self.args.connections {
            let conn = self.pool.get().await?;
            let (stop, completed, next_id) =
                (stop.clone(), self.completed.clone(), self.next_id.clone());
            let every = self.args.duplicate_every.max(2);
            tasks.push(tokio::spawn(async move {
                let mut samples = Samples::default();
                // Spread the tasks' ticks over one period.
                tokio::time::sleep(period.mul_f64(task as f64 / 8.0)).await;
                let mut ticks = tokio::time::interval(period);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    ticks.tick().await;
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    n += 1;
                    let duplicate = if n % every == every / 2 {
                        let pool = completed.lock().map_or(None, |events| {
                            (!events.is_empty()).then(|| {
                                let pick = (n.wrapping_mul(2_654_435_761) as usize)
                                    % events.len().min(2_000);
                                events[events.len() - 1 - pick].clone()
                            })
                        });
                        pool
                    } else {
                        None
                    };
                    let outcome = match duplicate {
                        Some(event) => {
                            let baseline = (n / every) & 1 == 0;
                            let started = Instant::now();
                            let answered = if baseline {
                                baseline_duplicate(&conn, &event.as_new()).await
                            } else {
                                current_duplicate(&conn, &event.as_new()).await
                            };
                            let micros = started.elapsed().as_micros() as u64;
                            answered.inspect(|_| {
                                if baseline {
                                    samples.dup_baseline.push(micros);
                                } else {
                                    samples.dup_current.push(micros);
                                }
                            })
                        }
                        None => {
                            let event = LiveEvent::new(next_id.fetch_add(1, Ordering::Relaxed));
                            let started = Instant::now();
                            let won = claim_new(&conn, &event).await;
                            let micros = started.elapsed().as_micros() as u64;
                            won.inspect(|won| {
                                samples.new.push(micros);
                                if *won {
                                    if let Ok(mut events) = completed.lock() {
                                        events.push(event);
                                    }
                                }
                            })
                        }
                    };
                    match outcome {
                        Ok(true) => {}
                        Ok(false) => samples.unexpected += 1,
                        Err(error) => {
                            samples.errors += 1;
                            if samples.first_error.is_none() {
                                samples.first_error = Some(format!("{error:#}"));
                            }
                        }
                    }
                }
                samples
            }));
        }
        loop {
            let now = Instant::now();
            if now >= deadline || finished.as_ref().is_some_and(|f| f.load(Ordering::Relaxed)) {
                break;
            }
            tokio::time::sleep((deadline - now).min(Duration::from_millis(20))).await;
        }
        let ran = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        let mut all = Samples::default();
        for task in tasks {
            all.merge(task.await?);
        }
        all.new.sort_unstable();
        all.dup_current.sort_unstable();
        all.dup_baseline.sort_unstable();
        Ok((all, ran))
    }
}

/// A new event: claim, then complete with a small response. `Ok(true)` when it was won and
/// committed.
async fn claim_new(conn: &Connection, event: &LiveEvent) -> Result<bool> {
    let expiry = Expiry {
        retention: Retention::default(),
        now: SystemTime::now(),
    };
    match ledger::claim(conn, &event.as_new(), &expiry).await? {
        Claim::Won(tx) => {
            tx.complete(
                (event.source, &event.id),
                200,
                &serde_json::json!({"received": true}),
            )
            .await?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// A duplicate through `shared::ledger::claim`: `Ok(true)` when answered with the stored
/// response.
async fn current_duplicate(conn: &Connection, event: &NewEvent<'_>) -> Result<bool> {
    let expiry = Expiry {
        retention: Retention::default(),
        now: SystemTime::now(),
    };
    Ok(matches!(
        ledger::claim(conn, event, &expiry).await?,
        Claim::Completed(_)
    ))
}
