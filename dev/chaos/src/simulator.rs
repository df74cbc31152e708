//! The provider simulator: delivers events the way a webhook provider does.
//!
//! - Each attempt is signed afresh (Stripe's scheme, `bench::stripe_signature`, a fresh `t`).
//! - Every non-2xx answer or timeout is retried with exponential backoff and jitter
//!   ([`RetryPolicy`]: 20 ms doubling to 1 s, each delay drawn from [delay/2, delay]) until a
//!   2xx, or until the per-event bound passes: then the event is *lost* (the scenario fails).
//! - `senders` concurrent senders per event, started together (duplicates on purpose); each
//!   sender stops at its first 2xx.
//! - The order is the caller's (scenarios shuffle with [`crate::rng::Rng`], seeded and
//!   printed); at most `window` events are in flight at once.
//!
//! Per event it records attempts, 2xx received, a status histogram and the time from the
//! first attempt to the first 2xx ([`EventRecord`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use lambda_sim::HttpApiEvent;
use tokio::sync::Mutex;

use crate::lambda::{Fleet, Tag};
use crate::rng::Rng;

/// One event the provider sends: the same body on every attempt (only the signature changes).
#[derive(Debug, Clone)]
pub struct SimEvent {
    /// Source name (`/webhooks/{source}`).
    pub source: String,
    /// The provider's event id.
    pub id: String,
    /// The event type.
    pub event_type: String,
    /// The raw body (JSON, UTF-8).
    pub body: String,
}

impl SimEvent {
    /// A Stripe event `{"id", "object": "event", "created", "type", "data": {"object"}}`.
    pub fn stripe(
        source: &str,
        id: &str,
        event_type: &str,
        created: i64,
        object: serde_json::Value,
    ) -> Self {
        let body = serde_json::json!({
            "id": id, "object": "event", "api_version": "2024-06-20", "created": created,
            "type": event_type, "livemode": false, "pending_webhooks": 1,
            "data": {"object": object}
        });
        Self {
            source: source.to_owned(),
            id: id.to_owned(),
            event_type: event_type.to_owned(),
            body: body.to_string(),
        }
    }
}

/// How the simulator retries.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// The first backoff (20 ms).
    pub first_backoff: Duration,
    /// The backoff cap (1 s).
    pub max_backoff: Duration,
    /// How long one attempt may take before the sender counts it a timeout and retries
    /// (15 s: above the function's 10 s timeout).
    pub attempt_timeout: Duration,
    /// After this long from its first attempt without a 2xx, a sender gives up and the event
    /// is lost (120 s).
    pub give_up_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            first_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_secs(1),
            attempt_timeout: Duration::from_secs(15),
            give_up_after: Duration::from_secs(120),
        }
    }
}

/// What happened to one event, over all its senders.
#[derive(Debug, Clone, Default)]
pub struct EventRecord {
    /// Source name.
    pub source: String,
    /// Event id.
    pub id: String,
    /// Attempts (all senders).
    pub attempts: u64,
    /// 2xx answers received (all senders; each sender stops at its first).
    pub acks: u64,
    /// Answers by status (504 = the function timed out, 0 = the sender's own timeout).
    pub statuses: BTreeMap<u16, u64>,
    /// From the event's first attempt to its first 2xx (None: never acknowledged).
    pub first_ack_after: Option<Duration>,
    /// Senders that gave up (the per-event bound passed without a 2xx).
    pub gave_up: u64,
}

impl EventRecord {
    /// Acknowledged at least once.
    pub fn acked(&self) -> bool {
        self.acks > 0
    }
}

/// Totals over a run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Totals {
    /// Distinct events.
    pub events: u64,
    /// Attempts.
    pub attempts: u64,
    /// 2xx answers.
    pub acks: u64,
    /// Events with no 2xx at all.
    pub lost: u64,
    /// The longest first-attempt-to-first-2xx, milliseconds.
    pub longest_wait_ms: u64,
    /// Answers by status.
    pub statuses: BTreeMap<u16, u64>,
}

/// Sums `records`.
pub fn totals(records: &[EventRecord]) -> Totals {
    let mut t = Totals::default();
    let mut seen = std::collections::HashSet::new();
    for r in records {
        seen.insert((r.source.as_str(), r.id.as_str()));
        t.attempts += r.attempts;
        t.acks += r.acks;
        for (s, n) in &r.statuses {
            *t.statuses.entry(*s).or_default() += n;
        }
        if let Some(wait) = r.first_ack_after {
            t.longest_wait_ms = t.longest_wait_ms.max(wait.as_millis() as u64);
        }
    }
    t.events = seen.len() as u64;
    // An event sent in several records (an on-purpose duplicate) is lost only if none of its
    // records got a 2xx.
    let mut acked: HashMap<(&str, &str), bool> = HashMap::new();
    for r in records {
        *acked.entry((r.source.as_str(), r.id.as_str())).or_default() |= r.acked();
    }
    t.lost = acked.values().filter(|a| !**a).count() as u64;
    t
}

/// The simulator over a receiver fleet.
pub struct Simulator {
    fleet: Arc<Fleet>,
    secrets: HashMap<String, String>,
    /// The retry policy.
    pub policy: RetryPolicy,
}

impl Simulator {
    /// Signs for each source with `secrets` (source name -> its current signing secret).
    pub fn new(fleet: Arc<Fleet>, secrets: HashMap<String, String>) -> Self {
        Self {
            fleet,
            secrets,
            policy: RetryPolicy::default(),
        }
    }

    /// The fleet it delivers to.
    pub fn fleet(&self) -> &Arc<Fleet> {
        &self.fleet
    }

    /// One attempt of `event`, freshly signed: the status API Gateway would answer (0 when
    /// the sender's own timeout passed).
    pub async fn attempt(&self, event: &SimEvent) -> u16 {
        let secret = self
            .secrets
            .get(&event.source)
            .map(String::as_str)
            .unwrap_or("");
        let signature = bench::stripe_signature(secret, bench::unix_now(), event.body.as_bytes());
        let payload = HttpApiEvent::webhook("chaos", &event.source)
            .header("content-type", "application/json; charset=utf-8")
            .header("stripe-signature", signature)
            .header(
                "user-agent",
                "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
            )
            .body(event.body.as_str())
            .to_bytes();
        let tag = Tag {
            source: event.source.clone(),
            event_id: event.id.clone(),
        };
        match tokio::time::timeout(self.policy.attempt_timeout, self.fleet.invoke(payload, tag))
            .await
        {
            Ok(invoked) => invoked.outcome.status(),
            Err(_) => 0,
        }
    }

    /// One sender: attempts until a 2xx or the bound; adds to `record`.
    async fn sender(
        &self,
        event: &SimEvent,
        started: Instant,
        mut rng: Rng,
        record: &Mutex<EventRecord>,
    ) {
        let mut backoff = self.policy.first_backoff;
        loop {
            let status = self.attempt(event).await;
            let ok = (200..300).contains(&status);
            {
                let mut r = record.lock().await;
                r.attempts += 1;
                *r.statuses.entry(status).or_default() += 1;
                if ok {
                    r.acks += 1;
                    if r.first_ack_after.is_none() {
                        r.first_ack_after = Some(started.elapsed());
                    }
                }
            }
            if ok {
                return;
            }
            if started.elapsed() > self.policy.give_up_after {
                record.lock().await.gave_up += 1;
                return;
            }
            let low = backoff.as_millis() as u64 / 2;
            let delay = Duration::from_millis(rng.between(low, backoff.as_millis() as u64));
            tokio::time::sleep(delay).await;
            backoff = (backoff * 2).min(self.policy.max_backoff);
        }
    }

    /// Delivers `event` with `senders` concurrent senders (started together).
    pub async fn deliver(&self, event: &SimEvent, senders: usize, rng: &mut Rng) -> EventRecord {
        let record = Mutex::new(EventRecord {
            source: event.source.clone(),
            id: event.id.clone(),
            ..Default::default()
        });
        let started = Instant::now();
        let rngs: Vec<Rng> = (0..senders.max(1)).map(|_| rng.fork()).collect();
        futures_util::future::join_all(
            rngs.into_iter()
                .map(|r| self.sender(event, started, r, &record)),
        )
        .await;
        record.into_inner()
    }

    /// Delivers `events` in the given order, `senders` senders each, at most `window` events
    /// in flight; returns one record per entry of `events` (a duplicate entry gets its own).
    pub async fn run(
        &self,
        events: &[SimEvent],
        senders: usize,
        window: usize,
        seed: u64,
    ) -> Vec<EventRecord> {
        let mut rng = Rng::new(seed);
        let rngs: Vec<Rng> = events.iter().map(|_| rng.fork()).collect();
        let deliveries: Vec<_> = events
            .iter()
            .zip(rngs)
            .map(|(event, mut r)| async move { self.deliver(event, senders, &mut r).await })
            .collect();
        stream::iter(deliveries)
            .buffer_unordered(window.max(1))
            .collect()
            .await
    }
}

/// Source name -> its first signing secret, from a sources JSON list
/// (`[{"name", "secrets": [...]}, ...]`).
pub fn secrets_of(sources_json: &str) -> HashMap<String, String> {
    let parsed: serde_json::Value = serde_json::from_str(sources_json).unwrap_or_default();
    parsed
        .as_array()
        .map(|sources| {
            sources
                .iter()
                .filter_map(|s| {
                    let name = s.get("name")?.as_str()?.to_owned();
                    let secret = s.get("secrets")?.get(0)?.as_str()?.to_owned();
                    Some((name, secret))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, acks: u64, wait_ms: Option<u64>) -> EventRecord {
        EventRecord {
            source: "stripe".into(),
            id: id.into(),
            attempts: acks + 1,
            acks,
            statuses: BTreeMap::from([(200, acks), (502, 1)]),
            first_ack_after: wait_ms.map(Duration::from_millis),
            gave_up: 0,
        }
    }

    #[test]
    fn an_event_is_lost_only_when_none_of_its_records_got_a_2xx() {
        let records = [
            record("a", 1, Some(30)),
            record("a", 0, None), // the on-purpose duplicate of "a" never got through
            record("b", 0, None),
            record("c", 2, Some(900)),
        ];
        let t = totals(&records);
        assert_eq!(t.events, 3);
        assert_eq!(t.lost, 1);
        assert_eq!(t.acks, 3);
        assert_eq!(t.attempts, 7);
        assert_eq!(t.longest_wait_ms, 900);
        assert_eq!(t.statuses.get(&502), Some(&4));
    }

    #[test]
    fn secrets_come_from_the_sources_json() {
        let secrets = secrets_of(r#"[{"name": "stripe", "secrets": ["s1", "s0"]}, {"name": "x"}]"#);
        assert_eq!(secrets.get("stripe").map(String::as_str), Some("s1"));
        assert_eq!(secrets.len(), 1);
    }
}
