//! Scenario 5, `frozen`: an execution environment frozen (SIGSTOP) while it holds an open
//! claim transaction. Per round: an `invoice.paid` (transaction shape, handler sleep) goes to
//! environment A; once `pg_stat_activity` shows A's session `idle in transaction`, A is
//! frozen; a duplicate goes to environment B and must answer 409 with `Retry-After` (or 503)
//! within the lock timeout plus a margin, never hang; the session limit
//! (`idle_in_transaction_session_timeout`, small for the run) ends A's session and releases
//! the claim; B's retry then succeeds with exactly one effect; A is thawed (SIGCONT) and its
//! late answer must double nothing (its commit fails: a 5xx).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::timed::invoke_on;
use super::{close, invoice_paid, run_tag, Context, Scenario, DEFAULT_SOURCES};
use crate::report::ScenarioReport;
use crate::rng::Rng;
use crate::simulator::{secrets_of, totals, EventRecord};
use crate::verify::check_effects;

/// Rounds (each its own event).
pub const ROUNDS: usize = 5;
/// The run's limits, milliseconds: statement, lock, idle in transaction; the handler's sleep.
pub const STATEMENT_MS: u64 = 2_000;
/// See [`STATEMENT_MS`].
pub const LOCK_MS: u64 = 1_000;
/// See [`STATEMENT_MS`].
pub const IDLE_MS: u64 = 3_000;
/// See [`STATEMENT_MS`].
pub const HANDLER_SLEEP_MS: u64 = 1_500;
/// What the duplicate's answer may take beyond the lock timeout.
pub const MARGIN: Duration = Duration::from_millis(1_000);

/// See the module docs.
pub struct Frozen;

/// Backends of `application_name` hookledger that are idle in a transaction.
async fn idle_in_transaction(client: &tokio_postgres::Client, db: &str) -> Result<Vec<i32>> {
    let rows = client
        .query(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 \
             AND application_name = 'hookledger' AND state = 'idle in transaction'",
            &[&db],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

async fn backend_alive(client: &tokio_postgres::Client, pid: i32) -> Result<bool> {
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
            &[&pid],
        )
        .await?
        .get(0);
    Ok(n > 0)
}

#[async_trait::async_trait]
impl Scenario for Frozen {
    fn name(&self) -> &'static str {
        "frozen"
    }

    fn title(&self) -> &'static str {
        "SIGSTOP a receiver holding an open claim; a duplicate elsewhere; the session limit frees the claim; SIGCONT"
    }

    async fn run(&self, ctx: &Context) -> Result<ScenarioReport> {
        let started = Instant::now();
        let seed = ctx.seed ^ 0x05;
        let db = ctx.database(self.name()).await?;
        let (statement, lock, idle, sleep) = (
            STATEMENT_MS.to_string(),
            LOCK_MS.to_string(),
            IDLE_MS.to_string(),
            HANDLER_SLEEP_MS.to_string(),
        );
        let env = ctx.function_env(
            &db,
            DEFAULT_SOURCES,
            &[
                ("HOOKLEDGER_STATEMENT_TIMEOUT_MS", statement.as_str()),
                ("HOOKLEDGER_LOCK_TIMEOUT_MS", lock.as_str()),
                ("HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS", idle.as_str()),
                ("CHAOS_HANDLER_SLEEP_MS", sleep.as_str()),
            ],
        );
        let fleet = ctx.receiver_fleet(self.name(), 2, env).await?;
        let secrets = secrets_of(DEFAULT_SOURCES);
        let secret = secrets.get("stripe").cloned().unwrap_or_default();
        let (a, b) = (fleet.environments[0].clone(), fleet.environments[1].clone());
        let timeout = fleet.invoke_timeout;
        let client = db.connect().await?;
        let run = run_tag(&mut Rng::new(seed));
        let mut records = Vec::new();
        let mut duplicate_ms = Vec::new();
        let mut released_ms = Vec::new();
        let mut duplicate_statuses: BTreeMap<u16, u64> = BTreeMap::new();
        let mut late_statuses: BTreeMap<u16, u64> = BTreeMap::new();
        let mut failures = Vec::new();
        let mut attempts = 0u64;

        for round in 0..ROUNDS {
            let id = format!("evt_frozen_{run}_{round}");
            let event = invoice_paid(
                "stripe",
                &id,
                bench::unix_now(),
                &format!("in_frozen_{round}"),
            );
            let mut record = EventRecord {
                source: event.source.clone(),
                id: id.clone(),
                ..Default::default()
            };
            let first = Instant::now();
            // A starts the claim; its handler sleeps inside the open transaction.
            let held = {
                let (a, event, secret) = (a.clone(), event.clone(), secret.clone());
                tokio::spawn(async move { invoke_on(&a, &event, &secret, timeout).await })
            };
            attempts += 1;
            let wait = Instant::now();
            let pid = loop {
                if let Some(pid) = idle_in_transaction(&client, &db.name).await?.first() {
                    break *pid;
                }
                if wait.elapsed() > Duration::from_millis(HANDLER_SLEEP_MS) {
                    bail!("round {round}: A's claim never showed as idle in transaction");
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            if a.freeze().is_none() {
                bail!("round {round}: no live process to freeze");
            }
            let frozen_at = Instant::now();
            // The duplicate, elsewhere: bounded by the lock timeout, never a hang.
            let (status, took) = invoke_on(&b, &event, &secret, timeout).await;
            attempts += 1;
            *record.statuses.entry(status).or_default() += 1;
            *duplicate_statuses.entry(status).or_default() += 1;
            duplicate_ms.push(took.as_millis() as u64);
            if !(status == 409 || status == 503) {
                failures.push(format!(
                    "round {round}: the duplicate answered {status} (expected 409 or 503)"
                ));
            }
            if took > Duration::from_millis(LOCK_MS) + MARGIN {
                failures.push(format!(
                    "round {round}: the duplicate took {} ms (lock timeout {LOCK_MS} ms)",
                    took.as_millis()
                ));
            }
            // The session limit ends A's session (it is frozen: idle in transaction).
            let limit = Instant::now();
            while backend_alive(&client, pid).await? {
                if limit.elapsed() > Duration::from_millis(IDLE_MS * 3) {
                    failures.push(format!(
                        "round {round}: A's session outlived the idle-in-transaction limit"
                    ));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            released_ms.push(frozen_at.elapsed().as_millis() as u64);
            // The provider retries on B until a 2xx.
            let mut acked = false;
            for _ in 0..20 {
                let (status, _) = invoke_on(&b, &event, &secret, timeout).await;
                attempts += 1;
                *record.statuses.entry(status).or_default() += 1;
                if (200..300).contains(&status) {
                    acked = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            if acked {
                record.acks += 1;
                record.first_ack_after = Some(first.elapsed());
            }
            // A wakes up: its transaction is gone, so its answer must not be a 2xx.
            a.thaw();
            let (late, _) = held.await.unwrap_or((0, Duration::ZERO));
            *late_statuses.entry(late).or_default() += 1;
            *record.statuses.entry(late).or_default() += 1;
            if (200..300).contains(&late) {
                record.acks += 1;
                failures.push(format!(
                    "round {round}: the thawed environment answered {late} for a claim the server ended"
                ));
            }
            record.attempts = record.statuses.values().sum();
            records.push(record);
        }
        // Let A's late work settle before counting effects.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let check = check_effects(&client, &records).await?;
        let mut t = totals(&records);
        t.attempts = attempts;
        let mut report = ScenarioReport::from_run(self.name(), self.title(), &t, &check);
        report.outbox_received = None;
        report.duplicates_sent = ROUNDS as u64;
        report.failures.extend(failures);
        report.faults.insert("freezes".into(), ROUNDS as u64);
        report.faults.insert(
            "longest_duplicate_answer_ms".into(),
            duplicate_ms.iter().copied().max().unwrap_or(0),
        );
        report.faults.insert(
            "longest_freeze_to_release_ms".into(),
            released_ms.iter().copied().max().unwrap_or(0),
        );
        report.notes.push(format!(
            "limits: statement {STATEMENT_MS} ms, lock {LOCK_MS} ms, idle in transaction {IDLE_MS} ms; handler sleep {HANDLER_SLEEP_MS} ms; the duplicate's answers {duplicate_statuses:?} in {duplicate_ms:?} ms; freeze to the server ending A's session {released_ms:?} ms; the thawed environment's late answers {late_statuses:?}"
        ));
        Ok(close(report, &[&fleet], seed, 2, started).await)
    }
}
