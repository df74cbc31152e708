//! The verifier: what the database holds after a scenario, against what the simulator saw.
//!
//! The pass rule (issue 13): every event acknowledged with a 2xx has exactly one effect and a
//! completed ledger row; no event has two effects; nothing is lost (every event got a 2xx); no
//! process panicked. [`check_effects`] applies the database half to `chaos_effects`;
//! scenarios whose effect lives elsewhere (the examples' `subscriptions`) use
//! [`ledger_statuses`] and their own comparison.

use std::collections::{BTreeMap, HashMap, HashSet};

use anyhow::Result;
use serde::Serialize;

use crate::simulator::EventRecord;

/// `webhook_event.status` per event id of `source`.
///
/// # Errors
/// The query fails.
pub async fn ledger_statuses(
    client: &tokio_postgres::Client,
    source: &str,
) -> Result<HashMap<String, String>> {
    let rows = client
        .query(
            "SELECT event_id, status::text FROM webhook_event WHERE source = $1",
            &[&source],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
        .collect())
}

/// `chaos_effects` rows per event id of `source`.
///
/// # Errors
/// The query fails.
pub async fn effects_per_event(
    client: &tokio_postgres::Client,
    source: &str,
) -> Result<HashMap<String, i64>> {
    let rows = client
        .query(
            "SELECT event_id, count(*) FROM chaos_effects WHERE source = $1 GROUP BY event_id",
            &[&source],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
        .collect())
}

/// The database half of the pass rule for the events in `records`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EffectCheck {
    /// `chaos_effects` rows for these events.
    pub effects: u64,
    /// Events with more than one effect row.
    pub doubled: u64,
    /// Acknowledged events with no effect row.
    pub acked_without_effect: u64,
    /// Acknowledged events whose ledger row is not `completed` (or missing).
    pub acked_not_completed: u64,
    /// Events never acknowledged (lost).
    pub lost: u64,
    /// Ledger rows by status for these events.
    pub ledger: BTreeMap<String, u64>,
    /// Up to ten offending event ids, with what is wrong.
    pub examples: Vec<String>,
}

impl EffectCheck {
    /// Whether this half of the pass rule holds.
    pub fn pass(&self) -> bool {
        self.doubled == 0
            && self.acked_without_effect == 0
            && self.acked_not_completed == 0
            && self.lost == 0
    }
}

/// Acknowledged per distinct event (an event sent in several records counts once).
fn acked_events(records: &[EventRecord]) -> BTreeMap<(String, String), bool> {
    let mut acked: BTreeMap<(String, String), bool> = BTreeMap::new();
    for r in records {
        *acked.entry((r.source.clone(), r.id.clone())).or_default() |= r.acked();
    }
    acked
}

/// Checks `chaos_effects` and the ledger against `records`: each acknowledged event exactly
/// one effect and a completed row, no event two effects, none lost.
///
/// # Errors
/// A query fails.
pub async fn check_effects(
    client: &tokio_postgres::Client,
    records: &[EventRecord],
) -> Result<EffectCheck> {
    let acked = acked_events(records);
    let sources: HashSet<&str> = acked.keys().map(|(s, _)| s.as_str()).collect();
    let mut effects = HashMap::new();
    let mut statuses = HashMap::new();
    for source in sources {
        for (id, n) in effects_per_event(client, source).await? {
            effects.insert((source.to_owned(), id), n);
        }
        for (id, s) in ledger_statuses(client, source).await? {
            statuses.insert((source.to_owned(), id), s);
        }
    }
    let mut check = EffectCheck::default();
    let note = |check: &mut EffectCheck, what: String| {
        if check.examples.len() < 10 {
            check.examples.push(what);
        }
    };
    for (key, was_acked) in &acked {
        let n = effects.get(key).copied().unwrap_or(0);
        let status = statuses
            .get(key)
            .cloned()
            .unwrap_or_else(|| "missing".into());
        *check.ledger.entry(status.clone()).or_default() += 1;
        check.effects += n as u64;
        if n > 1 {
            check.doubled += 1;
            note(&mut check, format!("{}/{}: {n} effects", key.0, key.1));
        }
        if !was_acked {
            check.lost += 1;
            note(
                &mut check,
                format!("{}/{}: never acknowledged", key.0, key.1),
            );
            continue;
        }
        if n == 0 {
            check.acked_without_effect += 1;
            note(
                &mut check,
                format!("{}/{}: acknowledged, no effect", key.0, key.1),
            );
        }
        if status != "completed" {
            check.acked_not_completed += 1;
            note(
                &mut check,
                format!("{}/{}: acknowledged, ledger {status}", key.0, key.1),
            );
        }
    }
    Ok(check)
}

/// Acknowledged events whose ledger row is not `completed`, and the ledger by status (for
/// scenarios whose effects are not in `chaos_effects`).
///
/// # Errors
/// A query fails.
pub async fn check_ledger(
    client: &tokio_postgres::Client,
    records: &[EventRecord],
) -> Result<EffectCheck> {
    let acked = acked_events(records);
    let sources: HashSet<&str> = acked.keys().map(|(s, _)| s.as_str()).collect();
    let mut statuses = HashMap::new();
    for source in sources {
        for (id, s) in ledger_statuses(client, source).await? {
            statuses.insert((source.to_owned(), id), s);
        }
    }
    let mut check = EffectCheck::default();
    for (key, was_acked) in &acked {
        let status = statuses
            .get(key)
            .cloned()
            .unwrap_or_else(|| "missing".into());
        *check.ledger.entry(status.clone()).or_default() += 1;
        if !was_acked {
            check.lost += 1;
        } else if status != "completed" {
            check.acked_not_completed += 1;
            if check.examples.len() < 10 {
                check.examples.push(format!(
                    "{}/{}: acknowledged, ledger {status}",
                    key.0, key.1
                ));
            }
        }
    }
    Ok(check)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn record(id: &str, acks: u64) -> EventRecord {
        EventRecord {
            source: "stripe".into(),
            id: id.into(),
            attempts: acks.max(1),
            acks,
            first_ack_after: (acks > 0).then(|| Duration::from_millis(5)),
            ..Default::default()
        }
    }

    /// The verifier must be able to fail: each way the pass rule breaks is counted.
    #[tokio::test]
    async fn the_verifier_flags_doubled_missing_uncompleted_and_lost_events() {
        let server = std::env::var("DATABASE_URL")
            .expect("DATABASE_URL (run under scripts/with-postgres.sh, as make test does)");
        let name = format!("chaos_verify_{}", std::process::id());
        let admin = crate::cluster::connect(&server).await.expect("server");
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await
            .expect("drop");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create");
        let url = crate::cluster::database_url(&server, &name);
        shared::db::migrate(&shared::config::DatabaseSettings::with_url(url.clone()))
            .await
            .expect("migrations");
        let client = crate::cluster::connect(&url).await.expect("database");
        client
            .batch_execute(crate::handlers::EFFECTS_TABLE)
            .await
            .expect("chaos_effects");
        client
            .batch_execute(
                "INSERT INTO chaos_effects (source, event_id, event_type) VALUES
                   ('stripe', 'a', 't'), ('stripe', 'a', 't'), ('stripe', 'b', 't'),
                   ('stripe', 'd', 't');
                 INSERT INTO webhook_event (source, event_id, event_type, payload_digest, status,
                                            response_status, response_body, completed_at)
                 SELECT 'stripe', id, 't', sha256(id::bytea), 'completed', 200, '{}', now()
                 FROM unnest(ARRAY['a', 'b', 'c']) AS id;
                 INSERT INTO webhook_event (source, event_id, event_type, payload_digest)
                 VALUES ('stripe', 'd', 't', sha256('d'::bytea));",
            )
            .await
            .expect("rows");
        // a: two effects; b: right; c: acknowledged, no effect; d: acknowledged, still
        // claimed; e: never acknowledged.
        let records = [
            record("a", 1),
            record("b", 3),
            record("c", 1),
            record("d", 1),
            record("e", 0),
        ];
        let check = check_effects(&client, &records).await.expect("check");
        assert_eq!(check.effects, 4);
        assert_eq!(check.doubled, 1);
        assert_eq!(check.acked_without_effect, 1);
        assert_eq!(check.acked_not_completed, 1, "{check:?}"); // d (e is lost, not this)
        assert_eq!(check.lost, 1);
        assert!(!check.pass());
        let good = check_effects(&client, &records[1..2]).await.expect("check");
        assert!(good.pass(), "{good:?}");
        drop(client);
        let _ = admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
    }
}
