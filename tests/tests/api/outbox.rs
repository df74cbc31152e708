//! The transactional outbox on real PostgreSQL: messages (a source's built-in `forward` targets
//! and a handler's `tx.outbox`) commit with the claim or not at all, and the worker dispatches
//! them after commit to a local HTTP target that records every request's `webhook-id`. Clocks
//! are injected: nothing sleeps for a backoff or a lease.

use std::collections::VecDeque;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use hookledger_tests::fake_providers::{Answer as FakeAnswer, FakeServer};
use hookledger_verify::{Scheme, Verifier};
use shared::ledger::Tx;
use shared::Outcome;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};

use crate::helpers::*;

/// The Standard Webhooks secret the forward targets re-sign with.
const FORWARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Attempts before a message of the test sources is dead.
const MAX_ATTEMPTS: i32 = 5;

/// One request the target received.
type Received = hookledger_tests::fake_providers::Request;

/// The request's `webhook-id` (empty when it has none).
fn id_of(request: &Received) -> &str {
    request.header("webhook-id").unwrap_or("")
}

/// What the target answers the next request with.
#[derive(Debug, Clone)]
enum Answer {
    Status(u16, Vec<(&'static str, String)>, &'static str),
    /// Record the request, then never answer (the connection stays open).
    Hold,
}

/// A local HTTP target (the test crate's `FakeServer`): answers from a script (200 once it is
/// empty), records every request before answering.
struct TargetServer {
    base_url: String,
    server: FakeServer,
    script: Arc<Mutex<VecDeque<Answer>>>,
}

impl TargetServer {
    async fn start() -> Self {
        let script: Arc<Mutex<VecDeque<Answer>>> = Arc::new(Mutex::new(VecDeque::new()));
        let next = script.clone();
        let server = FakeServer::start(move |_| match next.lock().unwrap().pop_front() {
            None => FakeAnswer::raw(200, "ok"),
            Some(Answer::Hold) => FakeAnswer::hold(),
            Some(Answer::Status(status, extra, text)) => extra
                .into_iter()
                .fold(FakeAnswer::raw(status, text), |a, (n, v)| {
                    a.with_header(n, &v)
                }),
        })
        .await
        .unwrap();
        Self {
            base_url: server.base_url.clone(),
            server,
            script,
        }
    }

    fn then(&self, answer: Answer) {
        self.script.lock().unwrap().push_back(answer);
    }

    fn received(&self) -> Vec<Received> {
        self.server.requests()
    }

    fn ids(&self) -> Vec<String> {
        self.received()
            .iter()
            .map(|r| id_of(r).to_owned())
            .collect()
    }
}

/// Sources `shop` (inline) and `shop-deferred` (deferred), Standard Webhooks with the local
/// `acme` secret, each with two forward targets on `server`: `service` receives every
/// `order.*` event automatically (a built-in target), `mail` only what a handler sends.
fn shop_sources(server: &TargetServer) -> serde_json::Value {
    let targets = serde_json::json!([
        {"name": "service", "type": "forward", "url": format!("{}/service", server.base_url),
         "secret": FORWARD_SECRET, "timeout_ms": 5000, "event_types": ["order.*"]},
        {"name": "mail", "type": "forward", "url": format!("{}/mail", server.base_url),
         "secret": FORWARD_SECRET, "timeout_ms": 5000, "event_types": []},
    ]);
    serde_json::json!([
        {"name": "shop", "scheme": "standard-webhooks", "secrets": [ACME_SECRET],
         "mode": "inline", "tolerance_secs": 300, "max_attempts": MAX_ATTEMPTS,
         "targets": targets},
        {"name": "shop-deferred", "scheme": "standard-webhooks", "secrets": [ACME_SECRET],
         "mode": "deferred", "tolerance_secs": 300, "max_attempts": MAX_ATTEMPTS,
         "targets": targets},
        {"name": "shop-shadow", "scheme": "standard-webhooks", "secrets": [ACME_SECRET],
         "mode": "inline", "shadow": true, "tolerance_secs": 300, "targets": targets},
    ])
}

/// A handler that sends a `mail` message, then fails as told (or sends to `target_override`).
#[derive(Default)]
struct Mailer {
    fail_retryable: AtomicBool,
    fail_fatal: AtomicBool,
    unknown_target: AtomicBool,
}

#[async_trait::async_trait]
impl Handler for Mailer {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        let target = if self.unknown_target.load(Ordering::SeqCst) {
            "pager"
        } else {
            "mail"
        };
        tx.outbox(
            target,
            &serde_json::json!({"template": "order_confirmation", "event_id": event.event_id}),
        )?;
        if self.fail_retryable.load(Ordering::SeqCst) {
            return Err(HandlerError::retryable("the mail API answered 503"));
        }
        if self.fail_fatal.load(Ordering::SeqCst) {
            return Err(HandlerError::fatal("order has no customer"));
        }
        Ok(Effect::ok(serde_json::json!({"mailed": true})))
    }
}

struct Shop {
    app: TestApp,
    worker: worker::handler::AppState,
    server: TargetServer,
    mailer: Arc<Mailer>,
    sources_json: String,
}

/// The shop sources over a fresh database and a fresh target, with [`Mailer`] registered for
/// `order.created` in the receiver and the worker.
async fn shop() -> Shop {
    let server = TargetServer::start().await;
    let (mut app, sources_json) = spawn_app_with_sources(shop_sources(&server)).await;
    let mut worker = worker_for(&app);
    let mailer = Arc::new(Mailer::default());
    for source in ["shop", "shop-deferred", "shop-shadow"] {
        for registry in [
            &mut app.state.receiver.handlers,
            &mut worker.worker.handlers,
        ] {
            registry.register(source, "order.created", mailer.clone() as Arc<dyn Handler>);
        }
    }
    Shop {
        app,
        worker,
        server,
        mailer,
        sources_json,
    }
}

fn order_body(kind: &str, n: usize) -> String {
    serde_json::json!({"type": kind, "data": {"order": n, "total": 1250}}).to_string()
}

impl Shop {
    async fn deliver(&self, source: &str, id: &str, kind: &str) -> shared::Reply {
        let delivery = standard(id, &order_body(kind, 1), NOW);
        self.app.receive(source, &delivery).await
    }

    async fn drain_at(&self, at: SystemTime) -> shared::work::Summary {
        self.worker.worker.drain(move || at, plenty).await.unwrap()
    }

    /// `(n, target, status, attempts, last_status, last_error)` of every message of `event_id`.
    async fn messages(&self, event_id: &str) -> Vec<Message> {
        let client = self.app.db.connect().await.unwrap();
        client
            .query(
                "SELECT n, target, status::text, attempts, last_status, last_error, content_type,
                        payload, next_attempt_at
                 FROM outbox WHERE event_id = $1 ORDER BY n",
                &[&event_id],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| Message {
                n: row.get(0),
                target: row.get(1),
                status: row.get(2),
                attempts: row.get(3),
                last_status: row.get(4),
                last_error: row.get(5),
                content_type: row.get(6),
                payload: row.get(7),
                next_attempt_at: row.get(8),
            })
            .collect()
    }

    async fn outbox_rows(&self) -> i64 {
        self.app.count("SELECT count(*) FROM outbox").await
    }
}

#[derive(Debug, Clone)]
struct Message {
    n: i32,
    target: String,
    status: String,
    attempts: i32,
    last_status: Option<i16>,
    last_error: Option<String>,
    content_type: String,
    payload: Vec<u8>,
    next_attempt_at: SystemTime,
}

/// A little after now: the inline messages, due at the claim's `now()`, are due by then.
fn soon() -> SystemTime {
    SystemTime::now() + Duration::from_secs(1)
}

/// `at` to PostgreSQL's precision (microseconds).
fn micros(at: SystemTime) -> u128 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_micros()
}

/// Verifies a forwarded request as the receiving service would (Standard Webhooks).
fn verify_forwarded(request: &Received) {
    let verifier = Verifier::new(Scheme::StandardWebhooks, &[FORWARD_SECRET], 300, None).unwrap();
    let mut headers = http::HeaderMap::new();
    for (name, value) in &request.headers {
        headers.insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            http::HeaderValue::from_str(value).unwrap(),
        );
    }
    let at: i64 = request.headers["webhook-timestamp"].parse().unwrap();
    verifier
        .verify(&headers, &request.body, at)
        .expect("the forwarded request verifies with the target's secret");
}

#[tokio::test]
async fn an_inline_message_commits_with_its_claim_and_is_dispatched_after_it() {
    let shop = shop().await;
    let body = order_body("order.created", 1);
    let reply = shop
        .app
        .receive("shop", &standard("msg_inline_1", &body, NOW))
        .await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Processed),
        "{reply:?}"
    );

    // Committed with the claim: the built-in target's message first (the raw body as
    // verified), then the handler's; nothing sent yet.
    let messages = shop.messages("msg_inline_1").await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(
        (
            messages[0].n,
            messages[0].target.as_str(),
            messages[0].status.as_str()
        ),
        (1, "service", "pending")
    );
    assert_eq!(messages[0].payload, body.as_bytes());
    assert_eq!(messages[0].content_type, "application/json");
    assert_eq!((messages[1].n, messages[1].target.as_str()), (2, "mail"));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&messages[1].payload).unwrap(),
        serde_json::json!({"template": "order_confirmation", "event_id": "msg_inline_1"})
    );
    assert!(shop.server.received().is_empty());

    // Dispatched after it, each once, under its idempotency key.
    let summary = shop.drain_at(soon()).await;
    assert_eq!(
        (
            summary.outbox.leased,
            summary.outbox.dispatched,
            summary.outbox.delivered
        ),
        (2, 2, 2),
        "{summary:?}"
    );
    let mut received = shop.server.received();
    received.sort_by(|a, b| id_of(a).cmp(id_of(b)));
    assert_eq!(
        received
            .iter()
            .map(|r| (id_of(r), r.path.as_str()))
            .collect::<Vec<_>>(),
        [
            ("shop:msg_inline_1:1", "/service"),
            ("shop:msg_inline_1:2", "/mail")
        ]
    );
    assert_eq!(
        received[0].body,
        body.as_bytes(),
        "the provider's body travels unchanged"
    );
    assert_eq!(received[0].headers["content-type"], "application/json");
    for request in &received {
        verify_forwarded(request);
    }
    for message in shop.messages("msg_inline_1").await {
        assert_eq!(
            (
                message.status.as_str(),
                message.attempts,
                message.last_status
            ),
            ("delivered", 1, Some(200))
        );
    }
    // Nothing is sent twice.
    assert_eq!(
        shop.drain_at(soon() + Duration::from_secs(3600))
            .await
            .outbox
            .leased,
        0
    );
    assert_eq!(shop.server.received().len(), 2);
}

#[tokio::test]
async fn built_in_targets_forward_events_without_a_handler_and_only_the_types_they_name() {
    let shop = shop().await;
    let reply = shop.deliver("shop", "msg_paid", "order.paid").await;
    assert_eq!(
        reply.outcome,
        Outcome::Ignored,
        "the recorded no-op stays as it is"
    );
    let reply = shop.deliver("shop", "msg_user", "user.created").await;
    assert_eq!(reply.outcome, Outcome::Ignored);
    let paid = shop.messages("msg_paid").await;
    assert_eq!(
        paid.iter()
            .map(|m| (m.n, m.target.as_str()))
            .collect::<Vec<_>>(),
        [(1, "service")]
    );
    assert!(
        shop.messages("msg_user").await.is_empty(),
        "service takes order.* only"
    );
    shop.drain_at(soon()).await;
    assert_eq!(shop.server.ids(), ["shop:msg_paid:1"]);
}

#[tokio::test]
async fn a_deferred_event_s_messages_are_dispatched_in_the_drain_that_applies_it() {
    let shop = shop().await;
    let reply = shop
        .deliver("shop-deferred", "msg_deferred", "order.created")
        .await;
    assert_eq!(reply.status, 202);
    assert_eq!(shop.outbox_rows().await, 0, "accepted, not yet applied");

    // A fixed clock: the messages the worker's handler commits are due at that clock, so the
    // same drain dispatches them.
    let summary = shop.drain_at(SystemTime::now()).await;
    assert_eq!(summary.completed, 1, "{summary:?}");
    assert_eq!(summary.outbox.delivered, 2, "{summary:?}");
    let mut ids = shop.server.ids();
    ids.sort();
    assert_eq!(
        ids,
        [
            "shop-deferred:msg_deferred:1",
            "shop-deferred:msg_deferred:2"
        ]
    );
}

#[tokio::test]
async fn a_rolled_back_claim_leaves_no_message() {
    let shop = shop().await;
    // Retryable after tx.outbox: 500, no ledger row, no message.
    shop.mailer.fail_retryable.store(true, Ordering::SeqCst);
    let reply = shop.deliver("shop", "msg_retry", "order.created").await;
    assert_eq!(reply.status, 500, "{reply:?}");
    assert_eq!(shop.app.ledger_rows().await, 0);
    assert_eq!(shop.outbox_rows().await, 0);

    // Fatal after tx.outbox: the event is kept dead, with no message (built-in ones neither).
    shop.mailer.fail_retryable.store(false, Ordering::SeqCst);
    shop.mailer.fail_fatal.store(true, Ordering::SeqCst);
    let reply = shop.deliver("shop", "msg_fatal", "order.created").await;
    assert_eq!(reply.outcome, Outcome::Dead, "{reply:?}");
    assert_eq!(row(&shop.app, "msg_fatal").await.0, "dead");
    assert_eq!(shop.outbox_rows().await, 0);

    // In the worker: a failed attempt commits no message either.
    shop.mailer.fail_fatal.store(false, Ordering::SeqCst);
    shop.mailer.fail_retryable.store(true, Ordering::SeqCst);
    assert_eq!(
        shop.deliver("shop-deferred", "msg_worker", "order.created")
            .await
            .status,
        202
    );
    let summary = shop.drain_at(SystemTime::now()).await;
    assert_eq!(
        (summary.failed, summary.outbox.leased),
        (1, 0),
        "{summary:?}"
    );
    assert_eq!(row(&shop.app, "msg_worker").await.0, "failed");
    assert_eq!(shop.outbox_rows().await, 0);
    assert!(shop.server.received().is_empty());
}

#[tokio::test]
async fn an_unknown_target_is_fatal_for_the_event() {
    let shop = shop().await;
    shop.mailer.unknown_target.store(true, Ordering::SeqCst);
    let reply = shop.deliver("shop", "msg_pager", "order.created").await;
    assert_eq!(reply.outcome, Outcome::Dead, "{reply:?}");
    let (status, _, error) = row(&shop.app, "msg_pager").await;
    assert_eq!(status, "dead");
    let error = error.unwrap();
    assert!(
        error.contains("\"pager\"") && error.contains("not configured"),
        "{error}"
    );
    assert_eq!(shop.outbox_rows().await, 0);
}

#[tokio::test]
async fn a_message_leased_by_a_killed_worker_is_dispatched_once_after_its_lease_expires() {
    let shop = shop().await;
    shop.deliver("shop", "msg_crash", "order.created").await;
    // A separate process leases both messages and is killed before dispatching any.
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookledger-dev"))
        .args(["lease-outbox-and-hang", "--lease-secs", "60"])
        .env("DATABASE_URL", &shop.app.db.url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "leased 2");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    // While the lease holds, nobody dispatches them.
    assert_eq!(shop.drain_at(soon()).await.outbox.leased, 0);
    // Once it expires, the next drain dispatches each exactly once, under its key.
    let later = SystemTime::now() + Duration::from_secs(61);
    let summary = shop.drain_at(later).await;
    assert_eq!(summary.outbox.delivered, 2, "{summary:?}");
    let mut ids = shop.server.ids();
    ids.sort();
    assert_eq!(ids, ["shop:msg_crash:1", "shop:msg_crash:2"]);
    // The killed lease counted an attempt (it could have dispatched).
    for message in shop.messages("msg_crash").await {
        assert_eq!(
            (message.status.as_str(), message.attempts),
            ("delivered", 2)
        );
    }
    assert_eq!(
        shop.drain_at(later + Duration::from_secs(3600))
            .await
            .outbox
            .leased,
        0
    );
    assert_eq!(shop.server.received().len(), 2);
}

#[tokio::test]
async fn a_worker_killed_mid_dispatch_sends_the_message_again_with_the_same_key() {
    let shop = shop().await;
    shop.deliver("shop", "msg_midway", "order.paid").await;
    // The target receives the request and holds it while the dispatching process is killed.
    shop.server.then(Answer::Hold);
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookledger-dev"))
        .arg("drain")
        .env("DATABASE_URL", &shop.app.db.url)
        .env("HOOKLEDGER_SOURCES", &shop.sources_json)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    if tokio::time::timeout(Duration::from_secs(30), shop.server.server.arrival())
        .await
        .is_err()
    {
        let _ = child.kill();
        panic!("the child never dispatched: {:?}", child.wait());
    }
    child.kill().unwrap(); // SIGKILL, in the middle of the dispatch
    child.wait().unwrap();
    let first = shop.server.received();
    assert_eq!(first.len(), 1);
    assert_eq!(shop.messages("msg_midway").await[0].status, "processing");

    // After the lease (the default 120 s), the message goes again, with the same idempotency
    // key (and the same body), and is delivered.
    assert_eq!(shop.drain_at(soon()).await.outbox.leased, 0);
    let summary = shop
        .drain_at(SystemTime::now() + Duration::from_secs(121))
        .await;
    assert_eq!(summary.outbox.delivered, 1, "{summary:?}");
    let all = shop.server.received();
    assert_eq!(all.len(), 2);
    assert_eq!(id_of(&all[0]), "shop:msg_midway:1");
    assert_eq!(id_of(&all[1]), id_of(&all[0]));
    assert_eq!(all[1].body, all[0].body);
    let message = &shop.messages("msg_midway").await[0];
    assert_eq!(
        (
            message.status.as_str(),
            message.attempts,
            message.last_status
        ),
        ("delivered", 2, Some(200))
    );
}

#[tokio::test]
async fn a_target_failing_three_times_then_succeeding_gets_the_message_delivered_once() {
    let shop = shop().await;
    shop.deliver("shop", "msg_flaky", "order.paid").await;
    for _ in 0..3 {
        shop.server
            .then(Answer::Status(500, vec![], "upstream exploded"));
    }
    let t0 = soon();
    let mut summaries = Vec::new();
    for hour in 0..4 {
        summaries.push(shop.drain_at(t0 + Duration::from_secs(3600 * hour)).await);
        if hour < 3 {
            let message = &shop.messages("msg_flaky").await[0];
            assert_eq!(
                (
                    message.status.as_str(),
                    message.attempts,
                    message.last_status
                ),
                ("pending", hour as i32 + 1, Some(500)),
                "{message:?}"
            );
            assert!(
                message
                    .last_error
                    .as_deref()
                    .unwrap()
                    .contains("upstream exploded"),
                "{message:?}"
            );
        }
    }
    assert_eq!(
        summaries.iter().map(|s| s.outbox.retried).sum::<u64>(),
        3,
        "{summaries:?}"
    );
    assert_eq!(summaries[3].outbox.delivered, 1, "{summaries:?}");
    let message = &shop.messages("msg_flaky").await[0];
    assert_eq!(
        (
            message.status.as_str(),
            message.attempts,
            message.last_status
        ),
        ("delivered", 4, Some(200))
    );
    assert_eq!(
        message.last_error, None,
        "delivered: the old 500 is not its error any more"
    );
    // Four requests, all under one key; one of them answered 2xx.
    assert_eq!(shop.server.ids(), vec!["shop:msg_flaky:1"; 4]);
}

#[tokio::test]
async fn a_target_answering_400_kills_the_message_at_once_with_its_status() {
    let shop = shop().await;
    shop.deliver("shop", "msg_refused", "order.paid").await;
    shop.server
        .then(Answer::Status(400, vec![], "unknown order schema"));
    let (logs, guard) = capture_logs();
    let summary = shop.drain_at(soon()).await;
    drop(guard);
    assert_eq!(summary.outbox.dead, 1, "{summary:?}");
    // Counted as `outbox_dead_lettered`, not under the auditor's `outbox_dead` (a total of dead
    // messages: one name for both would mix a gauge and a counter in one CloudWatch metric).
    let counted = logs.with("emf_metric", "outbox_dead_lettered");
    assert_eq!(counted.len(), 1, "{}", logs.text());
    assert_eq!(
        (&counted[0]["source"], &counted[0]["value"]),
        (&"shop".into(), &1.into())
    );
    assert!(
        logs.with("emf_metric", "outbox_dead").is_empty(),
        "{}",
        logs.text()
    );
    let message = &shop.messages("msg_refused").await[0];
    assert_eq!(
        (
            message.status.as_str(),
            message.attempts,
            message.last_status
        ),
        ("dead", 1, Some(400))
    );
    let error = message.last_error.as_deref().unwrap();
    assert!(
        error.contains("400") && error.contains("unknown order schema"),
        "{error}"
    );
    assert_eq!(
        shop.app
            .count("SELECT count(*) FROM outbox WHERE dead_at IS NOT NULL")
            .await,
        1
    );
    // Dead is final: no later drain sends it again.
    shop.drain_at(soon() + Duration::from_secs(86_400)).await;
    assert_eq!(shop.server.received().len(), 1);
}

#[tokio::test]
async fn retry_after_is_honoured_up_to_the_backoff_cap() {
    let shop = shop().await;
    let cap = shop.app.settings.worker.backoff.cap_secs;
    let t0 = soon();
    // Longer than the first backoff (15-30 s): the target's wait wins.
    shop.deliver("shop", "msg_wait", "order.paid").await;
    shop.server.then(Answer::Status(
        503,
        vec![("retry-after", "600".to_owned())],
        "busy",
    ));
    shop.drain_at(t0).await;
    let message = &shop.messages("msg_wait").await[0];
    assert_eq!(message.status, "pending");
    assert_eq!(
        micros(message.next_attempt_at),
        micros(t0 + Duration::from_secs(600))
    );
    // A day: capped at the backoff cap.
    shop.deliver("shop", "msg_wait_long", "order.paid").await;
    shop.server.then(Answer::Status(
        429,
        vec![("retry-after", "86400".to_owned())],
        "slow down",
    ));
    shop.drain_at(t0).await;
    let message = &shop.messages("msg_wait_long").await[0];
    assert_eq!(
        (message.status.as_str(), message.last_status),
        ("pending", Some(429))
    );
    assert_eq!(
        micros(message.next_attempt_at),
        micros(t0 + Duration::from_secs(cap))
    );
    // Not due before then.
    assert_eq!(
        shop.drain_at(t0 + Duration::from_secs(599))
            .await
            .outbox
            .leased,
        0
    );
}

#[tokio::test]
async fn a_message_is_dead_once_the_sources_max_attempts_are_used() {
    let shop = shop().await;
    shop.deliver("shop", "msg_doomed", "order.paid").await;
    for _ in 0..10 {
        shop.server.then(Answer::Status(502, vec![], "bad gateway"));
    }
    let t0 = soon();
    for hour in 0..MAX_ATTEMPTS {
        shop.drain_at(t0 + Duration::from_secs(3600 * hour as u64))
            .await;
    }
    let message = &shop.messages("msg_doomed").await[0];
    assert_eq!(
        (
            message.status.as_str(),
            message.attempts,
            message.last_status
        ),
        ("dead", MAX_ATTEMPTS, Some(502))
    );
    let error = message.last_error.as_deref().unwrap();
    assert!(error.contains("attempts exhausted"), "{error}");
    assert_eq!(shop.server.received().len(), MAX_ATTEMPTS as usize);
    shop.drain_at(t0 + Duration::from_secs(86_400 * 2)).await;
    assert_eq!(shop.server.received().len(), MAX_ATTEMPTS as usize);
}

#[tokio::test]
async fn a_message_whose_target_is_no_longer_configured_is_retried_then_dead() {
    let shop = shop().await;
    shop.deliver("shop", "msg_orphan", "order.paid").await;
    // The target was removed from the configuration after the message was committed.
    shop.app
        .count(
            "WITH moved AS (UPDATE outbox SET target = 'gone' WHERE event_id = 'msg_orphan' \
             RETURNING 1) SELECT count(*) FROM moved",
        )
        .await;
    let t0 = soon();
    let summary = shop.drain_at(t0).await;
    assert_eq!(
        (summary.outbox.retried, summary.outbox.dispatched),
        (1, 0),
        "{summary:?}"
    );
    let message = &shop.messages("msg_orphan").await[0];
    assert_eq!(message.status, "pending");
    let error = message.last_error.as_deref().unwrap();
    assert!(
        error.contains("\"gone\"") && error.contains("not configured"),
        "{error}"
    );
    for hour in 1..MAX_ATTEMPTS {
        shop.drain_at(t0 + Duration::from_secs(3600 * hour as u64))
            .await;
    }
    let message = &shop.messages("msg_orphan").await[0];
    assert_eq!(
        (message.status.as_str(), message.attempts),
        ("dead", MAX_ATTEMPTS)
    );
    assert!(shop.server.received().is_empty());
}

#[tokio::test]
async fn messages_without_time_for_their_target_are_given_back_with_the_attempt_undone() {
    let shop = shop().await;
    shop.deliver("shop", "msg_late", "order.created").await;
    let margin = Duration::from_millis(shop.app.settings.worker.margin_ms);
    // Enough for the margin, not for the margin plus the target's 5 s timeout.
    let summary = shop
        .worker
        .worker
        .drain(soon, || margin + Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(
        (
            summary.outbox.leased,
            summary.outbox.released,
            summary.outbox.dispatched,
            summary.out_of_time
        ),
        (2, 2, 0, true),
        "{summary:?}"
    );
    for message in shop.messages("msg_late").await {
        assert_eq!((message.status.as_str(), message.attempts), ("pending", 0));
    }
    assert!(shop.server.received().is_empty());
    assert_eq!(shop.drain_at(soon()).await.outbox.delivered, 2);
}

#[tokio::test]
async fn two_concurrent_drains_never_dispatch_one_message_twice() {
    let shop = shop().await;
    for i in 0..40 {
        let id = format!("msg_pair_{i}");
        assert_eq!(shop.deliver("shop", &id, "order.created").await.status, 200);
    }
    assert_eq!(shop.outbox_rows().await, 80);
    // Two workers with pools of their own: real concurrent connections.
    let first = worker_for(&shop.app);
    let second_pool = shared::db::pool(&shop.app.settings.database).unwrap();
    let second = worker::handler::AppState::new(
        &shop.app.settings,
        second_pool,
        handlers::examples::registry(&shop.app.settings.sources),
    );
    let at = soon();
    let (a, b) = tokio::join!(
        first.worker.drain(move || at, plenty),
        second.worker.drain(move || at, plenty)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.outbox.delivered + b.outbox.delivered, 80, "{a:?} {b:?}");
    assert_eq!(a.outbox.lost + b.outbox.lost, 0);
    let ids = shop.server.ids();
    let unique: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(
        (ids.len(), unique.len()),
        (80, 80),
        "each message dispatched once"
    );
    assert_eq!(
        shop.app
            .count("SELECT count(*) FROM outbox WHERE status = 'delivered' AND attempts = 1")
            .await,
        80
    );
}

#[tokio::test]
async fn a_rerun_of_the_same_event_queues_no_second_message() {
    let shop = shop().await;
    // Shadow mode re-processes a duplicate: its messages exist under the same keys already.
    let delivery = standard("msg_twice", &order_body("order.created", 1), NOW);
    assert_eq!(
        shop.app.receive("shop-shadow", &delivery).await.outcome,
        Outcome::Processed
    );
    shop.drain_at(soon()).await;
    assert_eq!(shop.server.received().len(), 2);
    let reply = shop.app.receive("shop-shadow", &delivery).await;
    assert_eq!(reply.outcome, Outcome::ShadowDuplicate);
    assert_eq!(shop.outbox_rows().await, 2);
    shop.drain_at(soon()).await;
    assert_eq!(shop.server.received().len(), 2, "no second copy sent");
    for message in shop.messages("msg_twice").await {
        assert_eq!(message.status, "delivered", "the first copy is untouched");
    }

    // Re-running an ignored event once a handler exists: the built-in message it queued the
    // first time is kept as it is (delivered), only the handler's new one is added.
    let reply = shop.deliver("shop", "msg_ignored", "order.shipped").await;
    assert_eq!(reply.outcome, Outcome::Ignored);
    shop.drain_at(soon()).await;
    let mut worker = worker_for(&shop.app);
    let mut handlers = shop.app.state.receiver.handlers.clone();
    for registry in [&mut handlers, &mut worker.worker.handlers] {
        registry.register(
            "shop",
            "order.shipped",
            shop.mailer.clone() as Arc<dyn Handler>,
        );
    }
    let report = shared::redrive::run(
        &shop.app.receiver().pool,
        &shop.app.settings.sources,
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
    let summary = worker.worker.drain(move || at, plenty).await.unwrap();
    assert_eq!(
        (summary.completed, summary.outbox.delivered),
        (1, 1),
        "{summary:?}"
    );
    let messages = shop.messages("msg_ignored").await;
    assert_eq!(
        messages
            .iter()
            .map(|m| (m.n, m.target.as_str(), m.status.as_str(), m.attempts))
            .collect::<Vec<_>>(),
        [(1, "service", "delivered", 1), (2, "mail", "delivered", 1)]
    );
    let shipped: Vec<String> = shop
        .server
        .ids()
        .into_iter()
        .filter(|id| id.contains("msg_ignored"))
        .collect();
    assert_eq!(shipped, ["shop:msg_ignored:1", "shop:msg_ignored:2"]);
}

#[tokio::test]
async fn an_inline_commit_with_messages_rings_the_worker_and_one_without_does_not() {
    let mut shop = shop().await;
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "run with make test: the doorbell rings the moto emulator"
    );
    // Moto has no such function, so every ring fails and logs "doorbell failed": the log is
    // the proof that a ring was tried.
    let doorbell = shared::doorbell::Doorbell::new(Some("hookledger-no-such-worker")).await;
    shop.app.state.receiver = shop.app.state.receiver.clone().with_doorbell(doorbell);
    let (logs, _guard) = capture_logs();
    let reply = shop.deliver("shop", "msg_bell", "order.paid").await;
    assert_eq!(
        reply.outcome,
        Outcome::Ignored,
        "a ring that fails does not fail the delivery"
    );
    let reply = shop.deliver("shop", "msg_quiet", "user.created").await;
    assert_eq!(reply.outcome, Outcome::Ignored);
    let rings: Vec<_> = logs
        .lines()
        .into_iter()
        .filter(|line| {
            line["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("doorbell failed"))
        })
        .map(|line| line["event_id"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(rings, ["msg_bell"], "{}", logs.text());
}

#[tokio::test]
async fn an_outcome_recorded_under_an_expired_lease_is_refused() {
    use shared::ledger::outbox::{lease_due, record, Outcome};
    let shop = shop().await;
    shop.deliver("shop", "msg_fenced", "order.paid").await;
    let conn = shop.app.receiver().pool.get().await.unwrap();
    let t0 = soon();
    let minute = Duration::from_secs(60);
    let first = lease_due(&conn, t0, t0 + minute, 10).await.unwrap();
    assert_eq!((first.len(), first[0].attempt), (1, 1));
    assert_eq!(first[0].message.idempotency_key(), "shop:msg_fenced:1");
    // Leased: not due again before the lease expires; due after it, under a new token.
    let early = t0 + minute - Duration::from_secs(1);
    assert!(lease_due(&conn, early, early + minute, 10)
        .await
        .unwrap()
        .is_empty());
    let late = t0 + minute + Duration::from_secs(1);
    let second = lease_due(&conn, late, late + minute, 10).await.unwrap();
    assert_eq!(second[0].lease_token, first[0].lease_token + 1);
    assert_eq!((second[0].attempt, second[0].message.attempts), (2, 1));
    // The first holder's outcome is refused; the current holder's is recorded.
    let refused = Outcome::Dead {
        error: "late".to_owned(),
        status: Some(400),
    };
    assert_eq!(
        record(&conn, &[(&first[0], refused)]).await.unwrap(),
        [false]
    );
    let delivered = Outcome::Delivered { status: Some(204) };
    assert_eq!(
        record(&conn, &[(&second[0], delivered)]).await.unwrap(),
        [true]
    );
    let message = &shop.messages("msg_fenced").await[0];
    assert_eq!(
        (
            message.status.as_str(),
            message.attempts,
            message.last_status
        ),
        ("delivered", 2, Some(204))
    );
    assert_eq!(message.last_error, None);
}

/// A key past its retention is a new life of the event (claimed again as new, whether or not
/// the sweep deleted it first): its handler runs again and its targets get it again, under new
/// idempotency keys, even though the first life's messages are still in the outbox (a
/// delivered message is kept for the retention from its delivery, a dead one for the
/// dead-letter retention). A rerun within one life still queues nothing twice.
#[tokio::test]
async fn a_retaken_expired_key_forwards_again_whether_or_not_the_sweep_ran() {
    let shop = shop().await;
    let client = shop.app.db.connect().await.unwrap();
    for (event_id, swept) in [("msg_life_kept", false), ("msg_life_swept", true)] {
        let first = shop.deliver("shop", event_id, "order.created").await;
        assert_eq!(first.outcome, Outcome::Processed, "{first:?}");
        shop.drain_at(soon()).await;
        let first_life = [format!("shop:{event_id}:1"), format!("shop:{event_id}:2")];
        let ids = |shop: &Shop| -> Vec<String> {
            let mut ids: Vec<String> = shop
                .server
                .ids()
                .into_iter()
                .filter(|id| id.contains(event_id))
                .collect();
            ids.sort();
            ids
        };
        assert_eq!(ids(&shop), first_life);

        // The key's first delivery moves past the source's retention (30 days).
        let aged = client
            .execute(
                "UPDATE webhook_event
                 SET claimed_at = now() - interval '30 days 1 hour',
                     completed_at = now() - interval '30 days 1 hour'
                 WHERE source = 'shop' AND event_id = $1",
                &[&event_id],
            )
            .await
            .unwrap();
        assert_eq!(aged, 1);
        if swept {
            let conn = shop.app.receiver().pool.get().await.unwrap();
            let limits = shared::config::SweepSettings {
                batch_size: 100,
                max_batches: 10,
                pause_ms: 0,
                duty_percent: 100,
                margin_ms: 0,
                ..Default::default()
            };
            let report = shared::sweep::run(
                &conn,
                &shop.app.settings.sources,
                &limits,
                SystemTime::now(),
                plenty,
            )
            .await
            .unwrap();
            assert_eq!(report.deleted_by_source.get("shop"), Some(&1), "{report:?}");
        }
        // The first life's delivered messages outlive the key.
        assert_eq!(shop.messages(event_id).await.len(), 2, "{event_id}");

        let again = shop.deliver("shop", event_id, "order.created").await;
        assert_eq!(
            (again.outcome, again.replayed),
            (Outcome::Processed, false),
            "{event_id}: {again:?}"
        );
        let summary = shop.drain_at(soon()).await;
        assert_eq!(summary.outbox.delivered, 2, "{event_id}: {summary:?}");
        let messages = shop.messages(event_id).await;
        assert_eq!(
            messages
                .iter()
                .map(|m| (m.n, m.target.as_str(), m.status.as_str()))
                .collect::<Vec<_>>(),
            [
                (1, "service", "delivered"),
                (2, "mail", "delivered"),
                (3, "service", "delivered"),
                (4, "mail", "delivered"),
            ],
            "{event_id}"
        );
        let mut both_lives = first_life.to_vec();
        both_lives.extend([format!("shop:{event_id}:3"), format!("shop:{event_id}:4")]);
        assert_eq!(
            ids(&shop),
            both_lives,
            "{event_id}: each target got it again"
        );

        // Within the new life a duplicate is answered from the ledger and queues nothing.
        let duplicate = shop.deliver("shop", event_id, "order.created").await;
        assert!(duplicate.replayed, "{duplicate:?}");
        assert_eq!(shop.messages(event_id).await.len(), 4);
    }
}
