//! Scenario 7, `out_of_order`: 10,000 versioned events over 500 subscriptions (20 versions
//! each: `customer.subscription.created`, 18 `.updated`, `.deleted`; the version is the
//! event's `created`, distinct per subscription), shuffled, 10% of them sent twice, to the examples' ordering-guarded
//! handler (`subscriptions` through `entity_version`). Pass: every event acknowledged with a
//! completed ledger row, and `subscriptions` holds exactly the newest version of each
//! subscription (its version, plan, status and event id equal the simulator's own newest).

use std::collections::HashMap;
use std::time::Instant;

use anyhow::Result;
use serde_json::json;

use super::{close, outcomes_note, run_tag, Context, Scenario};
use crate::report::ScenarioReport;
use crate::rng::Rng;
use crate::simulator::{totals, SimEvent};
use crate::verify::check_ledger;

/// Subscriptions (scaled by `--scale`).
pub const ENTITIES: usize = 500;
/// Versions per subscription.
pub const VERSIONS: usize = 20;
/// Percent of the events sent a second time.
pub const DUPLICATE_PERCENT: u64 = 10;
/// Deliveries in flight at once.
pub const WINDOW: usize = 64;

/// See the module docs.
pub struct OutOfOrder;

#[async_trait::async_trait]
impl Scenario for OutOfOrder {
    fn name(&self) -> &'static str {
        "out_of_order"
    }

    fn title(&self) -> &'static str {
        "10,000 versioned updates over 500 subscriptions, shuffled and 10% duplicated; the final state must be the newest version of each"
    }

    async fn run(&self, ctx: &Context) -> Result<ScenarioReport> {
        let started = Instant::now();
        let seed = ctx.seed ^ 0x07;
        let (db, fleet, simulator) = ctx.default_receivers(self.name(), &[]).await?;
        let mut rng = Rng::new(seed);
        let run = run_tag(&mut rng);
        let base = 1_790_000_000i64;
        let entities = ctx.scaled(ENTITIES);
        // Per subscription: the newest (version, plan, status, event id).
        let mut newest: HashMap<String, (i64, String, String, String)> = HashMap::new();
        let mut events = Vec::with_capacity(entities * VERSIONS);
        for e in 0..entities {
            let sub = format!("sub_{run}_{e:04}");
            for v in 0..VERSIONS {
                // Distinct per subscription, and not in sending order once shuffled.
                let created = base + (v as i64) * 60 + (e as i64 % 7);
                let plan = format!("price_v{v:02}");
                // The first version creates it, the last deletes it (the handler records
                // "canceled"), the rest update it.
                let (event_type, status) = match v {
                    0 => ("customer.subscription.created", "trialing"),
                    v if v + 1 == VERSIONS => ("customer.subscription.deleted", "canceled"),
                    v => (
                        "customer.subscription.updated",
                        ["active", "past_due", "active", "unpaid"][v % 4],
                    ),
                };
                let id = format!("evt_ooo_{run}_{e:04}_{v:02}");
                let entry = newest.entry(sub.clone()).or_insert((
                    i64::MIN,
                    String::new(),
                    String::new(),
                    String::new(),
                ));
                if created > entry.0 {
                    *entry = (created, plan.clone(), status.to_owned(), id.clone());
                }
                events.push(SimEvent::stripe(
                    "stripe",
                    &id,
                    event_type,
                    created,
                    json!({"id": sub, "object": "subscription", "customer": format!("cus_{e}"),
                           "status": status, "items": {"data": [{"price": {"id": plan}}]}}),
                ));
            }
        }
        let originals = events.len();
        let duplicates: Vec<SimEvent> = events
            .iter()
            .filter(|_| rng.below(100) < DUPLICATE_PERCENT)
            .cloned()
            .collect();
        let duplicates_sent = duplicates.len() as u64;
        events.extend(duplicates);
        rng.shuffle(&mut events);
        let records = simulator.run(&events, 1, WINDOW, seed).await;
        let client = db.connect().await?;
        let check = check_ledger(&client, &records).await?;
        let rows = client
            .query(
                "SELECT subscription_id, version, plan, status, event_id FROM subscriptions WHERE subscription_id = ANY($1)",
                &[&newest.keys().cloned().collect::<Vec<String>>()],
            )
            .await?;
        type Row = (i64, Option<String>, String, String);
        let mut state: HashMap<String, Row> = HashMap::new();
        for row in &rows {
            state.insert(row.get(0), (row.get(1), row.get(2), row.get(3), row.get(4)));
        }
        let mut matching = 0u64;
        let mut wrong = Vec::new();
        for (sub, (version, plan, status, event_id)) in &newest {
            match state.get(sub) {
                Some((v, Some(p), s, id))
                    if v == version && p == plan && s == status && id == event_id =>
                {
                    matching += 1
                }
                other => wrong.push(format!(
                    "{sub}: expected version {version} {plan} {status} {event_id}, found {other:?}"
                )),
            }
        }
        // What the ordering guard decided per event (the handler's "status").
        let decided = client
            .query(
                "SELECT coalesce(response_body->>'status', '?'), count(*) FROM webhook_event \
                 WHERE source = 'stripe' GROUP BY 1 ORDER BY 1",
                &[],
            )
            .await?
            .iter()
            .map(|r| format!("{} {}", r.get::<_, String>(0), r.get::<_, i64>(1)))
            .collect::<Vec<_>>()
            .join(", ");
        let t = totals(&records);
        let mut report = ScenarioReport::from_run(self.name(), self.title(), &t, &check);
        report.effects = matching;
        report.duplicates_sent = duplicates_sent;
        report
            .faults
            .insert("shuffled_deliveries".into(), events.len() as u64);
        report.notes.push(format!(
            "{originals} distinct events over {entities} subscriptions ({VERSIONS} versions each), {duplicates_sent} sent twice, one sender each, {WINDOW} in flight; effects = subscriptions whose row (version, plan, status, event id) equals the newest version's ({matching} of {entities}); the handler's answers per event: {decided} (a stale one completes as a no-op)"
        ));
        if !wrong.is_empty() {
            report.failures.push(format!(
                "{} subscriptions do not hold their newest version",
                wrong.len()
            ));
            for w in wrong.iter().take(10) {
                report.notes.push(format!("example: {w}"));
            }
        }
        report.notes.push(outcomes_note(&fleet));
        Ok(close(report, &[&fleet], seed, ctx.receivers, started).await)
    }
}
