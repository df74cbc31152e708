//! The paced claim traffic: new events (claim and complete) and duplicates of completed ones
//! (through `shared::ledger::claim` or the BASELINE lookup), each claim timed; the latencies
//! ([`Samples`]) and their percentiles.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::baseline::baseline_duplicate;
use crate::claims::{claim_new, current_duplicate, LiveEvent};
use crate::setup::Bench;

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
