//! The hostile-input corpus (`hookledger_tests::hostile`, issue 13 B) through the receiver
//! function's own stack: each case's Lambda invocation payload deserialized as the runtime does
//! (the raw JSON from the bytes) and handed to
//! `receiver::stack::stack(service_fn(function_handler))`, as in
//! functions/receiver/src/run.rs. Every case must be answered with its expected 4xx and a
//! non-empty reason, write no row in any table, and not panic; after every batch of 50 a valid
//! signed delivery of each provider in turn still answers 200 on the same state.

use std::collections::BTreeMap;

use hookledger_tests::hostile::{corpus, Case};
use hookledger_tests::EventFile;
use lambda_http::{service_fn, Context, LambdaEvent, Service};
use serde_json::value::RawValue;

use crate::helpers::*;

/// The corpus seed: the same cases on every run.
const SEED: u64 = 0x486F_6F6B_4C65_6467;

pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// How one invocation ended.
pub(crate) enum Outcome {
    /// The function's response: status and body text.
    Answered(u16, String),
    /// The runtime could not read the payload as an HTTP event (it would report an invocation
    /// error: API Gateway answers 502).
    Unreadable(String),
    /// Something panicked.
    Panicked(String),
}

/// One invocation through the function's service stack, in its own task (a panic is caught
/// there and reported, never unwinds into the test).
pub(crate) async fn invoke(
    state: &'static receiver::handler::AppState,
    payload: Vec<u8>,
) -> Outcome {
    let task = tokio::spawn(async move {
        // What lambda_runtime deserializes the invocation into: the stack's input type.
        let raw: Box<RawValue> = match serde_json::from_slice(&payload) {
            Ok(raw) => raw,
            Err(error) => return Err(error.to_string()),
        };
        let mut service = receiver::stack::stack(service_fn(move |request| {
            receiver::handler::function_handler(state, request)
        }));
        let response = service
            .call(LambdaEvent::new(raw, Context::default()))
            .await
            .map_err(|e| format!("invocation error: {e}"))?;
        serde_json::to_value(response).map_err(|e| e.to_string())
    });
    match task.await {
        Err(join) if join.is_panic() => {
            let panic = join.into_panic();
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Outcome::Panicked(text)
        }
        Err(join) => Outcome::Panicked(join.to_string()),
        Ok(Err(error)) => Outcome::Unreadable(error),
        Ok(Ok(response)) => {
            let status = response["statusCode"].as_u64().unwrap_or(0) as u16;
            let body = response["body"].as_str().unwrap_or("").to_owned();
            Outcome::Answered(status, body)
        }
    }
}

/// Row counts of every table of the test database, in one statement, but the counts of
/// refused deliveries (`rejected_delivery`), which a refusal adds to by design:
/// [`rejected_total`] follows those.
pub(crate) async fn table_counts(client: &tokio_postgres::Client) -> BTreeMap<String, i64> {
    let tables: Vec<String> = client
        .query(
            "SELECT format('%I.%I', table_schema, table_name) FROM information_schema.tables \
             WHERE table_type = 'BASE TABLE' \
               AND table_schema NOT IN ('pg_catalog', 'information_schema') \
               AND (table_schema, table_name) <> ('public', 'rejected_delivery') \
             ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        tables.iter().any(|t| t.ends_with(".webhook_event")) && tables.len() > 3,
        "{tables:?}"
    );
    let sql = tables
        .iter()
        .map(|t| format!("SELECT '{t}'::text, count(*) FROM {t}"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    client
        .query(&sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// Refused deliveries counted so far (`rejected_delivery`), all sources and hours.
pub(crate) async fn rejected_total(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one(
            "SELECT coalesce(sum(count), 0)::bigint FROM rejected_delivery",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// The valid delivery of provider `index` (0..9) from its event file, made unique by `n` and
/// signed now (a public-key source with its local private key): the "still serving" check.
fn valid_delivery(index: usize, n: usize) -> (String, Vec<u8>) {
    let files = [
        ("stripe", "receiver/stripe-payment-intent-succeeded.json"),
        ("github", "receiver/github-push.json"),
        ("shopify", "receiver/shopify-orders-create.json"),
        ("slack", "receiver/slack-app-mention.json"),
        ("paddle", "receiver/paddle-transaction-completed.json"),
        ("acme", "receiver/standard-webhooks-invoice-paid.json"),
        ("partner", "receiver/generic-partner-order-shipped.json"),
        ("discord", "receiver/discord-application-command.json"),
        ("sendgrid", "receiver/sendgrid-event-batch.json"),
    ];
    let (source, file) = files[index % files.len()];
    let mut event = EventFile::load(file).unwrap();
    let id = format!("hostile_control_{n}");
    match source {
        "github" => event.set_header("x-github-delivery", &id).unwrap(),
        "shopify" => event.set_header("x-shopify-event-id", &id).unwrap(),
        "acme" => event.set_header("webhook-id", &id).unwrap(),
        "sendgrid" => {
            // A batch: every item gets an id of its own.
            let mut body: serde_json::Value =
                serde_json::from_slice(&event.body().unwrap()).unwrap();
            for (i, item) in body.as_array_mut().unwrap().iter_mut().enumerate() {
                item["sg_event_id"] = serde_json::json!(format!("{id}_{i}"));
            }
            event.set_body(&serde_json::to_vec(&body).unwrap()).unwrap();
        }
        _ => {
            let mut body: serde_json::Value =
                serde_json::from_slice(&event.body().unwrap()).unwrap();
            let pointer = match source {
                "stripe" => "/id",
                "partner" => "/event/id",
                "discord" => "/id",
                _ => "/event_id",
            };
            *body.pointer_mut(pointer).unwrap() = serde_json::json!(id);
            event.set_body(&serde_json::to_vec(&body).unwrap()).unwrap();
        }
    }
    let config = hookledger_tests::local_source(source).unwrap();
    event.sign(&config.verifier, 0, unix_now()).unwrap();
    (
        format!("{source} {id}"),
        serde_json::to_vec(&event.json).unwrap(),
    )
}

fn reason_of(body: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let reason = value["error"].as_str()?.trim().to_owned();
    (!reason.is_empty()).then_some(reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_corpus_every_malformed_delivery_is_a_4xx_with_a_reason_and_writes_nothing() {
    let app = spawn_app().await;
    let state: &'static receiver::handler::AppState = Box::leak(Box::new(app.state.clone()));
    // Signed at the time of generation; regenerated (the same cases, signed anew) when a
    // minute has passed, so no case goes stale on a slow machine.
    let mut generated_at = unix_now();
    let mut cases: Vec<Case> = corpus(SEED, generated_at).unwrap();
    let total = cases.len();
    // Deterministic for a seed and a time, and every case named once.
    let again = corpus(SEED, generated_at).unwrap();
    assert!(
        again.len() == total
            && again
                .iter()
                .zip(&cases)
                .all(|(a, b)| a.payload == b.payload && a.name == b.name)
    );
    let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    let repeated: Vec<&str> = names
        .windows(2)
        .filter(|pair| pair[0] == pair[1])
        .map(|pair| pair[0])
        .collect();
    assert!(repeated.is_empty(), "case names are unique: {repeated:?}");
    drop(again);
    let mut findings = Vec::new();
    let mut per_category: BTreeMap<&str, usize> = BTreeMap::new();
    let mut per_scheme: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_shape: BTreeMap<String, usize> = BTreeMap::new();
    let mut signed = 0;
    let mut signed_per_scheme: BTreeMap<String, usize> = BTreeMap::new();
    let client = app.db.connect().await.unwrap();
    let mut before = table_counts(&client).await;
    let mut rejected_before = rejected_total(&client).await;
    let started = std::time::Instant::now();
    for n in 0..total {
        if unix_now() - generated_at > 60 {
            generated_at = unix_now();
            cases = corpus(SEED, generated_at).unwrap();
        }
        let case = &cases[n];
        *per_category.entry(case.category).or_default() += 1;
        *per_scheme.entry(case.scheme.clone()).or_default() += 1;
        *per_shape.entry(format!("{:?}", case.shape)).or_default() += 1;
        signed += usize::from(case.signed);
        *signed_per_scheme.entry(case.scheme.clone()).or_default() += usize::from(case.signed);
        match invoke(state, case.payload.clone()).await {
            Outcome::Answered(status, body) => {
                if status != case.expect {
                    findings.push(format!(
                        "[{}] {}: answered {status} (expected {}): {body}",
                        case.category, case.name, case.expect
                    ));
                } else if reason_of(&body).is_none() {
                    findings.push(format!(
                        "[{}] {}: {status} without a reason: {body:?}",
                        case.category, case.name
                    ));
                }
            }
            Outcome::Unreadable(error) => findings.push(format!(
                "[{}] {}: the runtime cannot read the event (invocation error, a 502): {error}",
                case.category, case.name
            )),
            Outcome::Panicked(text) => {
                findings.push(format!("[{}] {}: PANIC: {text}", case.category, case.name))
            }
        }
        // A refusal adds one count at most (none for a path or method that is no delivery).
        let rejected = rejected_total(&client).await;
        if rejected - rejected_before > 1 {
            findings.push(format!(
                "[{}] {}: counted {} refusals",
                case.category,
                case.name,
                rejected - rejected_before
            ));
        }
        rejected_before = rejected;
        let after = table_counts(&client).await;
        if after != before {
            let grown: Vec<String> = after
                .iter()
                .filter(|(t, n)| before.get(*t) != Some(n))
                .map(|(t, _)| t.clone())
                .collect();
            findings.push(format!(
                "[{}] {}: wrote rows in {grown:?}",
                case.category, case.name
            ));
            // Judge the next case on a clean database again.
            let sql = format!("TRUNCATE {} CASCADE", grown.join(", "));
            client.batch_execute(&sql).await.unwrap();
            before = table_counts(&client).await;
        }
        // After every batch of 50, the same state still serves a valid delivery.
        if (n + 1) % 50 == 0 || n + 1 == total {
            let (what, payload) = valid_delivery(n / 50, n);
            match invoke(state, payload).await {
                Outcome::Answered(200, _) => {}
                Outcome::Answered(status, body) => findings.push(format!(
                    "still serving after case {n}: {what}: {status} {body}"
                )),
                Outcome::Unreadable(e) | Outcome::Panicked(e) => {
                    findings.push(format!("still serving after case {n}: {what}: {e}"))
                }
            }
            before = table_counts(&client).await;
        }
    }
    println!(
        "hostile corpus: {} cases ({signed} correctly signed); per category {per_category:?}; \
         per scheme {per_scheme:?}; per shape {per_shape:?}; findings {}; {:.1} s",
        total,
        findings.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        findings.is_empty(),
        "{} of {} cases went wrong:\n{}",
        findings.len(),
        total,
        findings.join("\n")
    );
    assert!(total >= 500, "only {total} cases");
    // The counts stay bounded whatever the paths named: configured sources and `(unknown)`
    // only, one row per source, reason and hour.
    let stray = client
        .query(
            "SELECT DISTINCT source FROM rejected_delivery WHERE NOT source = ANY ($1)",
            &[&app
                .settings
                .sources
                .iter()
                .map(|s| s.name.clone())
                .chain([shared::rejected::UNKNOWN_SOURCE.to_owned()])
                .collect::<Vec<_>>()],
        )
        .await
        .unwrap();
    assert!(stray.is_empty(), "{stray:?}");
    let hours: i64 = client
        .query_one("SELECT count(DISTINCT bucket) FROM rejected_delivery", &[])
        .await
        .unwrap()
        .get(0);
    let rows = client
        .query_one("SELECT count(*) FROM rejected_delivery", &[])
        .await
        .unwrap()
        .get::<_, i64>(0);
    let keys = (app.settings.sources.iter().count() as i64 + 1) * 5;
    assert!(rows <= keys * hours, "{rows} rows in {hours} hours");
    assert!(rejected_before > 0, "no refusal counted");
    for scheme in [
        "stripe",
        "github",
        "shopify",
        "slack",
        "paddle",
        "standard-webhooks",
        "generic-hmac",
        "discord",
        "sendgrid",
    ] {
        assert!(
            per_scheme.get(scheme).copied().unwrap_or(0) >= 50,
            "{scheme}: {per_scheme:?}"
        );
    }
    assert!(signed >= 100, "only {signed} correctly signed cases");
    // The public-key sources are signed with their local private keys: their correctly signed
    // cases reach extraction (and SendGrid's its batch splitter).
    for scheme in ["discord", "sendgrid"] {
        assert!(
            signed_per_scheme.get(scheme).copied().unwrap_or(0) >= 30,
            "{scheme}: {signed_per_scheme:?}"
        );
    }
    assert!(
        per_category.get("batch").copied().unwrap_or(0) >= 40
            && per_category
                .get("public-key signature")
                .copied()
                .unwrap_or(0)
                >= 40,
        "{per_category:?}"
    );
}

/// An event whose header holds a CR/LF: lambda_http alone cannot read it (an invocation error,
/// API Gateway's 502); through `ReadableEvent` it is a 400 naming the header as malformed, in
/// every event shape, and the marker cannot be forged to refuse a valid delivery.
#[tokio::test]
async fn an_event_with_a_control_character_in_a_header_is_a_400_not_an_invocation_error() {
    let app = spawn_app().await;
    let state: &'static receiver::handler::AppState = Box::leak(Box::new(app.state.clone()));
    let stripe = hookledger_tests::local_source("stripe").unwrap();
    for file in [
        "receiver/stripe-payment-intent-succeeded.json",
        "receiver/stripe-payment-intent-succeeded.rest-v1.json",
    ] {
        let mut event = EventFile::load(file).unwrap();
        event.sign(&stripe.verifier, 0, unix_now()).unwrap();
        let signature = event.headers()["stripe-signature"].clone();
        for bad in [
            format!("{signature}\r\nx-injected: 1"),
            format!("{signature}\u{0}"),
        ] {
            let mut bad_event = event.clone();
            bad_event.set_header("stripe-signature", &bad).unwrap();
            let text = bad_event.json.to_string();
            assert!(
                serde_json::from_str::<lambda_http::request::LambdaRequest>(&text).is_err(),
                "{file}: lambda_http reads it now: the guard may go"
            );
            match invoke(state, text.into_bytes()).await {
                Outcome::Answered(400, body) => {
                    assert!(body.contains("malformed header"), "{body}")
                }
                Outcome::Answered(status, body) => panic!("{file}: {status} {body}"),
                Outcome::Unreadable(e) | Outcome::Panicked(e) => panic!("{file}: {e}"),
            }
        }
        // A sender's own marker is dropped: the valid delivery is processed.
        let mut forged = event.clone();
        forged
            .set_header(receiver::unreadable::MALFORMED_HEADER_MARKER, "1")
            .unwrap();
        match invoke(state, forged.json.to_string().into_bytes()).await {
            Outcome::Answered(status, body) => {
                assert!(status == 200, "{file}: {status} {body}")
            }
            Outcome::Unreadable(e) | Outcome::Panicked(e) => panic!("{file}: {e}"),
        }
    }
    assert_eq!(app.ledger_rows().await, 1);
    assert_eq!(app.order_rows().await, 1);
}

/// SQL metacharacters in a correctly signed event id are a valid id, not an attack on the
/// ledger: stored byte for byte (every statement is parameterized), replayed as a duplicate, and
/// every table is still there.
#[tokio::test]
async fn a_signed_event_id_full_of_sql_metacharacters_is_stored_verbatim() {
    let app = spawn_app().await;
    let ids = [
        "'; DROP TABLE webhook_event; --",
        "evt\" OR 1=1 --",
        "$1); DELETE FROM orders; --",
        "evt_1'||pg_sleep(10)||'",
        "\\x00; TRUNCATE webhook_event",
    ];
    for (n, id) in ids.iter().enumerate() {
        let delivery = stripe_payment(id, &format!("ord_sql_{n}"), 100, NOW);
        let first = app.receive("stripe", &delivery).await;
        assert_eq!(first.status, 200, "{id}: {first:?}");
        let again = app.receive("stripe", &delivery).await;
        assert!(again.replayed, "{id}: {again:?}");
        // A body of its own each: the same GitHub body under another delivery id is the
        // first event's duplicate (the replay guard, `body_replay`).
        let github_delivery = github(id, "ping", &format!(r#"{{"zen":"x{n}"}}"#));
        assert_eq!(
            app.receive("github", &github_delivery).await.status,
            200,
            "{id}"
        );
    }
    let stored = app
        .texts("SELECT event_id FROM webhook_event WHERE source = 'stripe' ORDER BY claimed_at")
        .await;
    assert_eq!(stored, ids);
    assert_eq!(app.ledger_rows().await, 10);
    assert_eq!(app.order_rows().await, 5);
}
