//! Scenario 6, `half_open`: the receivers reach PostgreSQL through [`crate::proxy`], which
//! stops forwarding in both directions without closing a socket (a failover, a dead NAT
//! entry), several times under load, each time longer than the receiver's client deadline.
//! Pass: every delivery answers within the deadline plus a margin (503 with `Retry-After`
//! while the path is dead, never the Lambda timeout), deliveries succeed again after each
//! resume, and every 2xx event has exactly one effect.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use super::timed::{deliver_timed, drive_workers, stop_drive, wait_until_zero, NOT_COMPLETED};
use super::{close, mixed_event, run_tag, Context, Scenario, DEFAULT_SOURCES};
use crate::proxy::Proxy;
use crate::report::ScenarioReport;
use crate::rng::Rng;
use crate::simulator::{secrets_of, totals, SimEvent, Simulator};
use crate::verify::check_effects;

/// Events (scaled): plain-SQL `charge.refunded` and transaction-shaped `invoice.paid`.
pub const EVENTS: usize = 1_000;
/// Pauses of the proxy.
pub const PAUSES: usize = 4;
/// How long each pause lasts: longer than the client deadline, so deliveries must give up.
pub const PAUSE: Duration = Duration::from_secs(8);
/// Running time between two pauses.
pub const BETWEEN: Duration = Duration::from_secs(3);
/// The receivers' statement timeout (the shipped default), milliseconds; the client deadline
/// is this + 1 s (`DatabaseSettings::client_deadline`).
pub const STATEMENT_TIMEOUT_MS: u64 = 5_000;
/// Worker environments (deferred events), reaching PostgreSQL through the same proxy.
pub const WORKERS: usize = 2;
/// The workers' invocation timeout here (the template's is longer).
pub const WORKER_TIMEOUT: Duration = Duration::from_secs(30);
/// What an answer may take beyond the client deadline (the Runtime API hop, scheduling on a
/// loaded 2-core machine).
pub const MARGIN: Duration = Duration::from_millis(1_500);

/// See the module docs.
pub struct HalfOpen;

#[async_trait::async_trait]
impl Scenario for HalfOpen {
    fn name(&self) -> &'static str {
        "half_open"
    }

    fn title(&self) -> &'static str {
        "receivers reach PostgreSQL through a proxy that stops forwarding without closing, 4 x 8 s under load"
    }

    async fn run(&self, ctx: &Context) -> Result<ScenarioReport> {
        let started = Instant::now();
        let seed = ctx.seed ^ 0x06;
        let db = ctx.database(self.name()).await?;
        let upstream: SocketAddr = format!("127.0.0.1:{}", ctx.cluster.port)
            .parse()
            .context("the cluster's address")?;
        let proxy = Arc::new(Proxy::start(upstream).await?);
        let through = db.url.replacen(
            &format!("127.0.0.1:{}", ctx.cluster.port),
            &proxy.local_addr().to_string(),
            1,
        );
        let statement = STATEMENT_TIMEOUT_MS.to_string();
        let mut env = ctx.function_env(
            &db,
            DEFAULT_SOURCES,
            &[
                ("HOOKLEDGER_STATEMENT_TIMEOUT_MS", statement.as_str()),
                ("CHAOS_HANDLER_SLEEP_MS", "20"),
            ],
        );
        for (k, v) in env.iter_mut() {
            if k == "DATABASE_URL" {
                *v = through.clone();
            }
        }
        let deadline = Duration::from_millis(STATEMENT_TIMEOUT_MS + 1_000);
        let mut worker_env = env.clone();
        worker_env.extend(
            [
                ("HOOKLEDGER_LEASE_SECS", "10"),
                ("HOOKLEDGER_HANDLER_TIMEOUT_MS", "3000"),
                ("HOOKLEDGER_WORKER_MARGIN_MS", "2000"),
                ("HOOKLEDGER_BACKOFF_BASE_SECS", "1"),
                ("HOOKLEDGER_BACKOFF_CAP_SECS", "2"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        let fleet = ctx.receiver_fleet(self.name(), ctx.receivers, env).await?;
        let workers = ctx
            .worker_fleet(self.name(), WORKERS, worker_env, WORKER_TIMEOUT)
            .await?;
        let (drive, drivers) = drive_workers(&workers, Duration::from_millis(200));
        let simulator = Simulator::new(fleet.clone(), secrets_of(DEFAULT_SOURCES));
        let created = bench::unix_now();
        let run = run_tag(&mut Rng::new(seed));
        let mut events: Vec<SimEvent> = (0..ctx.scaled(EVENTS))
            .map(|i| mixed_event("half", &run, i, created, i % 10 == 3, i % 5 == 4))
            .collect();
        Rng::new(seed).shuffle(&mut events);

        let t0 = Instant::now();
        // The faults: pause, hold, resume; the windows are kept for the recovery figures.
        let faults = {
            let proxy = proxy.clone();
            tokio::spawn(async move {
                let mut windows = Vec::new();
                tokio::time::sleep(BETWEEN).await;
                for _ in 0..PAUSES {
                    let from = t0.elapsed();
                    proxy.pause();
                    tokio::time::sleep(PAUSE).await;
                    proxy.resume();
                    windows.push((from, t0.elapsed()));
                    tokio::time::sleep(BETWEEN).await;
                }
                windows
            })
        };
        // Paced over the faults' span, so load is there at every pause and resume.
        let span = BETWEEN + (PAUSE + BETWEEN) * PAUSES as u32;
        let pace = span / events.len().max(1) as u32;
        let timed = deliver_timed(
            &simulator,
            &secrets_of(DEFAULT_SOURCES),
            &events,
            16,
            seed,
            t0,
            pace,
        )
        .await;
        let windows = faults.await.unwrap_or_default();

        let client = db.connect().await?;
        let pending = wait_until_zero(&client, NOT_COMPLETED, Duration::from_secs(90)).await?;
        stop_drive(&drive, drivers).await;
        let check = check_effects(&client, &timed.records).await?;
        let t = totals(&timed.records);
        let mut report = ScenarioReport::from_run(self.name(), self.title(), &t, &check);
        report.outbox_received = None;
        report
            .faults
            .insert("proxy_pauses".into(), windows.len() as u64);
        report
            .faults
            .insert("pause_ms".into(), PAUSE.as_millis() as u64);
        report
            .faults
            .insert("client_deadline_ms".into(), deadline.as_millis() as u64);
        let longest = timed.longest_ms(None);
        let longest_503 = timed.longest_ms(Some(503));
        report.faults.insert("longest_answer_ms".into(), longest);
        report.faults.insert("longest_503_ms".into(), longest_503);
        let statuses = timed.statuses();
        let hung =
            statuses.get(&504).copied().unwrap_or(0) + statuses.get(&0).copied().unwrap_or(0);
        report.faults.insert("answers_504_or_hung".into(), hung);
        if hung > 0 {
            report.failures.push(format!(
                "{hung} deliveries hung to the Lambda timeout (504) or the sender's timeout"
            ));
        }
        if longest > (deadline + MARGIN).as_millis() as u64 {
            report.failures.push(format!(
                "an answer took {longest} ms, over the client deadline {} ms + {} ms",
                deadline.as_millis(),
                MARGIN.as_millis()
            ));
        }
        // Recovery: the first 2xx sent after each resume.
        let mut recoveries = Vec::new();
        for (i, (_, resumed)) in windows.iter().enumerate() {
            let first = timed
                .attempts
                .iter()
                .filter(|a| (200..300).contains(&a.status) && a.sent_at >= *resumed)
                .map(|a| (a.sent_at + a.queued + a.took).saturating_sub(*resumed))
                .min();
            match first {
                Some(after) => recoveries.push(after.as_millis() as u64),
                None if i + 1 == windows.len() && t.lost == 0 => {}
                None => report.failures.push(format!(
                    "no 2xx after resume {} of {}",
                    i + 1,
                    windows.len()
                )),
            }
        }
        let worst_recovery = recoveries.iter().copied().max().unwrap_or(0);
        report
            .faults
            .insert("longest_recovery_after_resume_ms".into(), worst_recovery);
        let counters = proxy.counters();
        report.notes.push(format!(
            "bound: every delivery's function time (hand-over to answer, without the wait for an idle environment) is within the client deadline (HOOKLEDGER_DB_CLIENT_DEADLINE_MS, default statement timeout {STATEMENT_TIMEOUT_MS} ms + 1000 = {} ms) + {} ms margin, well inside the 10 s Lambda timeout; measured: longest answer {longest} ms, longest 503 {longest_503} ms; first 2xx after each resume within {:?} ms; attempts by status {:?}",
            deadline.as_millis(),
            MARGIN.as_millis(),
            recoveries,
            statuses
        ));
        report.notes.push(format!(
            "proxy: {} connections accepted over the run ({} pauses of {} ms, {} ms apart); a connection abandoned at the deadline is closed, so each pause costs the pools new connections",
            counters.accepted,
            windows.len(),
            PAUSE.as_millis(),
            BETWEEN.as_millis()
        ));
        if pending > 0 {
            report.failures.push(format!(
                "{pending} ledger rows not completed after the drain"
            ));
        }
        let worker_longest = drive.longest_ms.load(std::sync::atomic::Ordering::Relaxed);
        report
            .faults
            .insert("longest_worker_invocation_ms".into(), worker_longest);
        report.notes.push(format!(
            "workers ({WORKERS}, through the same proxy, deferred events): {} invocations by status {:?}, the longest {worker_longest} ms (invocation timeout {} ms)",
            drive.invocations.load(std::sync::atomic::Ordering::Relaxed),
            drive.statuses(),
            WORKER_TIMEOUT.as_millis()
        ));
        Ok(close(report, &[&fleet, &workers], seed, ctx.receivers, started).await)
    }
}
