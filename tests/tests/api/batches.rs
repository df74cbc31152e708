//! Batched deliveries (SendGrid, HubSpot) through the real receiver and ledger: one delivery,
//! one ledger row per event, each on its own id and bytes; a redelivered batch that overlaps an
//! earlier one applies only its new items; an item that cannot be read fails the whole batch
//! with a 400 and writes nothing; a deferred batch is left for the worker item by item; the new
//! items of a plain-SQL batch are one transaction and one round trip, and whatever that
//! transaction cannot decide gets the answers the items one by one would.

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::json;
use shared::Outcome;

use hookledger_verify::generic::{sign, Signer};
use hookledger_verify::{Algorithm, PrivateKey, Request, Scheme, Verifier};

use hookledger_tests::turns::{proxied, TurnProxy};
use secrecy::ExposeSecret;

use crate::helpers::*;

/// The demo SendGrid key (events/private-keys.local.json); its public half, base64 DER, is the
/// `sendgrid` source's secret in events/sources.local.json.
const SENDGRID_KEY: &str = "1fe8004ba4f5234439eed861c1a28c77f65db332d4ab06131e1b0e854cf24e7e";
const HUBSPOT_SECRET: &str = "hookledger-local-hubspot-client-secret";
const HUBSPOT_URL: &str = "https://hooks.example.com/webhooks/hubspot";

fn signed(scheme: Scheme, signer: Signer<'_>, url: &str, at: i64, body: &str) -> Delivery {
    let model = hookledger_verify::presets::preset(scheme)
        .unwrap()
        .model
        .unwrap();
    let mut headers = HeaderMap::new();
    let request = Request {
        method: "POST",
        url,
        headers: &headers,
        body: body.as_bytes(),
    };
    for (name, value) in sign(&model, signer, &request, at).unwrap() {
        headers.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(&value).unwrap(),
        );
    }
    Delivery {
        headers,
        body: body.as_bytes().to_vec(),
    }
}

fn sendgrid(items: &[serde_json::Value]) -> Delivery {
    let key = PrivateKey::parse(Algorithm::EcdsaP256Sha256, SENDGRID_KEY, None).unwrap();
    let body = serde_json::to_string(items).unwrap();
    signed(Scheme::Sendgrid, Signer::Private(&key), "", NOW, &body)
}

fn sendgrid_event(id: &str, event: &str) -> serde_json::Value {
    json!({"email": "ada@example.com", "timestamp": NOW - 5, "event": event,
           "sg_event_id": id, "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0"})
}

#[tokio::test]
async fn a_batch_is_one_row_per_event_and_an_overlapping_batch_applies_only_its_new_items() {
    let app = spawn_app().await;
    let first = sendgrid(&[
        sendgrid_event("sg_1", "processed"),
        sendgrid_event("sg_2", "delivered"),
        sendgrid_event("sg_3", "open"),
    ]);
    let reply = app.receive("sendgrid", &first).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let answer: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(answer["events"], 3);
    assert_eq!(
        app.texts("SELECT event_id || ' ' || event_type || ' ' || status::text FROM webhook_event ORDER BY event_id").await,
        ["sg_1 processed completed", "sg_2 delivered completed", "sg_3 open completed"]
    );
    // Each row keeps its own item's bytes, not the whole batch.
    let stored = app
        .texts("SELECT convert_from(payload, 'UTF8') FROM webhook_event WHERE event_id = 'sg_2'")
        .await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stored[0]).unwrap(),
        sendgrid_event("sg_2", "delivered")
    );

    // SendGrid retries a batch that overlaps: sg_2 and sg_3 again, sg_4 new.
    let again = sendgrid(&[
        sendgrid_event("sg_2", "delivered"),
        sendgrid_event("sg_3", "open"),
        sendgrid_event("sg_4", "click"),
    ]);
    let reply = app.receive("sendgrid", &again).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let answer: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(answer["outcomes"]["replayed"], 2, "{answer}");
    assert_eq!(app.ledger_rows().await, 4);
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE event_id = 'sg_4'")
            .await,
        1
    );
}

#[tokio::test]
async fn an_unreadable_item_fails_the_whole_batch_with_a_400_and_writes_nothing() {
    let app = spawn_app().await;
    for (items, why) in [
        (
            vec![sendgrid_event("sg_1", "processed"), json!(42)],
            "an item that is no object",
        ),
        (
            vec![
                sendgrid_event("sg_1", "processed"),
                json!({"event": "open"}),
            ],
            "an item without its id",
        ),
        (vec![], "no items"),
    ] {
        let reply = app.receive("sendgrid", &sendgrid(&items)).await;
        assert_eq!(
            (reply.status, reply.outcome),
            (400, Outcome::BadRequest),
            "{why}: {}",
            reply.body
        );
    }
    // A forged batch: 401.
    let mut forged = sendgrid(&[sendgrid_event("sg_9", "open")]);
    forged.body = serde_json::to_vec(&[sendgrid_event("sg_9", "click")]).unwrap();
    assert_eq!(app.receive("sendgrid", &forged).await.status, 401);
    assert_eq!(app.ledger_rows().await, 0);
}

/// Two items of one batch with the same `sg_event_id`: with the same bytes they are one row
/// (the second a duplicate); with other bytes one row (the first item's) and a logged digest
/// mismatch for the second, and the batch is still answered 200: a mismatching item does not
/// stop the others (`process_batch`).
#[tokio::test]
async fn a_batch_repeating_an_id_is_one_row_and_a_changed_repeat_is_a_logged_digest_mismatch() {
    let app = spawn_app().await;
    let (logs, _guard) = capture_logs();
    let same = sendgrid(&[
        sendgrid_event("sg_dup", "open"),
        sendgrid_event("sg_dup", "open"),
        sendgrid_event("sg_after_dup", "click"),
    ]);
    let reply = app.receive("sendgrid", &same).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let answer: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(answer["events"], 3, "{answer}");
    assert_eq!(answer["outcomes"]["replayed"], 1, "{answer}");
    assert!(
        answer["outcomes"].get("digest_mismatch").is_none(),
        "{answer}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE event_id = 'sg_dup'")
            .await,
        1
    );
    assert_eq!(app.ledger_rows().await, 2);
    assert!(logs.with("outcome", "digest_mismatch").is_empty());

    let first = sendgrid_event("sg_mis", "open");
    let mut changed = first.clone();
    changed["email"] = json!("eve@example.com");
    let mismatch = sendgrid(&[
        first.clone(),
        changed,
        sendgrid_event("sg_after_mis", "click"),
    ]);
    let reply = app.receive("sendgrid", &mismatch).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let answer: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(answer["events"], 3, "{answer}");
    assert_eq!(answer["outcomes"]["digest_mismatch"], 1, "{answer}");
    assert_eq!(
        app.count(
            "SELECT count(*) FROM webhook_event WHERE event_id IN ('sg_mis', 'sg_after_mis')"
        )
        .await,
        2
    );
    assert_eq!(app.ledger_rows().await, 4);
    // The row keeps the first item's bytes.
    let stored = app
        .texts("SELECT convert_from(payload, 'UTF8') FROM webhook_event WHERE event_id = 'sg_mis'")
        .await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stored[0]).unwrap(),
        first
    );
    // Logged: the batch item's line names the mismatch.
    let logged: Vec<serde_json::Value> = logs
        .with("outcome", "digest_mismatch")
        .into_iter()
        .filter(|line| line["event_id"] == "sg_mis")
        .collect();
    assert_eq!(logged.len(), 1, "{}", logs.text());
    assert_eq!(logged[0]["status"], 409, "{}", logged[0]);
    assert!(
        logged[0]["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("payload identity")),
        "{}",
        logged[0]
    );
    // Not a refused delivery: nothing counted in rejected_delivery.
    assert_eq!(app.count("SELECT count(*) FROM rejected_delivery").await, 0);
}

#[tokio::test]
async fn a_hubspot_retry_counts_its_attempt_in_each_event_and_is_still_a_duplicate() {
    let (app, _) = spawn_app_with_sources(json!([
        {"name": "hubspot", "scheme": "hubspot", "secrets": [HUBSPOT_SECRET],
         "public_url": HUBSPOT_URL},
    ]))
    .await;
    let verifier = Verifier::new(Scheme::Hubspot, &[HUBSPOT_SECRET], 300, None).unwrap();
    let key = verifier.key(0).unwrap();
    let batch = |attempt: u32| {
        json!([
            {"eventId": 100, "subscriptionId": 7, "portalId": 62515, "occurredAt": 1_750_000_000_000u64,
             "subscriptionType": "contact.creation", "attemptNumber": attempt, "objectId": 123,
             "changeSource": "CRM", "changeFlag": "NEW", "appId": 54321},
            {"eventId": 101, "subscriptionId": 7, "portalId": 62515, "occurredAt": 1_750_000_000_001u64,
             "subscriptionType": "contact.propertyChange", "attemptNumber": attempt, "objectId": 123,
             "propertyName": "email", "propertyValue": "ada@example.com", "appId": 54321}
        ])
        .to_string()
    };
    let receiver = app.receiver();
    let first = signed(
        Scheme::Hubspot,
        Signer::Secret(key),
        HUBSPOT_URL,
        NOW,
        &batch(0),
    );
    let reply = receiver
        .receive_at("hubspot", HUBSPOT_URL, &first.headers, &first.body, NOW)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // The retry: attemptNumber 1 in every event, signed anew a minute later.
    let retry = signed(
        Scheme::Hubspot,
        Signer::Secret(key),
        HUBSPOT_URL,
        NOW + 60,
        &batch(1),
    );
    let reply = receiver
        .receive_at(
            "hubspot",
            HUBSPOT_URL,
            &retry.headers,
            &retry.body,
            NOW + 60,
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let answer: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(answer["outcomes"]["replayed"], 2, "{answer}");
    assert_eq!(
        app.texts("SELECT event_id || ' ' || event_type FROM webhook_event ORDER BY event_id")
            .await,
        ["100 contact.creation", "101 contact.propertyChange"]
    );
}

#[tokio::test]
async fn a_deferred_batch_is_accepted_item_by_item_and_the_worker_completes_each() {
    let (app, _) = spawn_app_with_sources(json!([
        {"name": "sendgrid-deferred", "scheme": "sendgrid", "mode": "deferred",
         "secrets": ["MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEAMhAyPSWHZDxcVbZ4cbfFLi+UzEt3pYdyPo3xCI/K+m9bLLk6GFE0YVSQlzCznwrQQdGC5rOTxy4A0qCXwUNGQ=="]},
    ]))
    .await;
    let delivery = sendgrid(&[
        sendgrid_event("sg_d1", "bounce"),
        sendgrid_event("sg_d2", "dropped"),
    ]);
    let reply = app.receive("sendgrid-deferred", &delivery).await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Accepted),
        "{}",
        reply.body
    );
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE status = 'claimed'")
            .await,
        2
    );
    let worker = worker_for(&app);
    let summary = worker
        .worker
        .drain(std::time::SystemTime::now, plenty)
        .await
        .unwrap();
    assert_eq!(summary.completed, 2, "{summary:?}");
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE status = 'completed'")
            .await,
        2
    );
}

/// The public half of [`SENDGRID_KEY`] (base64 DER).
const SENDGRID_PUBLIC: &str = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEAMhAyPSWHZDxcVbZ4cbfFLi+UzEt3pYdyPo3xCI/K+m9bLLk6GFE0YVSQlzCznwrQQdGC5rOTxy4A0qCXwUNGQ==";

/// What the `sendgrid-sql` source's handler writes, one row per item; an item for
/// `bad@example.com` violates its CHECK.
const SG_SCHEMA: &str = "CREATE TABLE sg_events (event_id text PRIMARY KEY, \
                         email text NOT NULL CHECK (email <> 'bad@example.com'))";

/// A receiver over a fresh database with the local sources plus `sendgrid-sql` (SendGrid, a
/// plain-SQL handler recording each item in `sg_events`: the one-statement shape), its one
/// pooled connection reaching PostgreSQL through a proxy counting round trips; `app.db`
/// (the assertions) stays direct.
async fn sql_batch_app(lock_timeout_ms: u64) -> (TestApp, TurnProxy) {
    let db = hookledger_tests::test_db().await.expect("test database");
    let mut database = db.settings(1);
    database.lock_timeout_ms = lock_timeout_ms;
    let direct = database.url.expose_secret().to_owned();
    let (_, upstream) = proxied(&direct, 0).unwrap();
    let proxy = TurnProxy::start(upstream).await.unwrap();
    database.url = proxied(&direct, proxy.port).unwrap().0.into();
    let mut sources: Vec<serde_json::Value> =
        serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
    sources.push(json!({
        "name": "sendgrid-sql", "scheme": "sendgrid", "secrets": [SENDGRID_PUBLIC],
        "handlers": [{
            "event_types": ["processed", "delivered", "open", "click"],
            "sql": [{
                "statement": "INSERT INTO sg_events (event_id, email) VALUES ($1, $2) \
                              ON CONFLICT (event_id) DO NOTHING",
                "params": [{"event": "id"}, {"path": "/email", "type": "text"}]
            }],
            "response": {"status": 200, "body": {"recorded": true}}
        }]
    }));
    let app = spawn_app_over_sources(db, database, &serde_json::to_string(&sources).unwrap());
    app.db
        .connect()
        .await
        .unwrap()
        .batch_execute(SG_SCHEMA)
        .await
        .unwrap();
    (app, proxy)
}

/// `ids` as SendGrid `open` events (for `ada@example.com`).
fn opens(ids: &[&str]) -> Delivery {
    let items: Vec<serde_json::Value> = ids.iter().map(|id| sendgrid_event(id, "open")).collect();
    sendgrid(&items)
}

/// The batch's answer and the round trips it took.
async fn receive_counting(
    app: &TestApp,
    proxy: &TurnProxy,
    delivery: &Delivery,
) -> (shared::Reply, u64) {
    let before = proxy.turns();
    let reply = app.receive("sendgrid-sql", delivery).await;
    (reply, proxy.turns() - before)
}

#[tokio::test]
async fn a_batch_of_new_plain_sql_items_is_one_round_trip_and_one_commit() {
    let (app, proxy) = sql_batch_app(2_000).await;
    // The connection opened and the statement prepared: what every later batch finds.
    let (warm, _) = receive_counting(&app, &proxy, &opens(&["sg_w1", "sg_w2"])).await;
    assert_eq!(warm.status, 200, "{}", warm.body);

    let ids: Vec<String> = (1..=10).map(|n| format!("sg_n{n}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let (reply, turns) = receive_counting(&app, &proxy, &opens(&ids)).await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Processed),
        "{}",
        reply.body
    );
    let answer: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(answer["outcomes"]["processed"], 10, "{answer}");
    assert_eq!(
        turns, 1,
        "ten new items: BEGIN, ten statements and COMMIT in one round trip"
    );
    // One transaction: every ledger row and every handler row of the batch has its xmin.
    assert_eq!(
        app.count(
            "SELECT count(DISTINCT x) FROM (
                 SELECT xmin::text AS x FROM webhook_event WHERE event_id LIKE 'sg_n%'
                 UNION ALL SELECT xmin::text FROM sg_events WHERE event_id LIKE 'sg_n%') AS t"
        )
        .await,
        1,
        "one commit for the whole batch"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM sg_events WHERE event_id LIKE 'sg_n%'")
            .await,
        10
    );
}

#[tokio::test]
async fn an_overlapping_plain_sql_batch_applies_only_its_new_items_in_one_round_trip() {
    let (app, proxy) = sql_batch_app(2_000).await;
    let (first, _) = receive_counting(&app, &proxy, &opens(&["sg_1", "sg_2", "sg_3"])).await;
    assert_eq!(first.status, 200, "{}", first.body);
    // SendGrid retries a batch that overlaps: sg_2 and sg_3 again, sg_4 and sg_5 new.
    let (again, turns) =
        receive_counting(&app, &proxy, &opens(&["sg_2", "sg_3", "sg_4", "sg_5"])).await;
    assert_eq!(
        (again.status, again.outcome),
        (200, Outcome::Processed),
        "{}",
        again.body
    );
    let answer: serde_json::Value = serde_json::from_str(&again.body).unwrap();
    assert_eq!(answer["outcomes"]["replayed"], 2, "{answer}");
    assert_eq!(answer["outcomes"]["processed"], 2, "{answer}");
    assert_eq!(turns, 1, "duplicates are decided by the same statements");
    assert_eq!(app.ledger_rows().await, 5);
    assert_eq!(app.count("SELECT count(*) FROM sg_events").await, 5);
    // Each duplicate kept its first row: one handler row each, not rewritten.
    assert_eq!(
        app.count(
            "SELECT count(DISTINCT xmin::text) FROM webhook_event WHERE event_id IN ('sg_2', 'sg_3', 'sg_4')"
        )
        .await,
        2
    );
}

/// An item whose key another delivery holds (an uncommitted claim): the batch stops there
/// with its 409, as one by one: the items before it are durable, the ones after it are not,
/// and the lock is waited on once (the per-item path is not tried after the pipelined one).
#[tokio::test]
async fn an_item_in_flight_elsewhere_answers_409_and_the_items_before_it_are_durable() {
    let lock_timeout_ms = 300;
    let (app, proxy) = sql_batch_app(lock_timeout_ms).await;
    let (warm, _) = receive_counting(&app, &proxy, &opens(&["sg_w1"])).await;
    assert_eq!(warm.status, 200, "{}", warm.body);
    let holder = app.db.connect().await.unwrap();
    holder
        .batch_execute(
            "BEGIN;
             INSERT INTO webhook_event (source, event_id, event_type, payload_digest, status)
             VALUES ('sendgrid-sql', 'sg_3', 'open', sha256('x'::bytea), 'claimed');",
        )
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let (reply, turns) = receive_counting(
        &app,
        &proxy,
        &opens(&["sg_1", "sg_2", "sg_3", "sg_4", "sg_5"]),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(
        (reply.status, reply.outcome),
        (409, Outcome::InFlight),
        "{}",
        reply.body
    );
    assert!(reply.retry_after.is_some(), "{reply:?}");
    assert!(
        took < std::time::Duration::from_millis(2 * lock_timeout_ms),
        "the lock was waited on once, not again one by one: {took:?}"
    );
    assert_eq!(turns, 2, "the run, then the items before sg_3 again");
    assert_eq!(
        app.texts("SELECT event_id FROM sg_events WHERE event_id <> 'sg_w1' ORDER BY event_id")
            .await,
        ["sg_1", "sg_2"]
    );
    holder.batch_execute("ROLLBACK").await.unwrap();
    // The provider's retry: sg_1 and sg_2 are duplicates, the rest is applied.
    let (retry, _) = receive_counting(
        &app,
        &proxy,
        &opens(&["sg_1", "sg_2", "sg_3", "sg_4", "sg_5"]),
    )
    .await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    let answer: serde_json::Value = serde_json::from_str(&retry.body).unwrap();
    assert_eq!(answer["outcomes"]["replayed"], 2, "{answer}");
    assert_eq!(answer["outcomes"]["processed"], 3, "{answer}");
    assert_eq!(app.count("SELECT count(*) FROM sg_events").await, 6);
}

/// An item whose handler write the database refuses (a CHECK): the pipelined transaction rolls
/// back, and the batch gets what the items one by one get: the refused item kept `dead` (a
/// fatal handler error, answered 2xx), every other item processed once.
#[tokio::test]
async fn an_item_whose_handler_write_fails_gets_the_same_outcomes_as_one_by_one() {
    let (app, proxy) = sql_batch_app(2_000).await;
    let mut bad = sendgrid_event("sg_bad", "open");
    bad["email"] = json!("bad@example.com");
    let batch = sendgrid(&[
        sendgrid_event("sg_a", "open"),
        bad,
        sendgrid_event("sg_c", "click"),
        sendgrid_event("sg_d", "delivered"),
    ]);
    let (logs, _guard) = capture_logs();
    let (reply, _) = receive_counting(&app, &proxy, &batch).await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Processed),
        "{}",
        reply.body
    );
    let answer: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(answer["outcomes"]["processed"], 3, "{answer}");
    assert_eq!(answer["outcomes"]["dead"], 1, "{answer}");
    assert_eq!(
        app.texts("SELECT event_id || ' ' || status::text FROM webhook_event ORDER BY event_id")
            .await,
        [
            "sg_a completed",
            "sg_bad dead",
            "sg_c completed",
            "sg_d completed"
        ]
    );
    assert_eq!(
        app.texts("SELECT event_id FROM sg_events ORDER BY event_id")
            .await,
        ["sg_a", "sg_c", "sg_d"]
    );
    // The refused item is told to the operator once, as one by one.
    let logged: Vec<serde_json::Value> = logs
        .with("metric", "handler_fatal")
        .into_iter()
        .filter(|line| line["event_id"] == "sg_bad")
        .collect();
    assert_eq!(logged.len(), 1, "{}", logs.text());
    // The same batch again: every item a duplicate, nothing written twice.
    let (again, _) = receive_counting(&app, &proxy, &batch).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(app.count("SELECT count(*) FROM sg_events").await, 3);
}
