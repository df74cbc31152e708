//! `spawn_app`: a receiver over a fresh database with the local development sources, plus
//! builders for signed deliveries at an injected time, and sources whose `forward` targets are a
//! local HTTP target that records what it receives.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hookledger_tests::fake_providers::{Answer as FakeAnswer, FakeServer};
use hookledger_tests::{local_sources_json, TestDb};
use hookledger_verify::{Scheme, SigningKey};
use http::{HeaderMap, HeaderName, HeaderValue};
use receiver::handler::AppState;
use shared::config::{DatabaseSettings, Settings, Sources};
use shared::ledger::Tx;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};
use shared::{Receiver, Reply};

/// The time every test delivery is signed at and received at (unix seconds).
pub const NOW: i64 = 1_750_000_000;

pub const STRIPE_SECRET: &str = "whsec_hookledger_local_development_secret";
pub const GITHUB_SECRET: &str = "hookledger-local-development-secret";
pub const ACME_SECRET: &str = "whsec_aG9va2xlZGdlciBsb2NhbCBkZXZlbG9wbWVudCBrZXk=";

pub struct TestApp {
    pub db: TestDb,
    pub state: AppState,
    pub settings: Settings,
}

impl TestApp {
    pub fn receiver(&self) -> &Receiver {
        &self.state.receiver
    }

    pub async fn receive(&self, source: &str, delivery: &Delivery) -> Reply {
        self.receiver()
            .receive(source, &delivery.headers, &delivery.body, NOW)
            .await
    }

    pub async fn count(&self, sql: &str) -> i64 {
        let client = self.db.connect().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    /// The first column of every row `sql` returns, as text, in its order (e.g.
    /// `SELECT event_id FROM webhook_event ORDER BY claimed_at`).
    pub async fn texts(&self, sql: &str) -> Vec<String> {
        let client = self.db.connect().await.unwrap();
        let rows = client.query(sql, &[]).await.unwrap();
        rows.iter().map(|row| row.get(0)).collect()
    }

    pub async fn ledger_rows(&self) -> i64 {
        self.count("SELECT count(*) FROM webhook_event").await
    }

    pub async fn order_rows(&self) -> i64 {
        self.count("SELECT count(*) FROM orders").await
    }
}

/// A receiver over a fresh database, `pool_size` connections, with `lock_timeout_ms`.
pub async fn spawn_app_with(pool_size: usize, lock_timeout_ms: u64) -> TestApp {
    let db = hookledger_tests::test_db().await.expect("test database");
    let mut database: DatabaseSettings = db.settings(pool_size);
    database.lock_timeout_ms = lock_timeout_ms;
    spawn_app_over(db, database)
}

/// A receiver whose pool reaches a fresh database through the transaction-mode pgbouncer of
/// `make test` (`HOOKLEDGER_TEST_POOLER_URL`), `pool_size` connections, with `lock_timeout_ms`
/// and the statement cache on or off. The database itself is created directly on PostgreSQL,
/// and `app.db.connect()` (the assertions) stays direct. Panics, never skips, without the
/// pooler.
pub async fn spawn_app_behind_pooler(
    pool_size: usize,
    lock_timeout_ms: u64,
    statement_cache: bool,
) -> TestApp {
    let db = hookledger_tests::test_db().await.expect("test database");
    let mut database =
        DatabaseSettings::with_url(hookledger_tests::db_pooler_url(&db).expect("the pooler's URL"));
    database.pool_size = pool_size;
    database.lock_timeout_ms = lock_timeout_ms;
    database.statement_cache = statement_cache;
    // Fail with pgbouncer's own words (e.g. "unsupported startup parameter: options") rather
    // than with the 503 every delivery would answer.
    if let Err(error) = shared::db::connect(&database).await {
        let reason = shared::error_chain::error_chain(&error);
        panic!("cannot connect through pgbouncer: {reason}");
    }
    spawn_app_over(db, database)
}

/// A receiver over `db` with `database` as its connection settings.
pub fn spawn_app_over(db: TestDb, database: DatabaseSettings) -> TestApp {
    spawn_app_over_sources(db, database, &local_sources_json().unwrap())
}

/// A receiver over a fresh database (8 connections) whose sources are the local development
/// ones plus `extra` (a JSON array of source objects, e.g. with outbox targets pointed at a
/// local server). Returns the app and the full sources JSON (for a child process's
/// `HOOKLEDGER_SOURCES`).
pub async fn spawn_app_with_sources(extra: serde_json::Value) -> (TestApp, String) {
    let mut sources: Vec<serde_json::Value> =
        serde_json::from_str(&local_sources_json().unwrap()).unwrap();
    sources.extend(extra.as_array().expect("a JSON array of sources").clone());
    let json = serde_json::to_string(&sources).unwrap();
    let db = hookledger_tests::test_db().await.expect("test database");
    let database = db.settings(8);
    (spawn_app_over_sources(db, database, &json), json)
}

/// A receiver over `db` with `database` as its connection settings and `sources_json` as its
/// sources.
pub fn spawn_app_over_sources(
    db: TestDb,
    database: DatabaseSettings,
    sources_json: &str,
) -> TestApp {
    // Into the run's log folder for the secret scan of `make test`, else through libtest's
    // capture (shown for failing tests only).
    hookledger_tests::test_log::install();
    let settings = Settings {
        database,
        sources: Sources::from_json(sources_json).unwrap(),
        sources_reload: Default::default(),
        worker: Default::default(),
        worker_function: None,
        sweep: Default::default(),
        audit: Default::default(),
        payload_keys: None,
    };
    let pool = shared::db::pool(&settings.database).unwrap();
    let state = AppState::new(&settings, pool, handlers_for(&settings.sources));
    TestApp {
        db,
        state,
        settings,
    }
}

/// The handlers the functions would run for `sources`: the example Rust handlers and the
/// sources' SQL handlers (`shared::App::handlers`).
pub fn handlers_for(sources: &Sources) -> shared::handler::Registry {
    shared::App {
        registry: handlers::examples::registry,
        migrations: Vec::new,
    }
    .handlers(sources)
    .expect("no SQL handler takes an example handler's event type")
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(8, 2_000).await
}

/// A delivery: the headers and raw body a provider sends.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Delivery {
    pub fn without_header(mut self, name: &str) -> Self {
        self.headers.remove(name);
        self
    }
}

fn signed(scheme: Scheme, secret: &str, msg_id: &str, at: i64, body: Vec<u8>) -> Delivery {
    let key = SigningKey::new(scheme, secret).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    for (name, value) in hookledger_verify::sign(scheme, &key, msg_id, at, &body) {
        headers.insert(
            HeaderName::try_from(name).expect("a signature header name"),
            HeaderValue::from_str(&value).unwrap(),
        );
    }
    Delivery { headers, body }
}

pub fn payment_intent_body(event_id: &str, order_id: &str, amount: i64) -> Vec<u8> {
    serde_json::to_vec_pretty(&serde_json::json!({
        "id": event_id,
        "object": "event",
        "created": NOW - 1,
        "type": "payment_intent.succeeded",
        "data": {"object": {
            "id": format!("pi_{order_id}"),
            "object": "payment_intent",
            "amount": amount,
            "amount_received": amount,
            "currency": "usd",
            // A payload value no log line may carry (the test logs' scan looks for it).
            "description": format!("order {order_id} for {}", hookledger_tests::PAYLOAD_MARKER),
            "metadata": {"order_id": order_id}
        }}
    }))
    .unwrap()
}

/// A Stripe `payment_intent.succeeded` delivery signed at `at`.
pub fn stripe_payment(event_id: &str, order_id: &str, amount: i64, at: i64) -> Delivery {
    stripe_body(payment_intent_body(event_id, order_id, amount), at)
}

/// Any Stripe body, signed at `at` with the local secret.
pub fn stripe_body(body: Vec<u8>, at: i64) -> Delivery {
    signed(Scheme::Stripe, STRIPE_SECRET, "", at, body)
}

/// A GitHub delivery with the given delivery id and event name.
pub fn github(delivery_id: &str, event: &str, body: &str) -> Delivery {
    let mut d = signed(
        Scheme::Github,
        GITHUB_SECRET,
        "",
        NOW,
        body.as_bytes().to_vec(),
    );
    d.headers.insert(
        "x-github-delivery",
        HeaderValue::from_str(delivery_id).unwrap(),
    );
    d.headers
        .insert("x-github-event", HeaderValue::from_str(event).unwrap());
    d
}

/// A Standard Webhooks delivery (source `acme`).
pub fn standard(msg_id: &str, body: &str, at: i64) -> Delivery {
    let mut d = signed(
        Scheme::StandardWebhooks,
        ACME_SECRET,
        msg_id,
        at,
        body.as_bytes().to_vec(),
    );
    d.headers
        .insert("webhook-id", HeaderValue::from_str(msg_id).unwrap());
    d
}

/// A handler that fails while `failing` is set, and records an order otherwise.
#[derive(Default)]
pub struct FlakyHandler {
    pub failing: AtomicBool,
}

#[async_trait::async_trait]
impl Handler for FlakyHandler {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(HandlerError::retryable("downstream is down".to_owned()));
        }
        handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await
    }
}

pub fn flaky(app: &mut TestApp) -> Arc<FlakyHandler> {
    let handler = Arc::new(FlakyHandler::default());
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    handler
}

/// Waits until some session of the test database is blocked on a lock (a second claim waiting
/// on the first's uncommitted tuple), reading pg_stat_activity rather than sleeping a guess.
pub async fn wait_for_lock_waiter(app: &TestApp) {
    wait_for_lock_waiters(app, 1).await;
}

/// Waits until at least `n` sessions of the test database are blocked on a lock
/// (`wait_event_type = 'Lock'` in pg_stat_activity), for up to 20 s; returns how many were.
/// Panics with the last count otherwise: proof that the race happened in PostgreSQL, not in
/// the client.
pub async fn wait_for_lock_waiters(app: &TestApp, n: i64) -> i64 {
    let client = app.db.connect().await.unwrap();
    let mut waiting = 0;
    for _ in 0..2_000 {
        waiting = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting >= n {
            return waiting;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{waiting} sessions waited on a lock, expected at least {n}");
}

/// A handler whose first call signals `entered` and then waits for `release` before recording
/// the order as usual (so the claim's transaction, and its row lock, stay open until the test
/// says so); later calls record the order at once. `calls` counts every call.
#[derive(Default)]
pub struct GatedHandler {
    pub calls: std::sync::atomic::AtomicUsize,
    pub entered: tokio::sync::Notify,
    pub release: tokio::sync::Notify,
}

#[async_trait::async_trait]
impl Handler for GatedHandler {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            self.entered.notify_one();
            self.release.notified().await;
        }
        handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await
    }
}

/// Registers a [`GatedHandler`] for the inline Stripe source's `payment_intent.succeeded`.
pub fn gated(app: &mut TestApp) -> Arc<GatedHandler> {
    let handler = Arc::new(GatedHandler::default());
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    handler
}

/// A `tracing` writer into memory, for asserting log lines.
#[derive(Clone, Default)]
pub struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Captured {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The JSON log lines logged so far.
    pub fn lines(&self) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The log lines whose field `field` is the string `value`.
    pub fn with(&self, field: &str, value: &str) -> Vec<serde_json::Value> {
        self.lines()
            .into_iter()
            .filter(|line| line[field] == value)
            .collect()
    }
}

/// A JSON subscriber for this thread only (`#[tokio::test]` runs on the current thread, and so
/// do the tasks it spawns).
pub fn capture_logs() -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    // Debug too: every EMF metric is also a debug event with `emf_metric` (telemetry::count);
    // capped as the functions' subscriber caps it (no statement parameters).
    let filter = tracing_subscriber::filter::Targets::new()
        .with_default(tracing_subscriber::filter::LevelFilter::DEBUG);
    use tracing_subscriber::layer::SubscriberExt as _;
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .json()
                .flatten_event(true)
                .with_writer(captured.clone()),
        )
        .with(filter)
        .with(shared::telemetry::cap());
    (captured, tracing::subscriber::set_default(subscriber))
}

/// The local deferred Stripe source's secret (events/sources.local.json).
pub const DEFERRED_SECRET: &str = "whsec_hookledger_local_deferred_secret";

/// A Stripe delivery for the deferred source `stripe-deferred`, signed at `NOW`.
pub fn deferred(body: Vec<u8>) -> Delivery {
    signed(Scheme::Stripe, DEFERRED_SECRET, "", NOW, body)
}

/// The local sources with `stripe-deferred` allowed `max_attempts` attempts.
pub fn with_max_attempts(app: &mut TestApp, max_attempts: u32) {
    let mut specs: Vec<serde_json::Value> =
        serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
    for spec in &mut specs {
        if spec["name"] == "stripe-deferred" {
            spec["max_attempts"] = max_attempts.into();
        }
    }
    app.settings.sources = Sources::from_json(&serde_json::to_string(&specs).unwrap()).unwrap();
    app.state = receiver::handler::AppState::new(
        &app.settings,
        app.receiver().pool.clone(),
        handlers_for(&app.settings.sources),
    );
}

/// The worker function's state over the app's settings and pool.
pub fn worker_for(app: &TestApp) -> worker::handler::AppState {
    worker::handler::AppState::new(
        &app.settings,
        app.receiver().pool.clone(),
        handlers_for(&app.settings.sources),
    )
}

/// Plenty of invocation time left.
pub fn plenty() -> std::time::Duration {
    std::time::Duration::from_secs(600)
}

/// `(status, attempts, last_error)` of the ledger row `event_id`.
pub async fn row(app: &TestApp, event_id: &str) -> (String, i32, Option<String>) {
    let client = app.db.connect().await.unwrap();
    let row = client
        .query_one(
            "SELECT status::text, attempts, last_error FROM webhook_event WHERE event_id = $1",
            &[&event_id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

/// The Standard Webhooks secret the forward targets re-sign with.
pub const FORWARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A local HTTP target (the test crate's `FakeServer`) that answers 200 after `delay`.
pub struct RecordingTarget {
    pub base_url: String,
    server: FakeServer,
}

impl RecordingTarget {
    pub async fn start(delay: Duration) -> Self {
        let server = FakeServer::start(move |_| FakeAnswer::raw(200, "ok").after(delay))
            .await
            .unwrap();
        Self {
            base_url: server.base_url.clone(),
            server,
        }
    }

    /// `(path, webhook-id)` of every request, as they arrived.
    pub fn seen(&self) -> Vec<(String, String)> {
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

/// A `forward` target `name` posting to `url`, re-signed with [`FORWARD_SECRET`].
pub fn forward_target(
    name: &str,
    url: &str,
    timeout_ms: u64,
    event_types: serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({"name": name, "type": "forward", "url": url, "secret": FORWARD_SECRET,
                       "timeout_ms": timeout_ms, "event_types": event_types})
}

/// A Standard Webhooks source `name` (the local `acme` secret, 5 attempts) in `mode` with `targets`.
pub fn standard_source(name: &str, mode: &str, targets: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"name": name, "scheme": "standard-webhooks", "secrets": [ACME_SECRET],
                       "mode": mode, "tolerance_secs": 300, "max_attempts": 5,
                       "targets": targets})
}

/// A Standard Webhooks event body of type `kind`.
pub fn typed_body(kind: &str) -> String {
    serde_json::json!({"type": kind, "data": {"order": 1}}).to_string()
}

/// One second from now: a clock just past the commit of what was received.
pub fn soon() -> SystemTime {
    SystemTime::now() + Duration::from_secs(1)
}

/// `(n, target, status, attempts, last_error)` of every message of `event_id`.
pub async fn outbox_messages(
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

/// The read-only console over `app`'s pool with `settings` (its sources and payload keys):
/// the page at `path` (a 200) as HTML, fetched with a bearer token.
pub async fn console_page(app: &TestApp, settings: Settings, path: &str) -> String {
    use hookledger_console::{AccessToken, Auth, Console, ConsoleConfig};
    let token = "helpers-console-token-0123456789";
    let console = Console::new(
        settings,
        app.receiver().pool.clone(),
        handlers::examples::registry(&app.settings.sources),
        shared::doorbell::Doorbell::off(),
        ConsoleConfig {
            auth: Auth::Token(AccessToken::new(token).unwrap()),
            read_only: true,
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { console.serve(listener, std::future::pending()).await });
    let page = reqwest::Client::new()
        .get(format!("http://{addr}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    page.text().await.unwrap()
}

/// A fresh folder under the system temp dir, removed on drop.
pub(crate) struct Scratch(pub(crate) std::path::PathBuf);

impl Scratch {
    pub(crate) fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir =
            std::env::temp_dir().join(format!("hookledger-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
