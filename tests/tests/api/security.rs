//! Security checks of issue 13: no code path records a ledger row without a verified signature
//! or an authenticated provider API read, one test per entry point, and a structural guard so
//! that a new way into the ledger cannot appear untested.
//!
//! | entry point | ledger INSERT it reaches | test |
//! |---|---|---|
//! | receiver, inline, one statement (`plain_sql` handler: Stripe `payment_intent.succeeded`) | `ledger/one_statement.rs` | [`receiver_entry_points_record_nothing_without_a_verified_signature`] (and the 806 cases of `hostile::hostile_corpus_*`) |
//! | receiver, inline, claim then handler (Stripe `customer.subscription.created`) | `ledger/claim.rs` `CLAIM` | same test |
//! | receiver, inline, fatal handler kept `dead` | `ledger/claim.rs` `RECORD_DEAD` | same test |
//! | receiver, inline with outbox targets (`acme-forward`) | `CLAIM` / one statement, and `outbox` | same test |
//! | receiver, deferred (`stripe-deferred`) | `ledger/deferred.rs` | same test |
//! | receiver, shadow mode | `CLAIM` (duplicates reprocessed) | same test |
//! | replay library (`shared::replay`, Stripe and Paddle with a refused key; GitHub replays by redelivery, which is signed) | `Receiver::replay` -> the same inserts | `replay::no_path_records_a_ledger_row_without_a_verified_signature_or_an_authenticated_read` |
//! | replay function (`functions/replay`) | the same | [`the_replay_function_with_a_refused_api_key_records_nothing`] |
//! | CLI `hookledger replay` | the same | `cli/tests/replay.rs` `hookledger_replay_with_a_refused_key_fails_in_one_line_without_the_key` |
//! | worker, redrive, sweep, auditor, outbox dispatch | none: they update or delete existing rows | [`only_the_reviewed_sites_insert_into_the_ledger`] (structural) |
//! | template least privilege | | `template::template_function_roles_have_exactly_the_expected_actions` |
//!
//! The fake providers (`hookledger_tests::fake_providers`) check the credential of every request
//! and answer 401 to a wrong one.

use std::collections::BTreeMap;
use std::sync::Arc;

use hookledger_tests::fake_providers::{serve_fixture, StripeEvents};
use hookledger_tests::{local_sources_json, verifier_with_secret, EventFile};
use hookledger_verify::Verifier;
use serde_json::{json, Value};
use shared::ledger::Tx;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};

use crate::helpers::*;
use crate::hostile::{invoke, rejected_total, table_counts, unix_now, Outcome};

/// Always fatal: the inline event is kept `dead` through `RECORD_DEAD`.
struct AlwaysFatal;

#[async_trait::async_trait]
impl Handler for AlwaysFatal {
    async fn handle(&self, _: &mut Tx<'_>, _: &Event<'_>) -> Result<Effect, HandlerError> {
        Err(HandlerError::fatal("this event can never be processed"))
    }
}

const SHADOW_SECRET: &str = "whsec_hookledger_security_shadow_secret";
const FATAL_SECRET: &str = "whsec_hookledger_security_fatal_secret";

/// One receiver entry point: the source it is configured as and the event file it starts from.
struct Entry {
    what: &'static str,
    source: &'static str,
    file: &'static str,
    /// The ledger status a verified delivery leaves.
    status: &'static str,
}

const ENTRIES: [Entry; 6] = [
    Entry {
        what: "inline, one statement",
        source: "stripe",
        file: "receiver/stripe-payment-intent-succeeded.json",
        status: "completed",
    },
    Entry {
        what: "inline, claim then handler",
        source: "stripe",
        file: "receiver/stripe-subscription-v1-created.json",
        status: "completed",
    },
    Entry {
        what: "inline, fatal handler (dead)",
        source: "stripe-fatal",
        file: "receiver/stripe-payment-intent-succeeded.json",
        status: "dead",
    },
    Entry {
        what: "inline with an outbox target",
        source: "acme-forward",
        file: "receiver/acme-forward-invoice-paid.json",
        status: "completed",
    },
    Entry {
        what: "deferred",
        source: "stripe-deferred",
        file: "receiver/stripe-deferred-payment-intent-succeeded.json",
        status: "claimed",
    },
    Entry {
        what: "shadow",
        source: "stripe-shadow",
        file: "receiver/stripe-payment-intent-succeeded.json",
        status: "completed",
    },
];

/// `file` sent to `/webhooks/{source}` with the event id `id` (Stripe: the body's `id`;
/// Standard Webhooks: `webhook-id`), signed by `verifier` at `at` (unless `verifier` is None).
fn delivery(file: &str, source: &str, id: &str, verifier: Option<&Verifier>, at: i64) -> EventFile {
    let mut event = EventFile::load(file).unwrap();
    let path = format!("/webhooks/{source}");
    event.json["rawPath"] = json!(path);
    event.json["requestContext"]["http"]["path"] = json!(path);
    if event.headers().contains_key("webhook-id") {
        event.set_header("webhook-id", id).unwrap();
    } else {
        let mut body: Value = serde_json::from_slice(&event.body().unwrap()).unwrap();
        body["id"] = json!(id);
        event.set_body(&serde_json::to_vec(&body).unwrap()).unwrap();
    }
    if let Some(verifier) = verifier {
        event.sign(verifier, 0, at).unwrap();
    }
    event
}

/// Each receiver entry point refuses every forged delivery with 401 and writes no row in any
/// table but one count of the refusal (`rejected_delivery`); the same delivery correctly signed
/// is recorded (so the entry point does write, and the zero above means something).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receiver_entry_points_record_nothing_without_a_verified_signature() {
    let (mut app, _) = spawn_app_with_sources(json!([
        {"name": "stripe-shadow", "scheme": "stripe", "secrets": [SHADOW_SECRET], "shadow": true},
        {"name": "stripe-fatal", "scheme": "stripe", "secrets": [FATAL_SECRET]},
    ]))
    .await;
    app.state.receiver.handlers.register(
        "stripe-fatal",
        "payment_intent.succeeded",
        Arc::new(AlwaysFatal) as Arc<dyn Handler>,
    );
    let state: &'static receiver::handler::AppState = Box::leak(Box::new(app.state.clone()));
    let client = app.db.connect().await.unwrap();
    let sources = app.settings.sources.clone();
    let other_source = hookledger_tests::local_source("stripe").unwrap();
    for (n, entry) in ENTRIES.iter().enumerate() {
        let config = sources.get(entry.source).unwrap();
        let verifier = &config.verifier;
        let id = format!("evt_security_{n}");
        let now = unix_now();
        let wrong_secret = verifier_with_secret(
            config,
            if entry.source == "acme-forward" {
                "whsec_d3JvbmcgZm9yIHRoZSBzZWN1cml0eSB0ZXN0"
            } else {
                "whsec_wrong_for_the_security_test"
            },
        )
        .unwrap();
        let signed = delivery(entry.file, entry.source, &id, Some(verifier), now);
        let signature_header = verifier.signature_header().to_owned();
        let mut forged: Vec<(&str, EventFile)> = Vec::new();
        let mut unsigned = signed.clone();
        for (name, _) in verifier.sign(0, "x", now, b"") {
            if name != "webhook-id" {
                unsigned.json["headers"]
                    .as_object_mut()
                    .unwrap()
                    .remove(&name);
            }
        }
        forged.push(("unsigned", unsigned));
        let mut flipped = signed.clone();
        let value = signed.headers()[&signature_header].clone();
        let at = value.trim_end_matches('=').len() - 1;
        let mut chars: Vec<char> = value.chars().collect();
        chars[at] = if chars[at] == '0' { '1' } else { '0' };
        flipped
            .set_header(&signature_header, &chars.into_iter().collect::<String>())
            .unwrap();
        forged.push(("one signature character changed", flipped));
        forged.push((
            "signed with another secret",
            delivery(entry.file, entry.source, &id, Some(&wrong_secret), now),
        ));
        if entry.source.starts_with("stripe-") {
            forged.push((
                "signed with the stripe source's secret",
                delivery(
                    entry.file,
                    entry.source,
                    &id,
                    Some(&other_source.verifier),
                    now,
                ),
            ));
        }
        let mut body_swapped = signed.clone();
        let mut body: Value = serde_json::from_slice(&signed.body().unwrap()).unwrap();
        body["forged"] = json!(true);
        body_swapped
            .set_body(&serde_json::to_vec(&body).unwrap())
            .unwrap();
        forged.push(("the signature of another body", body_swapped));
        forged.push((
            "signed an hour ago",
            delivery(entry.file, entry.source, &id, Some(verifier), now - 3_600),
        ));
        let before: BTreeMap<String, i64> = table_counts(&client).await;
        let forged_count = forged.len() as i64;
        let rejected = rejected_total(&client).await;
        for (how, event) in forged {
            match invoke(state, event.json.to_string().into_bytes()).await {
                Outcome::Answered(401, _) => {}
                Outcome::Answered(status, body) => {
                    panic!("{} ({}), {how}: {status} {body}", entry.what, entry.source)
                }
                Outcome::Unreadable(e) | Outcome::Panicked(e) => {
                    panic!("{} ({}), {how}: {e}", entry.what, entry.source)
                }
            }
            assert_eq!(
                table_counts(&client).await,
                before,
                "{} ({}), {how}: a row was written",
                entry.what,
                entry.source
            );
        }
        // Each forgery is counted as a refusal, and that is all it leaves.
        assert_eq!(
            rejected_total(&client).await - rejected,
            forged_count,
            "{} ({})",
            entry.what,
            entry.source
        );
        // Correctly signed, the same entry point records the event.
        match invoke(state, signed.json.to_string().into_bytes()).await {
            Outcome::Answered(status, body) => {
                assert!(
                    (200..300).contains(&status),
                    "{}: {status} {body}",
                    entry.what
                )
            }
            Outcome::Unreadable(e) | Outcome::Panicked(e) => panic!("{}: {e}", entry.what),
        }
        let status: String = client
            .query_one(
                "SELECT status::text FROM webhook_event WHERE source = $1 AND event_id = $2",
                &[&entry.source, &id],
            )
            .await
            .unwrap_or_else(|e| panic!("{}: no row after a verified delivery: {e}", entry.what))
            .get(0);
        assert_eq!(status, entry.status, "{}", entry.what);
        if entry.source == "acme-forward" {
            let messages: i64 = client
                .query_one("SELECT count(*) FROM outbox", &[])
                .await
                .unwrap()
                .get(0);
            assert!(messages >= 1, "the forward target got no outbox message");
        }
    }
}

/// The replay function (functions/replay), the entry point operators invoke: with an API key
/// the provider refuses it fails, naming the source, and records nothing; with the right key
/// the same run records the events (so the zero means something).
#[tokio::test]
async fn the_replay_function_with_a_refused_api_key_records_nothing() {
    const KEY: &str = "rk_test_hookledger_security_replay_key";
    let newest = unix_now() - 60;
    let events: Vec<Value> = (0..3)
        .map(|n| {
            json!({
                "id": format!("evt_sec_{n}"), "object": "event", "api_version": "2024-06-20",
                "created": newest - n, "livemode": false, "pending_webhooks": 0,
                "type": "payment_intent.succeeded",
                "data": {"object": {"id": format!("pi_sec_{n}"), "object": "payment_intent",
                    "amount": 100, "amount_received": 100, "currency": "usd",
                    "metadata": {"order_id": format!("ord_sec_{n}")}}}
            })
        })
        .collect();
    let fixture = StripeEvents::new(KEY, events);
    let server = serve_fixture(move |r| fixture.answer(r), None)
        .await
        .unwrap();
    for (key, expect_rows) in [("rk_test_revoked_security_key", 0), (KEY, 3)] {
        let mut sources: Vec<Value> = serde_json::from_str(&local_sources_json().unwrap()).unwrap();
        let stripe = sources.iter_mut().find(|s| s["name"] == "stripe").unwrap();
        stripe["api_key"] = json!(key);
        stripe["api_base_url"] = json!(server.base_url);
        let db = hookledger_tests::test_db().await.unwrap();
        let database = db.settings(4);
        let app = spawn_app_over_sources(db, database, &Value::Array(sources).to_string());
        let state = ::replay::handler::AppState::new(
            &app.settings,
            app.receiver().pool.clone(),
            handlers::examples::registry(&app.settings.sources),
        )
        .unwrap();
        let since = shared::timestamp::rfc3339(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs((newest - 3_600) as u64),
        );
        let outcome = ::replay::handler::handle(
            &state,
            json!({"source": "stripe", "since": since, "dry_run": false}),
            || std::time::Duration::from_secs(600),
        )
        .await;
        if expect_rows == 0 {
            let error = outcome
                .expect_err("a refused key must fail the run")
                .to_string();
            assert!(error.contains("stripe"), "{error}");
            assert!(!error.contains(key), "the key leaked: {error}");
        } else {
            outcome.unwrap();
        }
        assert_eq!(app.ledger_rows().await, expect_rows, "key {key}");
    }
}

/// The SQL statements that insert ledger rows, where they are allowed: each is reached only
/// through `shared::receive::Receiver` after a verified signature (`decide`) or an authenticated
/// API read (`replay`), and each is covered by a test in the table above. A new site fails this
/// test until it is added here with its test.
const REVIEWED_INSERT_SITES: [(&str, usize); 3] = [
    // CLAIM and RECORD_DEAD.
    ("shared/src/ledger/claim.rs", 2),
    ("shared/src/ledger/deferred.rs", 1),
    // The statement, and its sketch in the module docs.
    ("shared/src/ledger/one_statement.rs", 2),
];

/// The ledger functions that run those statements, and where they may be called from.
const REVIEWED_CALLERS: [(&str, &str, usize); 6] = [
    ("ledger::claim(", "shared/src/receive/inline.rs", 1),
    // A batch's items: `Receiver::process_batch` is reached only from `process`, after the
    // delivery's signature verified, as inline and deferred are (the hostile corpus's batch
    // cases: an unsigned or altered batch writes nothing).
    ("ledger::claim(", "shared/src/receive/batch.rs", 1),
    ("claim_and_complete_all(", "shared/src/receive/batch.rs", 2),
    ("ledger::accept(", "shared/src/receive/deferred.rs", 1),
    ("ledger::record_dead(", "shared/src/receive/inline.rs", 1),
    (
        "one_statement::claim_and_complete(",
        "shared/src/receive/one_statement.rs",
        1,
    ),
];

/// Every `.rs`, `.sql` and `.py` file under `dir`, recursively.
fn sources_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path
                .file_name()
                .is_some_and(|n| n == "target" || n == "tests")
            {
                continue;
            }
            sources_under(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| e == "rs" || e == "sql" || e == "py" || e == "sh")
        {
            out.push(path);
        }
    }
}

/// The deployed code (shared, the functions, the CLI, the handlers crate and the migrations) is
/// scanned for SQL inserting into `webhook_event` and for calls of the ledger functions that run
/// it. The benchmark's seeding (dev/bench/) and the tests are not deployed and not scanned.
#[test]
fn only_the_reviewed_sites_insert_into_the_ledger() {
    let root = hookledger_tests::repo_root();
    let mut files = Vec::new();
    for dir in ["shared", "functions", "cli", "handlers", "migrations"] {
        sources_under(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 50,
        "only {} files found under {root:?}",
        files.len()
    );
    // INSERT INTO [public.]webhook_event, any case and spacing, quoted or not; a table named
    // webhook_event_something is another table.
    let insert = |text: &str| -> usize {
        let lower = text.to_ascii_lowercase();
        let words: Vec<&str> = lower.split_whitespace().collect();
        words
            .windows(3)
            .filter(|w| {
                let table = w[2]
                    .trim_start_matches("public.")
                    .trim_start_matches("\"public\".")
                    .trim_matches('"');
                let table = table.split(['(', ';']).next().unwrap_or("");
                w[0].ends_with("insert") && w[1] == "into" && table == "webhook_event"
            })
            .count()
            + lower.matches("copy webhook_event").count()
    };
    let mut found: BTreeMap<String, usize> = BTreeMap::new();
    let mut callers: BTreeMap<(String, String), usize> = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let rel = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let n = insert(&text);
        if n > 0 {
            found.insert(rel.clone(), n);
        }
        if rel.starts_with("shared/src/ledger/") {
            continue; // the definitions, and their own unit tests
        }
        for (call, _, _) in REVIEWED_CALLERS {
            let n = text.matches(call).count();
            if n > 0 {
                callers.insert((call.to_owned(), rel.clone()), n);
            }
        }
    }
    let expected: BTreeMap<String, usize> = REVIEWED_INSERT_SITES
        .iter()
        .map(|(f, n)| (f.to_string(), *n))
        .collect();
    assert_eq!(
        found, expected,
        "the SQL inserting ledger rows moved or a new site appeared: add a test proving it \
         records nothing without a verified signature or an authenticated API read \
         (tests/tests/api/security.rs), then list the site here"
    );
    let expected_callers: BTreeMap<(String, String), usize> = REVIEWED_CALLERS
        .iter()
        .map(|(c, f, n)| ((c.to_string(), f.to_string()), *n))
        .collect();
    assert_eq!(
        callers, expected_callers,
        "a ledger insert is called from a new place: prove it is reached only after \
         verification (tests/tests/api/security.rs), then list it here"
    );
    // In the receive path (shared/src/receive.rs and shared/src/receive/), the only ways to
    // `process` (which calls them) are after the signature check (`decide`) and from `replay`.
    let mut receive = vec![root.join("shared/src/receive.rs")];
    sources_under(&root.join("shared/src/receive"), &mut receive);
    assert!(receive.len() > 2, "the receive path's files: {receive:?}");
    let process_calls: usize = receive
        .iter()
        .map(|file| {
            std::fs::read_to_string(file)
                .unwrap()
                .matches("self.process(")
                .count()
        })
        .sum();
    assert_eq!(
        process_calls, 2,
        "Receiver::process gained a caller: review it and this test"
    );
}
