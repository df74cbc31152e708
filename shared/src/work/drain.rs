//! The worker's outbox step: lease due messages, dispatch them concurrently, record what each
//! came to. [`Worker::drain`] runs it after every batch of deferred events, so the
//! messages the worker's own handlers commit are dispatched in the same drain.
//!
//! One step, for a batch of at most `outbox_concurrency` messages (default 16):
//!
//! 1. [`ledger::outbox::lease_due`] (one statement): due `pending` messages and `processing`
//!    ones whose lease expired, `FOR UPDATE SKIP LOCKED`, each lease counting an attempt.
//! 2. Each message is matched to its source's target. A dispatch starts only if the
//!    invocation's remaining time covers the target's timeout ([`Target::timeout`]) plus
//!    the worker's margin; the others are given back unstarted, their attempt undone. A message
//!    whose source or target is no longer configured is a retryable failure with a clear
//!    `last_error` (the configuration may be fixed), dead after `max_attempts` like any other.
//! 3. All dispatches of the batch run at once (so `outbox_concurrency` bounds them;
//!    [`crate::outbox::Dispatcher::dispatch`], each bounded by its target's timeout), then [`ledger::outbox::record`] (one statement) records every outcome fenced by
//!    its lease token: `delivered`; `pending` again at `now + max(backoff(attempt), min(the
//!    target's Retry-After, the backoff cap))`; or `dead` (a fatal answer, or `attempt` reached
//!    the source's `max_attempts`).
//!
//! Two statements and two round trips per batch. A worker that dies between the lease and the
//! record leaves its messages `processing`; once the lease expires the next drain dispatches
//! them again with the same idempotency key (a target that accepted before the crash sees the
//! key twice; that is what the key is for).
//!
//! Both statements run within the client deadline (`HOOKLEDGER_DB_CLIENT_DEADLINE_MS`, see
//! [`crate::work`]): a lease past it leases nothing this step (a lease that did commit comes
//! back when it expires); a record past it leaves the batch's messages `processing` until
//! their lease expires and they are dispatched again with the same idempotency key (counted in
//! [`OutboxSummary::abandoned`]). Either counts in [`OutboxSummary::deadlines`] and stops the
//! drain after its round.
//!
//! Logs one line per dispatch (`outbox dispatch`: source, event_id, n, target, attempt,
//! outcome, status, latency_ms, and error when it failed; never the payload) and one EMF line
//! per source and step with the counts `outbox_delivered`, `outbox_retried`,
//! `outbox_dead_lettered`, `outbox_lost` that are not zero (the auditor's `outbox_dead` is the
//! total of dead messages, a different figure).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use futures_util::future::join_all;
use serde::Serialize;

use super::{WorkError, Worker};
use crate::config::targets::Target;
use crate::config::{SourceConfig, DEFAULT_MAX_ATTEMPTS};
use crate::ledger::outbox::{self as sql, Leased, Outcome};
use crate::outbox::{DispatchError, Dispatched};
use crate::telemetry::{Metric, MetricName};

/// What one drain did with the outbox; part of [`crate::work::Summary`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OutboxSummary {
    /// Messages leased.
    pub leased: u64,
    /// Dispatches started.
    pub dispatched: u64,
    /// Messages the target accepted.
    pub delivered: u64,
    /// Failed attempts to be retried (including messages whose source or target is not
    /// configured).
    pub retried: u64,
    /// Messages dead-lettered (a fatal answer, or `max_attempts` used).
    pub dead: u64,
    /// Leased messages given back undispatched because time ran out.
    pub released: u64,
    /// Outcomes refused because the lease had been taken over (expired) meanwhile.
    pub lost: u64,
    /// Messages whose outcome could not be recorded within the client deadline: `processing`
    /// until their lease expires, then dispatched again with the same idempotency key.
    pub abandoned: u64,
    /// Outbox statements (lease, record) abandoned at the client deadline, their connections
    /// closed.
    pub deadlines: u64,
}

impl OutboxSummary {
    pub(crate) fn add(&mut self, other: OutboxSummary) {
        self.leased += other.leased;
        self.dispatched += other.dispatched;
        self.delivered += other.delivered;
        self.retried += other.retried;
        self.dead += other.dead;
        self.released += other.released;
        self.lost += other.lost;
        self.abandoned += other.abandoned;
        self.deadlines += other.deadlines;
    }
}

/// What the worker decided for one leased message before dispatching.
enum Plan<'w> {
    /// Send it to this target.
    Dispatch(&'w Target, u32),
    /// No source or target for it: a failed attempt without a dispatch.
    Unconfigured(String, u32),
    /// Its attempts were used before this lease (the last one never finished).
    Exhausted,
    /// Not enough invocation time for its target's timeout.
    Release,
}

/// `last_error` of a message whose attempts ran out before this lease.
const EXHAUSTED: &str = "attempts exhausted: the last attempt's worker died before recording it";

/// Slack over a target's own timeout before the worker gives up on a dispatch.
const DISPATCH_GRACE: Duration = Duration::from_secs(1);

impl Worker {
    /// One outbox batch: lease, dispatch, record (see the module docs). `leased == 0` in the
    /// result means nothing was due (or no time was left to lease: `out_of_time`).
    ///
    /// # Errors
    /// [`WorkError`] when the lease or the record fails; messages already dispatched then come
    /// back when their lease expires and are dispatched again with the same key.
    pub async fn outbox_step(
        &self,
        now: &impl Fn() -> SystemTime,
        remaining: &impl Fn() -> Duration,
    ) -> Result<(OutboxSummary, bool), WorkError> {
        let margin = Duration::from_millis(self.settings.margin_ms);
        if remaining() < margin {
            return Ok((OutboxSummary::default(), true));
        }
        let at = now();
        let leased = self
            .bounded("lease outbox messages", async |conn| {
                Ok(sql::lease_due(
                    conn,
                    at,
                    at + Duration::from_secs(self.settings.lease_secs),
                    i64::from(self.settings.outbox_concurrency),
                )
                .await?)
            })
            .await?;
        let Some(batch) = leased else {
            let summary = OutboxSummary {
                deadlines: 1,
                ..OutboxSummary::default()
            };
            return Ok((summary, false));
        };
        let mut summary = OutboxSummary {
            leased: batch.len() as u64,
            ..OutboxSummary::default()
        };
        if batch.is_empty() {
            return Ok((summary, false));
        }
        // Every plan is decided before any dispatch starts, then all run at once: the batch is
        // at most `outbox_concurrency` messages, which is the bound on concurrent dispatches.
        let mut out_of_time = false;
        let mut runs = Vec::with_capacity(batch.len());
        for leased in &batch {
            let plan = self.plan(leased, margin, remaining);
            out_of_time |= matches!(plan, Plan::Release);
            runs.push(self.run(leased, plan, now));
        }
        let ran = join_all(runs).await;
        let outcomes: Vec<(&Leased, Outcome, Option<Duration>)> = batch
            .iter()
            .zip(ran)
            .map(|(leased, (outcome, latency))| (leased, outcome, latency))
            .collect();
        let to_record: Vec<(&Leased, Outcome)> = outcomes
            .iter()
            .map(|(leased, outcome, _)| (*leased, outcome.clone()))
            .collect();
        let recorded = self
            .bounded("record outbox outcomes", async |conn| {
                Ok(sql::record(conn, &to_record).await?)
            })
            .await?;
        let Some(recorded) = recorded else {
            summary.dispatched = outcomes.iter().filter(|(_, _, l)| l.is_some()).count() as u64;
            summary.abandoned = outcomes.len() as u64;
            summary.deadlines = 1;
            return Ok((summary, out_of_time));
        };
        let mut per_source: BTreeMap<&str, [u64; 4]> = BTreeMap::new();
        for ((leased, outcome, latency), recorded) in outcomes.iter().zip(recorded) {
            let counts = per_source
                .entry(leased.message.source.as_str())
                .or_default();
            if latency.is_some() {
                summary.dispatched += 1;
            }
            if !recorded {
                summary.lost += 1;
                counts[3] += 1;
            } else {
                match outcome {
                    Outcome::Delivered { .. } => {
                        summary.delivered += 1;
                        counts[0] += 1;
                    }
                    Outcome::Retry { .. } => {
                        summary.retried += 1;
                        counts[1] += 1;
                    }
                    Outcome::Dead { .. } | Outcome::Abandoned { .. } => {
                        summary.dead += 1;
                        counts[2] += 1;
                    }
                    Outcome::Release { .. } => summary.released += 1,
                }
            }
            log(leased, outcome, *latency, recorded);
        }
        for (source, counts) in per_source {
            let metrics: Vec<Metric> = [
                MetricName::OutboxDelivered,
                MetricName::OutboxRetried,
                MetricName::OutboxDeadLettered,
                MetricName::OutboxLost,
            ]
            .into_iter()
            .zip(counts)
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| Metric::new(name, n))
            .collect();
            crate::telemetry::emit_metrics(source, &metrics);
        }
        Ok((summary, out_of_time))
    }

    /// Decides what to do with `leased` before any dispatch starts.
    fn plan<'w>(
        &'w self,
        leased: &Leased,
        margin: Duration,
        remaining: &impl Fn() -> Duration,
    ) -> Plan<'w> {
        let message = &leased.message;
        let source: Option<&'w SourceConfig> =
            self.sources.get(&message.source).map(|s| s.as_ref());
        let max_attempts = source.map_or(DEFAULT_MAX_ATTEMPTS, |s| s.max_attempts);
        if leased.attempt as u32 > max_attempts {
            return Plan::Exhausted;
        }
        let Some(source) = source else {
            return Plan::Unconfigured(
                format!(
                    "source {:?} is not in this worker's configuration",
                    message.source
                ),
                max_attempts,
            );
        };
        let Some(target) = source.target(&message.target) else {
            return Plan::Unconfigured(
                format!(
                    "target {:?} is not configured for source {:?}",
                    message.target, message.source
                ),
                max_attempts,
            );
        };
        if remaining() < margin + target.timeout() {
            return Plan::Release;
        }
        Plan::Dispatch(target, max_attempts)
    }

    /// Carries out `plan` for `leased`: the outcome to record, and the dispatch's latency when
    /// one ran.
    async fn run(
        &self,
        leased: &Leased,
        plan: Plan<'_>,
        now: &impl Fn() -> SystemTime,
    ) -> (Outcome, Option<Duration>) {
        let (target, max_attempts) = match plan {
            Plan::Dispatch(target, max_attempts) => (target, max_attempts),
            Plan::Release => return (Outcome::Release { at: now() }, None),
            Plan::Exhausted => {
                return (
                    Outcome::Abandoned {
                        error: EXHAUSTED.to_owned(),
                    },
                    None,
                )
            }
            Plan::Unconfigured(reason, max_attempts) => {
                let error = DispatchError::Retryable {
                    reason,
                    status: None,
                    retry_after: None,
                };
                return (self.failed(leased, &error, max_attempts, now()), None);
            }
        };
        let started = std::time::Instant::now();
        let limit = target.timeout() + DISPATCH_GRACE;
        let sent = tokio::time::timeout(
            limit,
            self.dispatcher.dispatch(target, &leased.message, now()),
        )
        .await
        .unwrap_or_else(|_| {
            Err(DispatchError::Retryable {
                reason: format!("dispatch timed out after {} ms", limit.as_millis()),
                status: None,
                retry_after: None,
            })
        });
        let latency = Some(started.elapsed());
        let outcome = match sent {
            Ok(Dispatched { status, .. }) => Outcome::Delivered { status },
            Err(error) => self.failed(leased, &error, max_attempts, now()),
        };
        (outcome, latency)
    }

    /// The outcome of failed attempt `leased.attempt`: dead when fatal or the last allowed,
    /// else retried after the backoff or the target's `Retry-After` (capped), whichever is
    /// longer.
    fn failed(
        &self,
        leased: &Leased,
        error: &DispatchError,
        max_attempts: u32,
        now: SystemTime,
    ) -> Outcome {
        // The status has its own column (last_status); the target's reason already names it.
        let status = error.status();
        let error_text = error.to_string();
        let attempt = u32::try_from(leased.attempt).unwrap_or(0);
        match error {
            DispatchError::Fatal { .. } => Outcome::Dead {
                error: error_text,
                status,
            },
            DispatchError::Retryable { .. } if attempt >= max_attempts => Outcome::Dead {
                error: format!("attempts exhausted ({attempt} of {max_attempts}): {error_text}"),
                status,
            },
            DispatchError::Retryable { retry_after, .. } => {
                let policy = &self.settings.backoff;
                let wait = policy
                    .delay(attempt, &leased.message.idempotency_key())
                    .max(
                        retry_after
                            .unwrap_or_default()
                            .min(Duration::from_secs(policy.cap_secs)),
                    );
                Outcome::Retry {
                    at: now + wait,
                    error: error_text,
                    status,
                }
            }
        }
    }
}

/// One log line per leased message (never the payload).
fn log(leased: &Leased, outcome: &Outcome, latency: Option<Duration>, recorded: bool) {
    let message = &leased.message;
    let latency_ms = latency.map(|l| (l.as_secs_f64() * 1e6).round() / 1e3);
    let (label, status, error) = match outcome {
        Outcome::Delivered { status } => ("delivered", *status, None),
        Outcome::Retry { error, status, .. } => ("retried", *status, Some(error.as_str())),
        Outcome::Dead { error, status } => ("dead", *status, Some(error.as_str())),
        Outcome::Abandoned { error } => ("dead", None, Some(error.as_str())),
        Outcome::Release { .. } => ("released", None, None),
    };
    let label = if recorded { label } else { "lost" };
    if error.is_some() || !recorded {
        tracing::warn!(
            source = message.source.as_str(),
            event_id = message.event_id.as_str(),
            n = message.n,
            target = message.target.as_str(),
            attempt = leased.attempt,
            outcome = label,
            status,
            latency_ms,
            error = error.unwrap_or(""),
            "outbox dispatch"
        );
    } else {
        tracing::info!(
            source = message.source.as_str(),
            event_id = message.event_id.as_str(),
            n = message.n,
            target = message.target.as_str(),
            attempt = leased.attempt,
            outcome = label,
            status,
            latency_ms,
            "outbox dispatch"
        );
    }
}
