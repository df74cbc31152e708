//! Scenario 2, `receiver_killed`: sustained load (3,000 events, 32 in flight: two thirds
//! `charge.refunded`, the one-statement path; one third `invoice.paid`, the transaction shape
//! with a 5 ms handler) over the receivers while a killer SIGKILLs a random environment every 150-350 ms
//! (at least [`MIN_KILLS`]; a busy one when there is one, 0-40 ms into its invocation), each
//! restarting by itself; `CHAOS_REPLY_DELAY_MS=30` holds every
//! reply 30 ms after the function returned (its transaction committed), so kills land
//! between COMMIT and the reply. After each kill the harness looks up the interrupted
//! invocation's event: a `completed` ledger row means the kill came after the commit
//! (`kills_after_commit`). The simulator retries the 502s. Pass: one effect per event, all
//! acknowledged, no panic, at least [`MIN_KILLS`] kills.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{close, outcomes_note, refunded_charge, run_tag, Context, Scenario};
use crate::lambda::Fleet;
use crate::report::ScenarioReport;
use crate::rng::Rng;
use crate::simulator::{totals, SimEvent};
use crate::verify::check_effects;

/// Events (scaled by `--scale`).
pub const EVENTS: usize = 3_000;
/// Events in flight at once.
pub const WINDOW: usize = 32;
/// `CHAOS_HANDLER_SLEEP_MS` for the receivers (the `invoice.paid` third of the events).
pub const HANDLER_SLEEP_MS: &str = "5";
/// The fewest kills for a pass.
pub const MIN_KILLS: u64 = 20;
/// `CHAOS_REPLY_DELAY_MS` for the receivers.
pub const REPLY_DELAY_MS: &str = "30";

/// See the module docs.
pub struct ReceiverKilled;

/// What the killer did.
#[derive(Debug, Default)]
struct Kills {
    total: u64,
    busy: u64,
    after_commit: u64,
}

/// Kills a random environment (a busy one when there is one) every 150-350 ms until `stop`.
async fn killer(
    fleet: Arc<Fleet>,
    db_url: String,
    stop: Arc<AtomicBool>,
    mut rng: Rng,
) -> Result<Kills> {
    let client = crate::cluster::connect(&db_url).await?;
    let mut kills = Kills::default();
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(rng.between(150, 350))).await;
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let busy: Vec<usize> = fleet
            .environments
            .iter()
            .filter(|e| e.pid().is_some() && e.in_flight().is_some())
            .map(|e| e.index)
            .collect();
        let index = if busy.is_empty() {
            rng.below(fleet.environments.len() as u64) as usize
        } else {
            busy[rng.below(busy.len() as u64) as usize]
        };
        let Some(env) = fleet.environments.get(index) else {
            continue;
        };
        // A random moment of the invocation: 0-40 ms after it was handed over (the handling
        // takes a few ms, then the 30 ms reply delay), so some kills land before the commit
        // and some between the commit and the reply.
        if let Some(in_flight) = env.in_flight() {
            // A quarter at once: before the function has even read its event.
            let offset = if rng.below(4) == 0 { 0 } else { rng.below(41) };
            let at = in_flight.started + Duration::from_millis(offset);
            tokio::time::sleep_until(at.into()).await;
        }
        let Some(interrupted) = env.kill() else {
            continue; // between a death and its restart
        };
        kills.total += 1;
        if let Some(in_flight) = interrupted {
            kills.busy += 1;
            let row = client
                .query_opt(
                    "SELECT status::text FROM webhook_event WHERE source = $1 AND event_id = $2",
                    &[&in_flight.tag.source, &in_flight.tag.event_id],
                )
                .await?;
            if row.map(|r| r.get::<_, String>(0)).as_deref() == Some("completed") {
                kills.after_commit += 1;
            }
        }
    }
    Ok(kills)
}

#[async_trait::async_trait]
impl Scenario for ReceiverKilled {
    fn name(&self) -> &'static str {
        "receiver_killed"
    }

    fn title(&self) -> &'static str {
        "receiver processes SIGKILLed at random moments under load (some between COMMIT and the reply), restarted; the simulator retries"
    }

    async fn run(&self, ctx: &Context) -> Result<ScenarioReport> {
        let started = Instant::now();
        let seed = ctx.seed ^ 0x02;
        let (db, fleet, simulator) = ctx
            .default_receivers(
                self.name(),
                &[
                    ("CHAOS_REPLY_DELAY_MS", REPLY_DELAY_MS),
                    ("CHAOS_HANDLER_SLEEP_MS", HANDLER_SLEEP_MS),
                ],
            )
            .await?;
        let mut rng = Rng::new(seed);
        let created = bench::unix_now();
        let run = run_tag(&mut rng);
        let events: Vec<SimEvent> = (0..ctx.scaled(EVENTS))
            .map(|i| {
                // Every third one takes the transaction shape (a SELECT, a 5 ms sleep, the
                // insert, the completion: several round trips), so kills also land inside an
                // open claim transaction.
                let event_type = if i % 3 == 2 {
                    crate::handlers::INVOICE_PAID
                } else {
                    crate::handlers::CHARGE_REFUNDED
                };
                refunded_charge(
                    event_type,
                    &format!("evt_kill_{run}_{i:05}"),
                    created,
                    &format!("ch_kill_{i}"),
                    i,
                )
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let killing = tokio::spawn(killer(
            fleet.clone(),
            db.url.clone(),
            stop.clone(),
            rng.fork(),
        ));
        let records = simulator.run(&events, 1, WINDOW, seed).await;
        stop.store(true, Ordering::SeqCst);
        let kills = killing.await??;
        // Let the last killed environments come back before reading their logs.
        for _ in 0..200 {
            if fleet.environments.iter().all(|e| e.pid().is_some()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let client = db.connect().await?;
        let check = check_effects(&client, &records).await?;
        let t = totals(&records);
        let mut report = ScenarioReport::from_run(self.name(), self.title(), &t, &check);
        report.duplicates_sent = 0;
        report.faults.insert("kills".into(), kills.total);
        report
            .faults
            .insert("kills_mid_invocation".into(), kills.busy);
        report
            .faults
            .insert("kills_after_commit".into(), kills.after_commit);
        report.faults.insert(
            "kills_before_commit".into(),
            kills.busy.saturating_sub(kills.after_commit),
        );
        report.notes.push(format!(
            "one sender per event, {WINDOW} events in flight over {} receiver environments; a kill every 150-350 ms (a busy environment when there is one); CHAOS_REPLY_DELAY_MS={REPLY_DELAY_MS}, CHAOS_HANDLER_SLEEP_MS={HANDLER_SLEEP_MS}; kills_after_commit = the interrupted invocation's event already had a completed ledger row right after the kill",
            ctx.receivers
        ));
        if kills.total < MIN_KILLS {
            report.failures.push(format!(
                "only {} kills (the scenario needs at least {MIN_KILLS})",
                kills.total
            ));
        }
        report.notes.push(outcomes_note(&fleet));
        Ok(close(report, &[&fleet], seed, ctx.receivers, started).await)
    }
}
