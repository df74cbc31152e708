//! Deferred processing (docs/architecture.md, "The worker"): the ledger is the queue, Lambda is the compute.
//!
//! [`Worker::drain`] leases due rows in bounded batches ([`ledger::lease_due`]); the lease, not
//! an open transaction, is the ownership. For each leased event it records the start of an
//! attempt ([`ledger::start`], so `attempts` counts only attempts that really began), runs the
//! handler with a transaction that begins at the handler's first statement (its external work
//! before that runs outside any transaction), and completes in one short transaction fenced by
//! the lease token: a completion whose lease was lost (expired and re-leased) is refused and
//! counted (`lease_lost`), never applied. On a retryable error it records `failed` with
//! `last_error` and the next attempt time from [`Backoff::delay`](crate::config::Backoff::delay), or `dead` once the source's
//! `max_attempts` are used; a fatal error is `dead` at once. It stops when nothing is due or
//! when the invocation's remaining time falls under the margin; leased rows it cannot start in
//! time are released unstarted. The clock and the remaining time are parameters, so tests never
//! sleep.
//!
//! After every batch of events the drain runs one outbox step ([`Worker::outbox_step`], in
//! [`drain`]): it leases due outbox messages, dispatches them concurrently through
//! the [`Dispatcher`] built once per worker, and records each outcome fenced by its lease token.
//! A handler's messages are due at the worker's clock, so the drain that applies an event also
//! dispatches what it queued. [`Summary::outbox`] counts what the outbox step did.
//!
//! Every database step of the worker runs under the client deadline
//! (`HOOKLEDGER_DB_CLIENT_DEADLINE_MS`, the receiver's bound, [`crate::db::deadline`]): taking
//! a connection, leasing a batch, starting an attempt, recording a failure or dead letter,
//! giving a lease back, and the outbox step's lease and record. A step past it has its
//! connection closed (never returned to the pool) and its outcome is unknown, so nothing is
//! marked: the row keeps its lease, which expires and brings it back (nothing lost; every
//! transition is fenced by the lease token, so nothing doubles). It counts in
//! [`Summary::deadlines`] (events left that way in [`Summary::abandoned`]), the drain logs
//! `database step abandoned at the client deadline`, gives back what it leased and did not
//! start (until one give-back passes the deadline too: the rest are abandoned), and stops
//! after the current round (skipping its outbox step when the events' part hit the deadline;
//! log line `drain stopped: the database did not answer within the client deadline`); the
//! next invocation starts on fresh connections. The handler's run (its
//! transaction: business statements through its `Tx` and the completion) is bounded by the
//! handler timeout instead, as a handler may legitimately work longer than the deadline; past
//! it the connection is cancelled (the cancel request itself within the deadline) and closed,
//! and the failed attempt is recorded on a fresh connection within the deadline. So a
//! connection that goes dead during a handler's run costs that handler's timeout plus at most
//! two deadlines (cancel, record), and the attempt counts (it started): `failed` with its
//! backoff, or, when the record cannot get through either, left to the lease.
//!
//! The worker's transactions take the larger of the handler timeout and the configured
//! `idle_in_transaction_session_timeout` as their idle limit (the handler timeout already bounds them), so no
//! session limit shorter than a handler's own deadline cuts its transaction.
//!
//! Retry schedule ([`backoff`], defaults `base_secs = 30`, `cap_secs = 3600`): after failed
//! attempt `n` the event waits between half and all of `min(cap, base * 2^(n-1))`, the exact
//! point chosen by a hash of the event's key and `n` (so a burst of failures spreads out, and a
//! given event's schedule is reproducible): 15-30 s, 30-60 s, 1-2 min, 2-4 min, 4-8 min,
//! 8-16 min, 16-32 min; with the default `max_attempts = 8` the eighth failure is `dead`.

pub mod drain;

pub use drain::OutboxSummary;

use std::time::{Duration, SystemTime};

use futures_util::FutureExt;
use serde::Serialize;

use crate::config::{Settings, Sources, WorkerSettings};
use crate::db::{Pool, Session};
use crate::ledger::{self, Failure, Leased, LedgerError};
use crate::outbox::Dispatcher;
use crate::privacy::keys::Column;
use crate::{
    apply::{apply, ApplyError},
    effect::Event,
    handler::Registry,
};
use hookledger_verify::extract::document_of;

/// What one drain did; the worker function returns it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Rows leased.
    pub leased: u64,
    /// Events completed.
    pub completed: u64,
    /// Attempts that failed and will be retried.
    pub failed: u64,
    /// Events dead-lettered.
    pub dead: u64,
    /// Leased rows given back unprocessed because time ran out.
    pub released: u64,
    /// Leases lost to another worker (expired and taken over) before completing; a completion
    /// refused for that reason is also counted as the `lease_lost` metric.
    pub lost: u64,
    /// Leased events left to their lease's expiry because a database step on them outlived the
    /// client deadline (`HOOKLEDGER_DB_CLIENT_DEADLINE_MS`): not marked anything, they come back
    /// when the lease (`HOOKLEDGER_LEASE_SECS`) expires.
    pub abandoned: u64,
    /// Database steps of the events' part (lease, start, record, give back) abandoned at the
    /// client deadline, their connections closed; the drain stops after a round with one.
    pub deadlines: u64,
    /// Whether the drain stopped because the remaining time fell under the margin.
    pub out_of_time: bool,
    /// What the drain did with the outbox (see [[`drain`]]).
    pub outbox: OutboxSummary,
}

impl Summary {
    fn add(&mut self, other: Summary) {
        self.leased += other.leased;
        self.completed += other.completed;
        self.failed += other.failed;
        self.dead += other.dead;
        self.released += other.released;
        self.lost += other.lost;
        self.abandoned += other.abandoned;
        self.deadlines += other.deadlines;
        self.out_of_time |= other.out_of_time;
        self.outbox.add(other.outbox);
    }
}

/// Why a drain stopped early. Retryable: the next invocation (doorbell or schedule) continues.
#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    /// No database connection.
    #[error("no database connection")]
    Pool(#[from] crate::db::NoConnection),
    /// A ledger statement failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The SQL handlers' statements do not prepare against the schema (fatal until
    /// redeployed), or could not be checked yet (the database is unavailable).
    #[error("SQL handlers not ready")]
    NotReady(#[from] crate::handler::NotReady),
}

/// Everything the worker needs, built once per execution environment.
#[derive(Clone)]
pub struct Worker {
    /// The connection pool.
    pub pool: Pool,
    /// Handlers by `(source, event_type)`.
    pub handlers: Registry,
    /// The configured sources (for `max_attempts`).
    pub sources: Sources,
    /// Lease, batch, margin, timeout, backoff.
    pub settings: WorkerSettings,
    /// TLS for cancel requests (a timed-out handler's statement is cancelled server-side);
    /// `None` sends them without TLS.
    pub tls: Option<postgres_native_tls::MakeTlsConnector>,
    /// Sends outbox messages to their targets (clients built once).
    pub dispatcher: Dispatcher,
    /// The client deadline on each database step
    /// (`DatabaseSettings::client_deadline`, `HOOKLEDGER_DB_CLIENT_DEADLINE_MS`).
    pub deadline: Duration,
    /// Payload encryption's keys (`Settings::payload_keys`): opens a sealed payload, and
    /// seals the completed copy of a source with `encrypt_payload`.
    pub payload_keys: Option<std::sync::Arc<crate::privacy::keys::PayloadKeys>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("handlers", &self.handlers)
            .field("sources", &self.sources)
            .field("settings", &self.settings)
            .field("tls", &self.tls.is_some())
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker over `pool` (its transactions get the handler timeout as their idle limit),
    /// running `handlers`.
    pub fn new(settings: &Settings, pool: Pool, handlers: Registry) -> Self {
        let database = &settings.database;
        let mut session = Session::with_limits(
            database.statement_timeout_ms,
            database.lock_timeout_ms,
            database
                .idle_in_transaction_timeout_ms
                .max(settings.worker.handler_timeout_ms),
            database.statement_cache,
        );
        if !database.transaction_limits {
            session = session.without_limits();
        }
        Self {
            pool: pool.with_session(session),
            handlers,
            sources: settings.sources.clone(),
            settings: settings.worker.clone(),
            tls: crate::db::tls_connector(database).ok(),
            dispatcher: Dispatcher::new(),
            deadline: database.client_deadline(),
            payload_keys: settings.payload_keys.clone(),
        }
    }

    /// The leased event's payload opened when it is sealed (`None`: stored in the clear, use
    /// it as it is).
    ///
    /// # Errors
    /// The failure to record, and whether it is fatal: a value sealed for another row or
    /// altered (fatal), no keys configured (fatal until configured: re-drive then), KMS
    /// unavailable (retried).
    async fn open_payload(
        &self,
        leased: &Leased,
        stored: &[u8],
    ) -> Result<Option<Vec<u8>>, (String, bool)> {
        if !crate::privacy::seal::is_sealed(stored) {
            return Ok(None);
        }
        let Some(keys) = &self.payload_keys else {
            return Err((
                "the payload is sealed and no master key is configured".to_owned(),
                true,
            ));
        };
        match keys
            .open(&leased.source, &leased.event_id, Column::Payload, stored)
            .await
        {
            Ok(opened) => Ok(Some(opened)),
            Err(error) => Err((
                format!("cannot open the sealed payload: {error}"),
                !error.is_retryable(),
            )),
        }
    }

    /// Drains due events and outbox messages: lease a batch of events and process it, then
    /// lease a batch of messages and dispatch it ([`Worker::outbox_step`], so the messages the
    /// batch's handlers committed go out in the same drain), repeat, until neither is due or
    /// `remaining()` (the invocation's time left) no longer covers a handler's full timeout
    /// plus the margin (events) or a target's timeout plus the margin (messages). `now()` is
    /// the clock.
    ///
    /// # Errors
    /// [`WorkError`] when the database fails outside a single event's processing; what was done
    /// before stays done, and leased rows not yet started are given back.
    pub async fn drain(
        &self,
        now: impl Fn() -> SystemTime,
        remaining: impl Fn() -> Duration,
    ) -> Result<Summary, WorkError> {
        let mut summary = Summary::default();
        // Events and outbox messages run out of time separately: a message whose target's
        // timeout no longer fits stops the outbox part of this drain, not the events (whose
        // handlers may need far less time), and the other way round.
        let (mut events_out_of_time, mut outbox_out_of_time) = (false, false);
        loop {
            let mut events = 0;
            if !events_out_of_time {
                if remaining() < self.needed() {
                    events_out_of_time = true;
                } else {
                    let step = self.step(&now, &remaining).await?;
                    events = step.leased;
                    events_out_of_time = step.out_of_time;
                    summary.add(step);
                }
            }
            let mut messages = 0;
            // After a step past the deadline the database may be unreachable: the drain stops
            // without trying the outbox too (each try would cost another deadline).
            if !outbox_out_of_time && summary.deadlines == 0 {
                let (outbox, out_of_time) = self.outbox_step(&now, &remaining).await?;
                messages = outbox.leased;
                outbox_out_of_time = out_of_time;
                summary.outbox.add(outbox);
            }
            summary.out_of_time = events_out_of_time || outbox_out_of_time;
            if summary.deadlines > 0 || summary.outbox.deadlines > 0 {
                tracing::warn!(
                    deadlines = summary.deadlines + summary.outbox.deadlines,
                    abandoned = summary.abandoned,
                    outbox_abandoned = summary.outbox.abandoned,
                    deadline_ms = self.deadline.as_millis() as u64,
                    "drain stopped: the database did not answer within the client deadline"
                );
                break;
            }
            if (events == 0 && messages == 0) || (events_out_of_time && outbox_out_of_time) {
                break;
            }
        }
        Ok(summary)
    }

    /// The time an event needs before it is started: its handler's full timeout plus the
    /// margin. An event is never started with a budget cut short by the invocation's end.
    fn needed(&self) -> Duration {
        Duration::from_millis(self.settings.margin_ms + self.settings.handler_timeout_ms)
    }

    /// One batch: lease and process. `leased == 0` in the result means nothing was due.
    ///
    /// # Errors
    /// As [`Worker::drain`].
    pub async fn step(
        &self,
        now: &impl Fn() -> SystemTime,
        remaining: &impl Fn() -> Duration,
    ) -> Result<Summary, WorkError> {
        let at = now();
        let leased = self
            .bounded("lease events", async |conn| {
                Ok(ledger::lease_due(
                    conn,
                    at,
                    at + Duration::from_secs(self.settings.lease_secs),
                    self.settings.batch,
                )
                .await?)
            })
            .await;
        let Some(batch) = leased? else {
            // A lease that did commit is unknown to us: its rows come back when it expires.
            return Ok(Summary {
                deadlines: 1,
                ..Summary::default()
            });
        };
        let mut summary = Summary {
            leased: batch.len() as u64,
            ..Summary::default()
        };
        let mut pending = batch.into_iter();
        while let Some(leased) = pending.next() {
            if remaining() < self.needed() {
                summary.out_of_time = true;
                if !self
                    .give_back(&leased, now(), RELEASED_FOR_TIME, &mut summary)
                    .await?
                {
                    self.abandon_rest(pending, &mut summary);
                    break;
                }
                continue;
            }
            match self.process(&leased, now()).await {
                Ok(Processed::Completed) => summary.completed += 1,
                Ok(Processed::Failed) => summary.failed += 1,
                Ok(Processed::Dead) => summary.dead += 1,
                Ok(Processed::Lost) => summary.lost += 1,
                Ok(Processed::Released) => summary.released += 1,
                Ok(Processed::Abandoned) => {
                    summary.abandoned += 1;
                    summary.deadlines += 1;
                    // The database (not only that connection) may be unreachable: give the
                    // rest back on fresh connections, until one of those passes the deadline.
                    for rest in pending.by_ref() {
                        if !self
                            .give_back(&rest, now(), RELEASED_AFTER_DEADLINE, &mut summary)
                            .await
                            .unwrap_or(false)
                        {
                            break;
                        }
                    }
                    self.abandon_rest(pending, &mut summary);
                    break;
                }
                Err(error) => {
                    // Give the rest back so they are not charged an attempt for our fault.
                    for rest in pending.by_ref() {
                        if !self
                            .give_back(&rest, now(), RELEASED_ON_ERROR, &mut summary)
                            .await
                            .unwrap_or(true)
                        {
                            break;
                        }
                    }
                    self.abandon_rest(pending, &mut summary);
                    return Err(error);
                }
            }
        }
        Ok(summary)
    }

    /// Gives `leased` back unstarted, due at `due_at`. `Ok(false)`: the release outlived the
    /// client deadline (counted, the event left to its lease's expiry).
    async fn give_back(
        &self,
        leased: &Leased,
        due_at: SystemTime,
        reason: &str,
        summary: &mut Summary,
    ) -> Result<bool, WorkError> {
        let released = self
            .bounded("release a lease", async |conn| {
                Ok(ledger::release(conn, leased, due_at, reason).await?)
            })
            .await?;
        match released {
            Some(true) => summary.released += 1,
            Some(false) => summary.lost += 1,
            None => {
                summary.abandoned += 1;
                summary.deadlines += 1;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Leaves the rest of a batch to its leases' expiry (the database stopped answering):
    /// counted in [`Summary::abandoned`].
    fn abandon_rest(&self, rest: impl Iterator<Item = Leased>, summary: &mut Summary) {
        let left = rest.count() as u64;
        if left > 0 {
            tracing::warn!(
                events = left,
                "leased events left to their lease's expiry: the database did not answer"
            );
            summary.abandoned += left;
        }
    }

    /// Runs one database step (`what`, for the log) on a connection from the pool within the
    /// client deadline ([`crate::db::deadline::within`]). `Ok(None)`: the deadline passed, the
    /// connection was closed and the outcome is unknown (logged here).
    ///
    /// # Errors
    /// The step's own [`WorkError`] (no connection, a failed statement).
    pub(crate) async fn bounded<T>(
        &self,
        what: &'static str,
        work: impl AsyncFnOnce(&crate::db::Connection) -> Result<T, WorkError>,
    ) -> Result<Option<T>, WorkError> {
        match crate::db::deadline::within(self.deadline, self.connection(), work).await {
            Ok(done) => done.map(Some),
            Err(exceeded) => {
                self.log_deadline(what, &exceeded);
                Ok(None)
            }
        }
    }

    fn log_deadline(&self, what: &'static str, exceeded: &crate::db::deadline::DeadlineExceeded) {
        tracing::warn!(
            step = what,
            deadline_ms = exceeded.deadline.as_millis() as u64,
            "database step abandoned at the client deadline; its connection is closed"
        );
    }

    /// Applies one leased event; records the failure when it fails.
    async fn process(&self, leased: &Leased, now: SystemTime) -> Result<Processed, WorkError> {
        let Some(source) = self.sources.get(&leased.source) else {
            // Most likely a source added after this warm worker read its configuration: not
            // ours to judge. Back in a minute, attempt not counted; a cold worker will know it.
            tracing::warn!(
                source = leased.source.as_str(),
                event_id = leased.event_id.as_str(),
                "deferred event of a source this worker does not know: released"
            );
            let released = self
                .bounded("release a lease", async |conn| {
                    Ok(
                        ledger::release(conn, leased, now + UNKNOWN_SOURCE_DELAY, UNKNOWN_SOURCE)
                            .await?,
                    )
                })
                .await?;
            return Ok(match released {
                Some(true) => Processed::Released,
                Some(false) => Processed::Lost,
                None => Processed::Abandoned,
            });
        };
        if leased.attempts as u32 >= source.max_attempts {
            // The last attempt started and never recorded its outcome (its worker died); its
            // lease expired and came back here.
            return self
                .record_failure(
                    leased,
                    leased.attempts,
                    "the last attempt never finished",
                    now,
                    true,
                )
                .await;
        }
        let Some(stored) = leased.payload.as_deref() else {
            return self
                .record_failure(leased, leased.attempts, "no payload stored", now, true)
                .await;
        };
        let opened = match self.open_payload(leased, stored).await {
            Ok(opened) => opened,
            Err((error, fatal)) => {
                return self
                    .record_failure(leased, leased.attempts, &error, now, fatal)
                    .await
            }
        };
        let payload: &[u8] = opened.as_deref().unwrap_or(stored);
        let document = match document_of(payload) {
            Ok(document) => document,
            Err(error) => {
                return self
                    .record_failure(
                        leased,
                        leased.attempts,
                        &format!("unreadable payload: {error}"),
                        now,
                        true,
                    )
                    .await
            }
        };
        let event = Event {
            source: &leased.source,
            event_id: &leased.event_id,
            event_type: &leased.event_type,
            body: payload,
            document: &document,
        };
        // Count the attempt before the handler runs, so one that kills its worker still counts.
        // The connection, then the start, within the client deadline; the handler's run on the
        // same connection has the handler timeout.
        let connected = crate::db::deadline::bound(self.deadline, self.connection()).await;
        let started = match connected {
            Ok(conn) => {
                crate::db::deadline::on(self.deadline, conn?, async |conn| {
                    ledger::start(conn, leased).await
                })
                .await
            }
            Err(exceeded) => Err(exceeded),
        };
        let (attempt, conn) = match started {
            Ok((started, conn)) => match started? {
                Some(attempt) => (attempt, conn),
                None => return Ok(Processed::Lost),
            },
            Err(exceeded) => {
                self.log_deadline("start an attempt", &exceeded);
                return Ok(Processed::Abandoned);
            }
        };
        let timeout = Duration::from_millis(self.settings.handler_timeout_ms);
        // Messages the handler queues are due at this worker's clock, so this drain's outbox
        // step dispatches them.
        let mut tx = leased.tx(&conn).messages_due_at(now);
        if let Some(redaction) = &source.redaction {
            // The completed event keeps the redacted copy (sealed when the source encrypts);
            // unredactable: digests only.
            let copy = match redaction.apply(payload) {
                Ok(copy) => Some(copy.into_owned()),
                Err(why) => {
                    tracing::warn!(
                        source = leased.source.as_str(),
                        event_id = leased.event_id.as_str(),
                        reason = %why,
                        "the payload's fields cannot be redacted; the completed event keeps its digests only"
                    );
                    None
                }
            };
            let copy = match (copy, source.encrypt_payload, &self.payload_keys) {
                (Some(copy), true, Some(keys)) => {
                    match keys
                        .seal(&leased.source, &leased.event_id, Column::Payload, &copy)
                        .await
                    {
                        Ok(sealed) => Some(sealed),
                        Err(error) => {
                            // The attempt ends here, retried: never stored in the clear.
                            drop(tx);
                            return self
                                .record_failure(
                                    leased,
                                    attempt,
                                    &format!("cannot seal the completed payload: {error}"),
                                    now,
                                    !error.is_retryable() || attempt as u32 >= source.max_attempts,
                                )
                                .await;
                        }
                    }
                }
                (copy, _, _) => copy,
            };
            tx = tx.completed_payload(copy);
        }
        let sealing = match source.encrypt_payload {
            true => self.payload_keys.as_deref(),
            false => None,
        };
        let run = apply(&self.handlers, source, tx, &event, sealing);
        // A panicking handler fails its own attempt, not the whole drain (and so not the
        // attempts of the other events in the batch).
        let attempt_outcome =
            match tokio::time::timeout(timeout, std::panic::AssertUnwindSafe(run).catch_unwind())
                .await
            {
                Ok(Ok(Ok(_))) => Attempt::Completed,
                Ok(Ok(Err(ApplyError::Lost))) => Attempt::Lost,
                Ok(Ok(Err(error))) => Attempt::Failed(error),
                Ok(Err(_panic)) => Attempt::Panicked,
                Err(_elapsed) => Attempt::TimedOut,
            };
        let (error, fatal) = match attempt_outcome {
            Attempt::Completed => return Ok(Processed::Completed),
            Attempt::Lost => {
                tracing::warn!(
                    source = leased.source.as_str(),
                    event_id = leased.event_id.as_str(),
                    lease_token = leased.lease_token,
                    metric = "lease_lost",
                    "completion refused: the lease expired and another worker took the event over"
                );
                crate::telemetry::count(crate::telemetry::MetricName::LeaseLost, &leased.source, 1);
                return Ok(Processed::Lost);
            }
            Attempt::Failed(error) => {
                // Free the connection for recording the failure (a pool may have only one).
                drop(conn);
                let fatal = matches!(error, ApplyError::Fatal(_));
                (error.chain(), fatal)
            }
            Attempt::Panicked => {
                // The transaction's guard rolled back while unwinding; the connection may be
                // mid-statement: never reuse it.
                conn.discard();
                ("handler panicked".to_owned(), false)
            }
            Attempt::TimedOut => {
                // The handler may still run a statement (and hold row locks) on this
                // connection: cancel it server-side, then never reuse the connection.
                // The cancel request opens its own connection: within the deadline too.
                if let Some(tls) = &self.tls {
                    let token = conn.cancel_token();
                    let cancel = token.cancel_query(tls.clone());
                    if let Err(exceeded) = crate::db::deadline::bound(self.deadline, cancel).await {
                        self.log_deadline("cancel a timed-out handler", &exceeded);
                    }
                }
                conn.discard();
                (
                    format!("handler timed out after {} ms", timeout.as_millis()),
                    false,
                )
            }
        };
        let dead = fatal || attempt as u32 >= source.max_attempts;
        self.record_failure(leased, attempt, &error, now, dead)
            .await
    }

    /// Records failed attempt number `attempt` of `leased`. Its own failure (the database) is
    /// logged and reported as a lost lease rather than failing the drain: the lease expires and
    /// the event comes back.
    async fn record_failure(
        &self,
        leased: &Leased,
        attempt: i32,
        error: &str,
        now: SystemTime,
        dead: bool,
    ) -> Result<Processed, WorkError> {
        let failure = if dead {
            Failure::Dead
        } else {
            let key = format!("{}/{}", leased.source, leased.event_id);
            Failure::RetryAt(now + self.settings.backoff.delay(attempt as u32, &key))
        };
        let recorded = self
            .bounded("record a failed attempt", async |conn| {
                Ok(ledger::fail(conn, leased, error, &failure).await?)
            })
            .await;
        let recorded = match recorded {
            Ok(Some(recorded)) => recorded,
            Ok(None) => {
                tracing::warn!(
                    source = leased.source.as_str(),
                    event_id = leased.event_id.as_str(),
                    attempts = attempt,
                    dead,
                    error,
                    "deferred event failed; recording it outlived the client deadline, the \
                     lease will expire and retry it"
                );
                return Ok(Processed::Abandoned);
            }
            Err(record_error) => {
                tracing::error!(
                    source = leased.source.as_str(),
                    event_id = leased.event_id.as_str(),
                    error = %crate::error_chain::error_chain(&record_error),
                    "could not record a failed attempt; the lease will expire and retry it"
                );
                false
            }
        };
        tracing::warn!(
            source = leased.source.as_str(),
            event_id = leased.event_id.as_str(),
            attempts = attempt,
            dead,
            recorded,
            error,
            "deferred event failed"
        );
        Ok(match (recorded, dead) {
            (false, _) => Processed::Lost,
            (true, true) => Processed::Dead,
            (true, false) => Processed::Failed,
        })
    }

    /// A connection, once this process's SQL handlers are known to prepare against the schema
    /// ([`Registry::ready`]; checked on the first connection, then free).
    pub(crate) async fn connection(&self) -> Result<crate::db::Connection, WorkError> {
        let conn = self
            .pool
            .get()
            .await
            .map_err(|e| WorkError::Pool(e.into()))?;
        self.handlers.ready(&conn).await?;
        Ok(conn)
    }
}

/// How one run of a handler ended.
enum Attempt {
    /// Applied and completed under the lease.
    Completed,
    /// The completion was refused: the lease had been taken over.
    Lost,
    /// The handler or a ledger statement failed.
    Failed(ApplyError),
    /// The handler panicked.
    Panicked,
    /// The handler ran past its timeout.
    TimedOut,
}

enum Processed {
    Completed,
    Failed,
    Dead,
    Lost,
    Released,
    /// A database step outlived the client deadline: nothing recorded, left to the lease.
    Abandoned,
}

/// `last_error` of an event given back because the invocation ran out of time.
const RELEASED_FOR_TIME: &str = "released unprocessed: the worker ran out of invocation time";
/// `last_error` of an event given back because the drain failed on another event.
const RELEASED_ON_ERROR: &str = "released unprocessed: the drain stopped on a database error";
/// `last_error` of an event given back because a step on another event outlived the client
/// deadline.
const RELEASED_AFTER_DEADLINE: &str =
    "released unprocessed: the drain stopped, the database did not answer within the client deadline";
/// `last_error` of an event of a source the worker does not know (yet).
const UNKNOWN_SOURCE: &str = "released unprocessed: source not in this worker's configuration";
/// When such an event is due again.
const UNKNOWN_SOURCE_DELAY: Duration = Duration::from_secs(60);
