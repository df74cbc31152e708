//! Regression tests from a hostile review of the outbox: each failed against the code as it was
//! reviewed (a starved drain, a message lost and another doubled after a configuration change, a
//! dispatch allowed to outlive its lease, plain http to a remote queue, a retired source's
//! messages never swept nor audited). Real PostgreSQL, a real local HTTP target.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hookledger_tests::fake_providers::{Answer as FakeAnswer, FakeServer};
use shared::config::{Settings, SweepSettings};
use shared::ledger::Tx;
use shared::Outcome;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};

use crate::helpers::*;

const FORWARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One request the target received: `(path, webhook-id)`.
type Seen = (String, String);

/// A local HTTP target (the test crate's `FakeServer`) that answers 200 after `delay`.
struct Target {
    base_url: String,
    server: FakeServer,
}

impl Target {
    async fn start(delay: Duration) -> Self {
        let server = FakeServer::start(move |_| FakeAnswer::raw(200, "ok").after(delay))
            .await
            .unwrap();
        Self {
            base_url: server.base_url.clone(),
            server,
        }
    }

    /// `(path, webhook-id)` of every request, as they arrived.
    fn seen(&self) -> Vec<Seen> {
        self.server
            .requests()
            .iter()
            .map(|r| {
                let id = r.header("webhook-id").unwrap_or("").to_owned();
                (r.path.clone(), id)
            })
            .collect()
    }
}

fn forward(
    name: &str,
    url: &str,
    timeout_ms: u64,
    event_types: serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({"name": name, "type": "forward", "url": url, "secret": FORWARD_SECRET,
                       "timeout_ms": timeout_ms, "event_types": event_types})
}

fn source(name: &str, mode: &str, targets: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"name": name, "scheme": "standard-webhooks", "secrets": [ACME_SECRET],
                       "mode": mode, "tolerance_secs": 300, "max_attempts": 5,
                       "targets": targets})
}

fn body(kind: &str) -> String {
    serde_json::json!({"type": kind, "data": {"order": 1}}).to_string()
}

fn soon() -> SystemTime {
    SystemTime::now() + Duration::from_secs(1)
}

/// `(n, target, status, attempts, last_error)` of every message of `event_id`.
async fn messages(
    app: &TestApp,
    event_id: &str,
) -> Vec<(i32, String, String, i32, Option<String>)> {
    let client = app.db.connect().await.unwrap();
    client
        .query(
            "SELECT n, target, status::text, attempts, last_error FROM outbox
             WHERE event_id = $1 ORDER BY n",
            &[&event_id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect()
}

/// Sources: `slowshop` (inline) whose only target has the longest timeout allowed (60 s), and
/// `lazyshop` (deferred, no target).
async fn slow_target_app(server: &Target) -> TestApp {
    let extra = serde_json::json!([
        source(
            "slowshop",
            "inline",
            serde_json::json!([forward(
                "slow",
                &format!("{}/slow", server.base_url),
                60_000,
                serde_json::json!(["*"])
            )])
        ),
        source("lazyshop", "deferred", serde_json::json!([])),
    ]);
    spawn_app_with_sources(extra).await.0
}

/// A message whose target's timeout does not fit the invocation's remaining time is given back,
/// and that stopped the whole drain, events included: one such message at the head of the
/// outbox starved every deferred event of every source (3 events per invocation instead of
/// all). The outbox and the events now run out of time separately.
#[tokio::test]
async fn a_message_whose_target_does_not_fit_the_time_left_does_not_stop_the_events() {
    let server = Target::start(Duration::ZERO).await;
    let app = slow_target_app(&server).await;
    assert_eq!(
        app.receive(
            "slowshop",
            &standard("msg_poison", &body("order.paid"), NOW)
        )
        .await
        .status,
        200
    );
    for i in 0..9 {
        let id = format!("msg_lazy_{i}");
        let reply = app
            .receive("lazyshop", &standard(&id, &body("order.paid"), NOW))
            .await;
        assert_eq!(reply.status, 202, "{reply:?}");
    }
    let worker = worker_for(&app);
    // 65 s left: enough for the events (30 s handler timeout + 10 s margin), not for the
    // message (60 s + 10 s).
    let summary = worker
        .worker
        .drain(soon, || Duration::from_secs(65))
        .await
        .unwrap();
    assert_eq!(
        summary.completed, 9,
        "one undispatchable message stopped the drain after one batch of events: {summary:?}"
    );
    assert_eq!((summary.outbox.released, summary.outbox.dispatched), (1, 0));
    assert!(summary.out_of_time);
    let rows = messages(&app, "msg_poison").await;
    assert_eq!((rows[0].2.as_str(), rows[0].3), ("pending", 0), "{rows:?}");
}

/// The configuration accepted a `forward` timeout longer than the worker's lease
/// (`HOOKLEDGER_LEASE_SECS`, 120 s): such a dispatch could outlive its lease, so another worker
/// could re-lease and re-send the message while the first request was still in flight, and the
/// first outcome was thrown away as `lost`. Now a target's timeout is at most 60 s and must
/// (plus 1 s) be shorter than the lease.
#[test]
fn a_forward_timeout_longer_than_the_lease_is_refused_at_start_up() {
    let sources = serde_json::json!([source(
        "slowshop",
        "inline",
        serde_json::json!([forward(
            "slow",
            "https://billing.example.com/h",
            300_000,
            serde_json::json!(["*"])
        )])
    )])
    .to_string();
    let lookup = |name: &str| match name {
        "DATABASE_URL" => Some("postgres://hookledger@127.0.0.1:5432/hookledger".to_owned()),
        "HOOKLEDGER_SOURCES" => Some(sources.clone()),
        "HOOKLEDGER_LEASE_SECS" => Some("120".to_owned()),
        _ => None,
    };
    let settings = Settings::from_lookup(lookup);
    assert!(
        settings.is_err(),
        "a 300 s forward timeout under a 120 s lease was accepted"
    );
}

/// A handler for `order.shipped` that does nothing but answer.
struct Shipped;

#[async_trait::async_trait]
impl Handler for Shipped {
    async fn handle(&self, _tx: &mut Tx<'_>, _event: &Event<'_>) -> Result<Effect, HandlerError> {
        Ok(Effect::ok(serde_json::json!({"shipped": true})))
    }
}

/// Message numbers were positions, not identities. An ignored event forwarded to `service` as
/// message 1; the operator then adds an `audit` target (listed first) and a handler, and
/// re-drives the ignored events, as the README says to. The re-run numbered `audit` 1 (dropped
/// by ON CONFLICT: `audit` never got the event) and `service` 2 (a second copy of the same body
/// under a NEW idempotency key, which `service` cannot deduplicate). Now `audit` gets message 2
/// and `service` nothing more.
#[tokio::test]
async fn a_target_added_before_another_gets_its_message_and_the_other_no_second_on_redrive() {
    let server = Target::start(Duration::ZERO).await;
    let service = forward(
        "service",
        &format!("{}/service", server.base_url),
        5000,
        serde_json::json!(["order.*"]),
    );
    let audit = forward(
        "audit",
        &format!("{}/audit", server.base_url),
        5000,
        serde_json::json!(["*"]),
    );
    let before = serde_json::json!([source(
        "shop",
        "inline",
        serde_json::json!([service.clone()])
    )]);
    let (app, json) = spawn_app_with_sources(before).await;
    assert_eq!(
        app.receive(
            "shop",
            &standard("msg_shipped", &body("order.shipped"), NOW)
        )
        .await
        .outcome,
        Outcome::Ignored
    );
    worker_for(&app).worker.drain(soon, plenty).await.unwrap();
    assert_eq!(
        server.seen(),
        [("/service".to_owned(), "shop:msg_shipped:1".to_owned())]
    );

    // The new configuration: `audit` first, then `service` unchanged.
    let mut all: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let shop = all.iter_mut().find(|s| s["name"] == "shop").unwrap();
    shop["targets"] = serde_json::json!([audit, service]);
    let sources =
        shared::config::Sources::from_json(&serde_json::to_string(&all).unwrap()).unwrap();
    let mut worker = worker_for(&app);
    worker.worker.sources = sources.clone();
    let mut handlers = app.state.receiver.handlers.clone();
    for registry in [&mut handlers, &mut worker.worker.handlers] {
        registry.register(
            "shop",
            "order.shipped",
            Arc::new(Shipped) as Arc<dyn Handler>,
        );
    }
    let report = shared::redrive::run(
        &app.receiver().pool,
        &sources,
        &handlers,
        &shared::doorbell::Doorbell::off(),
        "shop",
        &shared::redrive::Selection::IgnoredBetween {
            event_type: "order.shipped".to_owned(),
            since: SystemTime::now() - Duration::from_secs(3600),
            until: None,
        },
        false,
        plenty,
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(report.redriven, 1, "{report:?}");
    let at = SystemTime::now() + Duration::from_secs(5);
    worker.worker.drain(move || at, plenty).await.unwrap();
    let mut seen = server.seen();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("/audit".to_owned(), "shop:msg_shipped:2".to_owned()),
            ("/service".to_owned(), "shop:msg_shipped:1".to_owned()),
        ],
        "outbox rows now: {:?}",
        messages(&app, "msg_shipped").await
    );
}

/// An `sqs` target's queue_url could be plain http:// to any host, though its own error said
/// "queue_url must be an https:// URL" (and forward targets allow http:// only to the loopback
/// host): SigV4-signed requests with the payloads in clear text to anyone on the path.
#[test]
fn an_sqs_queue_url_over_plain_http_to_a_remote_host_is_refused() {
    let json = serde_json::json!([source(
        "shop",
        "inline",
        serde_json::json!([{"name": "orders", "type": "sqs",
                            "queue_url": "http://sqs.attacker.example/123456789012/orders.fifo"}])
    )])
    .to_string();
    assert!(
        shared::config::Sources::from_json(&json).is_err(),
        "http:// queue_url to a non-loopback host accepted"
    );
}

/// The sweep planned outbox work only for sources with keys in the ledger or in the
/// configuration. A source removed from the configuration whose keys were swept (completed keys
/// go after 30 days, its messages live longer: delivered later, dead ones 90 days) kept its
/// outbox rows forever; the auditor did not see its dead messages either.
#[tokio::test]
async fn outbox_rows_of_a_retired_source_are_swept_and_audited() {
    let app = spawn_app().await;
    let client = app.db.connect().await.unwrap();
    client
        .batch_execute(
            "INSERT INTO outbox (source, event_id, n, event_type, target, payload, content_type,
                                 status, delivered_at, dead_at)
             VALUES ('retired', 'evt_old_1', 1, 't', 'q', '\\x7b7d', 'application/json',
                     'delivered', now() - interval '400 days', NULL),
                    ('retired', 'evt_old_2', 1, 't', 'q', '\\x7b7d', 'application/json',
                     'dead', NULL, now() - interval '400 days')",
        )
        .await
        .unwrap();
    let audit = {
        let conn = app.receiver().pool.get().await.unwrap();
        shared::audit::run(
            &conn,
            &app.settings.sources,
            &Default::default(),
            SystemTime::now(),
        )
        .await
        .unwrap()
    };
    let conn = app.receiver().pool.get().await.unwrap();
    shared::sweep::run(
        &conn,
        &app.settings.sources,
        &SweepSettings::default(),
        SystemTime::now(),
        plenty,
    )
    .await
    .unwrap();
    let left = app
        .count("SELECT count(*) FROM outbox WHERE source = 'retired'")
        .await;
    assert_eq!(
        (left, audit.sources.get("retired").map(|a| a.outbox_dead)),
        (0, Some(1)),
        "400-day-old messages of an unconfigured source: swept, and audited first"
    );
}
