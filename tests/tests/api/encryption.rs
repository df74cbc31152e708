//! Payload encryption at rest (issue 28, item 3): a source with `encrypt_payload` stores its
//! payloads sealed (AES-256-GCM under a data key the master key wraps, the row's key as
//! associated data). The receiver seals; the worker and the console open; a ciphertext moved to
//! another row fails to open; KMS is called once per execution environment and rotation period,
//! not per delivery.

use std::sync::Arc;
use std::time::Duration;

use hookledger_tests::PAYLOAD_MARKER as MARK;
use shared::privacy::keys::PayloadKeys;
use shared::privacy::wrap::LocalKeys;

use crate::helpers::*;

const SCHEMA: &str = "CREATE TABLE seen (event_id text PRIMARY KEY, email text NOT NULL);";

/// Local master keys `k1` (current) for tests; another environment reads them the same way.
fn local_keys() -> Arc<PayloadKeys> {
    let json = serde_json::json!({"current": "k1",
        "keys": {"k1": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}});
    Arc::new(PayloadKeys::local(
        LocalKeys::from_json(&json.to_string()).unwrap(),
        Duration::from_secs(3600),
    ))
}

/// A Standard Webhooks source `name` in `mode` with `encrypt_payload`, redacting the customer's
/// e-mail when `redact`, and a SQL handler writing the e-mail it sees to `seen`.
fn sealed_source(name: &str, mode: &str, redact: bool) -> serde_json::Value {
    let mut source = standard_source(name, mode, serde_json::json!([]));
    source["encrypt_payload"] = serde_json::json!(true);
    if redact {
        source["redact"] = serde_json::json!(["/data/customer/email"]);
    }
    source["handlers"] = serde_json::json!([{
        "event_types": ["order.paid"],
        "sql": [{"statement": "INSERT INTO seen (event_id, email) VALUES ($1, $2)",
                 "params": [{"event": "id"}, {"path": "/data/customer/email", "type": "text"}]}]
    }]);
    source
}

/// An app over `sources` whose functions seal and open with `keys`.
async fn app_with(sources: serde_json::Value, keys: Option<Arc<PayloadKeys>>) -> TestApp {
    let (mut app, _) = spawn_app_with_sources(sources).await;
    app.settings.payload_keys = keys;
    app.state = receiver::handler::AppState::new(
        &app.settings,
        app.receiver().pool.clone(),
        handlers_for(&app.settings.sources),
    );
    app.db
        .connect()
        .await
        .unwrap()
        .batch_execute(SCHEMA)
        .await
        .unwrap();
    app
}

fn order(email: &str) -> String {
    serde_json::json!({"type": "order.paid",
                       "data": {"order": 7, "customer": {"email": email, "country": "NL"}}})
    .to_string()
}

async fn stored(app: &TestApp, event_id: &str) -> Vec<u8> {
    let client = app.db.connect().await.unwrap();
    client
        .query_one(
            "SELECT payload FROM webhook_event WHERE event_id = $1",
            &[&event_id],
        )
        .await
        .unwrap()
        .get::<_, Option<Vec<u8>>>(0)
        .expect("a stored payload")
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[tokio::test]
async fn an_inline_payload_is_stored_sealed_and_opened_only_with_the_keys() {
    let app = app_with(
        serde_json::json!([sealed_source("vault", "inline", false)]),
        Some(local_keys()),
    )
    .await;
    let email = format!("{MARK}@example.com");
    let delivery = standard("msg_s1", &order(&email), NOW);
    assert_eq!(app.receive("vault", &delivery).await.status, 200);
    assert_eq!(
        app.texts("SELECT email FROM seen").await,
        vec![email.clone()]
    );

    let sealed = stored(&app, "msg_s1").await;
    assert!(shared::privacy::seal::is_sealed(&sealed));
    assert!(!contains(&sealed, MARK) && !contains(&sealed, "order.paid"));
    // Deduplication works on the digests, sealed or not.
    let retry = app.receive("vault", &delivery).await;
    assert_eq!((retry.status, retry.replayed), (200, true));
    assert_eq!(
        app.receive("vault", &standard("msg_s1", &order("x@example.com"), NOW))
            .await
            .status,
        409
    );

    // Another execution environment with the same keys opens it; the console shows it.
    let opened = local_keys()
        .open(
            "vault",
            "msg_s1",
            shared::privacy::keys::Column::Payload,
            &sealed,
        )
        .await
        .unwrap();
    assert_eq!(opened, delivery.body);
    let html = console_page(&app, app.settings.clone(), "/events/vault/msg_s1").await;
    assert!(html.contains(&email), "the console opens it with its keys");
    // A console without the keys says it is sealed, and shows nothing of it.
    let keyless = shared::Settings {
        payload_keys: None,
        ..app.settings.clone()
    };
    let html = console_page(&app, keyless, "/events/vault/msg_s1").await;
    assert!(html.contains("Sealed (encrypted at rest)"), "{html}");
    assert!(!html.contains(MARK));
}

#[tokio::test]
async fn the_worker_opens_a_sealed_deferred_payload_and_keeps_the_redacted_copy_sealed() {
    let app = app_with(
        serde_json::json!([sealed_source("vaultd", "deferred", true)]),
        Some(local_keys()),
    )
    .await;
    let email = format!("{MARK}@example.com");
    let delivery = standard("msg_d1", &order(&email), NOW);
    assert_eq!(app.receive("vaultd", &delivery).await.status, 202);
    let unfinished = stored(&app, "msg_d1").await;
    assert!(shared::privacy::seal::is_sealed(&unfinished) && !contains(&unfinished, MARK));

    let worker = worker_for(&app);
    let summary = worker.worker.drain(soon, plenty).await.unwrap();
    assert_eq!(summary.completed, 1, "{summary:?}");
    assert_eq!(app.texts("SELECT email FROM seen").await, vec![email]);
    // Completed: the redacted copy, sealed.
    let completed = stored(&app, "msg_d1").await;
    assert!(shared::privacy::seal::is_sealed(&completed));
    assert_ne!(completed, unfinished);
    let opened = local_keys()
        .open(
            "vaultd",
            "msg_d1",
            shared::privacy::keys::Column::Payload,
            &completed,
        )
        .await
        .unwrap();
    let document: serde_json::Value = serde_json::from_slice(&opened).unwrap();
    assert_eq!(document["data"]["customer"]["email"], "[redacted]");
    assert_eq!(document["data"]["customer"]["country"], "NL");
}

#[tokio::test]
async fn a_ciphertext_moved_to_another_row_fails_to_open_and_the_event_is_kept_dead() {
    let app = app_with(
        serde_json::json!([sealed_source("vaultd", "deferred", false)]),
        Some(local_keys()),
    )
    .await;
    for id in ["msg_a", "msg_b"] {
        let body = order(&format!("{id}@example.com"));
        assert_eq!(
            app.receive("vaultd", &standard(id, &body, NOW))
                .await
                .status,
            202
        );
    }
    // Someone with write access to the table copies msg_a's ciphertext into msg_b's row.
    let client = app.db.connect().await.unwrap();
    client
        .execute(
            "UPDATE webhook_event SET payload = (SELECT payload FROM webhook_event \
             WHERE event_id = 'msg_a') WHERE event_id = 'msg_b'",
            &[],
        )
        .await
        .unwrap();
    let worker = worker_for(&app);
    let summary = worker.worker.drain(soon, plenty).await.unwrap();
    assert_eq!(summary.completed, 1, "{summary:?}");
    // msg_b is not processed with msg_a's body: fatal, dead, with the reason and no value.
    let (status, _, error) = row(&app, "msg_b").await;
    assert_eq!(status, "dead");
    let error = error.unwrap();
    assert!(error.contains("failed authentication"), "{error}");
    assert_eq!(
        app.texts("SELECT event_id FROM seen").await,
        vec!["msg_a".to_owned()]
    );
}

#[tokio::test]
async fn a_source_that_encrypts_needs_a_master_key_at_start_up() {
    let sources = serde_json::json!([sealed_source("vault", "inline", false)]).to_string();
    let lookup = |keys: Option<&'static str>| {
        let sources = sources.clone();
        move |name: &str| match name {
            "DATABASE_URL" => Some("postgres://u@127.0.0.1:1/unused".to_owned()),
            "HOOKLEDGER_SOURCES" => Some(sources.clone()),
            "HOOKLEDGER_PAYLOAD_KEYS" => keys.map(str::to_owned),
            _ => None,
        }
    };
    let error = shared::Settings::from_lookup(lookup(None)).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("encrypt_payload needs a master key"),
        "{error}"
    );
    let error = shared::Settings::from_lookup(lookup(Some(
        r#"{"current": "k1", "keys": {"k1": "c2hvcnQ="}}"#,
    )))
    .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("HOOKLEDGER_PAYLOAD_KEYS") && !text.contains("c2hvcnQ"),
        "{text}"
    );
    let keys =
        r#"{"current": "k1", "keys": {"k1": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}}"#;
    assert!(shared::Settings::from_lookup(lookup(Some(keys)))
        .unwrap()
        .payload_keys
        .is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_deliveries_through_kms_make_one_generate_data_key_and_a_worker_one_decrypt() {
    let config = shared::aws::load().await;
    let kms = aws_sdk_kms::Client::new(&config);
    let key_id = kms
        .create_key()
        .description("hookledger encryption test")
        .send()
        .await
        .unwrap()
        .key_metadata
        .unwrap()
        .key_id;
    let receiver_keys = Arc::new(PayloadKeys::kms(key_id.clone(), Duration::from_secs(3600)));
    let app = app_with(
        serde_json::json!([sealed_source("vaultd", "deferred", false)]),
        Some(receiver_keys.clone()),
    )
    .await;
    let sends = (0..50).map(|n| {
        let delivery = standard(
            &format!("msg_{n}"),
            &order(&format!("c{n}@example.com")),
            NOW,
        );
        let app = &app;
        async move { app.receive("vaultd", &delivery).await.status }
    });
    let statuses = futures_util::future::join_all(sends).await;
    assert!(statuses.iter().all(|s| *s == 202), "{statuses:?}");
    let calls = receiver_keys
        .keyring(shared::privacy::keys::Column::Payload)
        .await
        .unwrap()
        .calls();
    assert_eq!(
        (calls.generate, calls.unwrap),
        (1, 0),
        "one per environment and period"
    );

    // The worker is another execution environment: one Decrypt for the 50 payloads.
    let worker_keys = Arc::new(PayloadKeys::kms(key_id, Duration::from_secs(3600)));
    let mut settings = app.settings.clone();
    settings.payload_keys = Some(worker_keys.clone());
    let worker = worker::handler::AppState::new(
        &settings,
        app.receiver().pool.clone(),
        handlers_for(&settings.sources),
    );
    let summary = worker.worker.drain(soon, plenty).await.unwrap();
    assert_eq!(summary.completed, 50, "{summary:?}");
    assert_eq!(app.count("SELECT count(*) FROM seen").await, 50);
    let calls = worker_keys
        .keyring(shared::privacy::keys::Column::Payload)
        .await
        .unwrap()
        .calls();
    assert_eq!((calls.generate, calls.unwrap), (0, 1));
}

/// Local master keys `k1` and `k2`, `k2` current: after a rotation of the master key.
fn rotated_keys() -> Arc<PayloadKeys> {
    let json = serde_json::json!({"current": "k2", "keys": {
        "k1": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        "k2": "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="}});
    Arc::new(PayloadKeys::local(
        LocalKeys::from_json(&json.to_string()).unwrap(),
        Duration::from_secs(3600),
    ))
}

#[tokio::test]
async fn reencryption_moves_every_payload_to_the_new_master_key_in_bounded_batches() {
    let app = app_with(
        serde_json::json!([sealed_source("vault", "inline", false)]),
        Some(local_keys()),
    )
    .await;
    let deliveries: Vec<Delivery> = (1..=3)
        .map(|n| {
            standard(
                &format!("msg_{n}"),
                &order(&format!("c{n}@example.com")),
                NOW,
            )
        })
        .collect();
    for delivery in &deliveries {
        assert_eq!(app.receive("vault", delivery).await.status, 200);
    }
    // msg_3 as a row stored before the source turned encrypt_payload on: in the clear.
    let client = app.db.connect().await.unwrap();
    client
        .execute(
            "UPDATE webhook_event SET payload = $1 WHERE event_id = 'msg_3'",
            &[&deliveries[2].body],
        )
        .await
        .unwrap();

    let keys = rotated_keys();
    let conn = app.receiver().pool.get().await.unwrap();
    let source = app.settings.sources.get("vault").unwrap();
    let report = shared::reencrypt::reencrypt(&conn, source, &keys, "", 2, 100)
        .await
        .unwrap();
    assert_eq!(
        (
            report.read,
            report.resealed,
            report.sealed,
            report.unchanged
        ),
        (3, 2, 1, 0),
        "{report:?}"
    );
    assert_eq!((report.batches, report.done), (2, true), "{report:?}");
    // The handler's sealed answers move too: with k1 retired, retries are still answered.
    assert_eq!(report.responses_resealed, 3, "{report:?}");
    let mut retired = app.settings.clone();
    retired.payload_keys = Some(Arc::new(PayloadKeys::local(
        LocalKeys::from_json(
            &serde_json::json!({"current": "k2", "keys": {
                "k2": "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="}})
            .to_string(),
        )
        .unwrap(),
        Duration::from_secs(3600),
    )));
    let after_rotation = shared::Receiver::new(
        &retired,
        app.receiver().pool.clone(),
        handlers_for(&retired.sources),
    );
    let retry = after_rotation
        .receive("vault", &deliveries[1].headers, &deliveries[1].body, NOW)
        .await;
    assert_eq!(
        (retry.status, retry.replayed),
        (200, true),
        "{}",
        retry.body
    );
    for (n, delivery) in deliveries.iter().enumerate() {
        let id = format!("msg_{}", n + 1);
        let sealed = stored(&app, &id).await;
        assert_eq!(shared::privacy::seal::master_key_of(&sealed).unwrap(), "k2");
        let opened = keys
            .open(
                "vault",
                &id,
                shared::privacy::keys::Column::Payload,
                &sealed,
            )
            .await
            .unwrap();
        assert_eq!(&opened, &delivery.body);
        // The old key alone no longer opens anything: it can be retired.
        assert!(local_keys()
            .open(
                "vault",
                &id,
                shared::privacy::keys::Column::Payload,
                &sealed
            )
            .await
            .is_err());
    }
    // Again: nothing left to do. And deduplication never noticed.
    let again = shared::reencrypt::reencrypt(&conn, source, &keys, "", 2, 100)
        .await
        .unwrap();
    assert_eq!(
        (
            again.unchanged,
            again.resealed,
            again.sealed,
            again.responses_resealed
        ),
        (3, 0, 0, 0)
    );
    let retry = after_rotation
        .receive("vault", &deliveries[0].headers, &deliveries[0].body, NOW)
        .await;
    assert_eq!((retry.status, retry.replayed), (200, true));
    // A function still holding only the old key cannot open what moved: hence the order
    // (every function gets the new keyring first, then reencrypt, then retire the old key).
    assert_eq!(app.receive("vault", &deliveries[0]).await.status, 500);
    // A run that stops at its batch limit says where to continue.
    let partial = shared::reencrypt::reencrypt(&conn, source, &keys, "", 1, 1)
        .await
        .unwrap();
    assert_eq!(
        (partial.done, partial.next_after.as_deref()),
        (false, Some("msg_1"))
    );
}

#[tokio::test]
async fn a_stored_response_is_sealed_and_every_retry_gets_the_first_answers_bytes() {
    let mut source = sealed_source("vault", "inline", false);
    // The handler answers with the row it wrote: the e-mail is in the response.
    source["handlers"] = serde_json::json!([{
        "event_types": ["order.paid"],
        "sql": [{"statement": "INSERT INTO seen (event_id, email) VALUES ($1, $2) RETURNING email",
                 "params": [{"event": "id"}, {"path": "/data/customer/email", "type": "text"}]}],
        "response": {"returning": 1}
    }]);
    let app = app_with(serde_json::json!([source]), Some(local_keys())).await;
    let email = format!("{MARK}@example.com");
    let delivery = standard("msg_r1", &order(&email), NOW);
    let first = app.receive("vault", &delivery).await;
    assert_eq!(first.status, 200);
    assert!(first.body.contains(&email), "{}", first.body);

    let stored = app
        .texts("SELECT response_body::text FROM webhook_event WHERE event_id = 'msg_r1'")
        .await
        .pop()
        .unwrap();
    assert!(!stored.contains(MARK), "{stored}");
    assert!(
        shared::privacy::response::envelope_of(&stored).is_some(),
        "{stored}"
    );
    // The ledger still labels it processed.
    assert_eq!(
        app.texts(&format!(
            "SELECT {} FROM webhook_event WHERE event_id = 'msg_r1'",
            shared::ledger::outcome::EVENT_OUTCOME_SQL
        ))
        .await,
        vec!["processed".to_owned()]
    );

    // A retry, here and in another execution environment (same keys, its own cache): the same
    // bytes as the first answer.
    let retry = app.receive("vault", &delivery).await;
    assert_eq!((retry.status, retry.replayed), (200, true));
    assert_eq!(retry.body, first.body);
    let mut other = app.settings.clone();
    other.payload_keys = Some(local_keys());
    let elsewhere = shared::Receiver::new(
        &other,
        app.receiver().pool.clone(),
        handlers_for(&other.sources),
    );
    let retry = elsewhere
        .receive("vault", &delivery.headers, &delivery.body, NOW)
        .await;
    assert_eq!(
        (retry.status, retry.replayed, retry.body.as_str()),
        (200, true, first.body.as_str())
    );
    // The console opens it with its keys, and says it is sealed without them.
    let html = console_page(&app, app.settings.clone(), "/events/vault/msg_r1").await;
    assert!(
        !html.contains("(sealed: encrypted at rest)") && !html.contains("sealed&quot;"),
        "the console opens the response"
    );
    let keyless_console = shared::Settings {
        payload_keys: None,
        ..app.settings.clone()
    };
    let html = console_page(&app, keyless_console, "/events/vault/msg_r1").await;
    assert!(html.contains("(sealed: encrypted at rest)") && !html.contains(MARK));
    // A receiver without the keys cannot answer it: a 503 the provider retries, no value.
    let keyless = shared::Settings {
        payload_keys: None,
        ..app.settings.clone()
    };
    let mut plain = keyless.clone();
    // (Its source must not say encrypt_payload, or it refuses before the claim.)
    let mut specs: Vec<serde_json::Value> =
        serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
    let mut unsealed = sealed_source("vault", "inline", false);
    unsealed["encrypt_payload"] = serde_json::json!(false);
    specs.push(unsealed);
    plain.sources = shared::Sources::from_json(&serde_json::to_string(&specs).unwrap()).unwrap();
    let blind = shared::Receiver::new(
        &plain,
        app.receiver().pool.clone(),
        handlers_for(&plain.sources),
    );
    let refused = blind
        .receive("vault", &delivery.headers, &delivery.body, NOW)
        .await;
    assert_eq!(refused.status, 503);
    assert!(!refused.body.contains(MARK));
}

#[tokio::test]
async fn a_sealed_answer_of_the_one_statement_shape_is_the_same_bytes_first_and_on_retry() {
    let mut source = sealed_source("vault", "inline", false);
    // A plain INSERT and a fixed answer: the one-statement shape.
    source["handlers"] = serde_json::json!([{
        "event_types": ["order.paid"],
        "sql": [{"statement": "INSERT INTO seen (event_id, email) VALUES ($1, $2)",
                 "params": [{"event": "id"}, {"path": "/data/customer/email", "type": "text"}]}],
        "response": {"status": 200, "body": {"seen": "recorded", "by": "vault"}}
    }]);
    let app = app_with(serde_json::json!([source]), Some(local_keys())).await;
    let delivery = standard("msg_o1", &order("ada@example.com"), NOW);
    let first = app.receive("vault", &delivery).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.body, r#"{"by":"vault","seen":"recorded"}"#);
    let stored = app
        .texts("SELECT response_body::text FROM webhook_event WHERE event_id = 'msg_o1'")
        .await
        .pop()
        .unwrap();
    assert!(
        shared::privacy::response::envelope_of(&stored).is_some(),
        "{stored}"
    );
    let retry = app.receive("vault", &delivery).await;
    assert_eq!(
        (retry.status, retry.replayed, retry.body.as_str()),
        (200, true, first.body.as_str())
    );
}
