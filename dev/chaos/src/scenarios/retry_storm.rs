//! Scenario 1, `retry_storm`: 1,000 `charge.refunded` events (inline source, the plain-SQL
//! one-statement path), each delivered by 64 concurrent senders at once (64,000 attempts at
//! least); invocations queue at the front as at Lambda's concurrency limit; a sender that
//! waits too long counts a timeout and retries. Pass: exactly one `chaos_effects` row per
//! event, every event acknowledged, no panic.

use std::time::Instant;

use anyhow::Result;

use super::{close, outcomes_note, refunded_charge, run_tag, Context, Scenario};
use crate::report::ScenarioReport;
use crate::rng::Rng;
use crate::simulator::{totals, SimEvent};
use crate::verify::check_effects;

/// Events (scaled by `--scale`).
pub const EVENTS: usize = 1_000;
/// Concurrent senders per event.
pub const SENDERS: usize = 64;
/// Events in flight at once (so 16 x 64 = 1,024 concurrent attempts queue at the front).
pub const WINDOW: usize = 16;

/// See the module docs.
pub struct RetryStorm;

#[async_trait::async_trait]
impl Scenario for RetryStorm {
    fn name(&self) -> &'static str {
        "retry_storm"
    }

    fn title(&self) -> &'static str {
        "1,000 events, each delivered by 64 concurrent senders at once"
    }

    async fn run(&self, ctx: &Context) -> Result<ScenarioReport> {
        let started = Instant::now();
        let seed = ctx.seed ^ 0x01;
        let (db, fleet, simulator) = ctx.default_receivers(self.name(), &[]).await?;
        let created = bench::unix_now();
        let run = run_tag(&mut Rng::new(seed));
        let mut events: Vec<SimEvent> = (0..ctx.scaled(EVENTS))
            .map(|i| {
                refunded_charge(
                    crate::handlers::CHARGE_REFUNDED,
                    &format!("evt_storm_{run}_{i:05}"),
                    created,
                    &format!("ch_storm_{i}"),
                    i,
                )
            })
            .collect();
        Rng::new(seed).shuffle(&mut events);
        let records = simulator.run(&events, SENDERS, WINDOW, seed).await;
        let client = db.connect().await?;
        let check = check_effects(&client, &records).await?;
        let t = totals(&records);
        let mut report = ScenarioReport::from_run(self.name(), self.title(), &t, &check);
        report.duplicates_sent = (events.len() * (SENDERS - 1)) as u64;
        report.outbox_received = None;
        report
            .faults
            .insert("concurrent_senders_per_event".into(), SENDERS as u64);
        report.notes.push(format!(
            "{WINDOW} events in flight at once ({} concurrent attempts) over {} receiver environments; function timeout 10 s, sender timeout 15 s, 10 s bound on waiting for an idle environment (then 429)",
            WINDOW * SENDERS,
            ctx.receivers
        ));
        report.notes.push(outcomes_note(&fleet));
        Ok(close(report, &[&fleet], seed, ctx.receivers, started).await)
    }
}
