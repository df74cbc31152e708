//! A hostile review of payload privacy (issue 28, docs/operations/privacy.md): inputs and
//! requests built to make a redacted value reach the table, to make erasure by subject miss
//! (or over-reach) a subject's events, or to make an erasure request echo the subject's
//! identifier. The tests that fail name a promise of the privacy page that does not hold; the
//! ones that pass document an attack that is refused.

use hookledger_tests::PAYLOAD_MARKER as MARK;
use serde_json::json;
use shared::forget::{Erasure, ForgetReport, Target};
use shared::privacy::redact::Redaction;

use crate::helpers::*;

const SUBJECT_KEY: &str = "hostile-review-subject-key-0123456789";

async fn stored(app: &TestApp, source: &str, event_id: &str) -> Option<String> {
    let client = app.db.connect().await.unwrap();
    client
        .query_one(
            "SELECT convert_from(payload, 'UTF8') FROM webhook_event
             WHERE source = $1 AND event_id = $2",
            &[&source, &event_id],
        )
        .await
        .unwrap()
        .get(0)
}

fn subject_hash(app: &TestApp, source: &str, identifier: &str) -> [u8; 32] {
    app.settings
        .sources
        .get(source)
        .and_then(|config| config.subject.as_ref())
        .expect("the source names subjects")
        .hash(identifier)
}

async fn forget(app: &TestApp, target: &Target) -> ForgetReport {
    let conn = app.receiver().pool.get().await.unwrap();
    let erasure = Erasure::new("ops: hostile review", Some("erasure request")).unwrap();
    shared::forget::forget(&conn, target, &erasure, 500, 100)
        .await
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// GitHub form-encoded deliveries (`payload=<json>`): the document handlers and `redact`
// pointers address is the JSON in the `payload` field, but redaction and the subject hash are
// computed over the form body.

/// A GitHub source that redacts the pusher's e-mail and names the sender as the subject.
fn github_source() -> serde_json::Value {
    json!({"name": "ghpriv", "scheme": "github", "secrets": [GITHUB_SECRET], "mode": "inline",
           "redact": ["/pusher/email"],
           "subject": {"pointers": ["/sender/login"], "key": SUBJECT_KEY}})
}

fn push_json() -> String {
    json!({"ref": "refs/heads/main",
           "pusher": {"name": "octo", "email": format!("{MARK}@example.com")},
           "sender": {"login": "octocat"}})
    .to_string()
}

/// The same push as GitHub sends it with the webhook's content type
/// `application/x-www-form-urlencoded`.
fn push_form() -> Delivery {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &push_json())
        .finish();
    let mut delivery = github("11111111-2222-3333-4444-555555555555", "push", &body);
    delivery.headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/x-www-form-urlencoded"),
    );
    delivery
}

#[tokio::test]
async fn a_github_json_push_is_stored_with_its_redacted_field_replaced() {
    // Control: the JSON content type is redacted and names its subject.
    let (app, _) = spawn_app_with_sources(json!([github_source()])).await;
    let delivery = github("aaaaaaaa-2222-3333-4444-555555555555", "push", &push_json());
    assert_eq!(app.receive("ghpriv", &delivery).await.status, 200);
    let payload = stored(&app, "ghpriv", "aaaaaaaa-2222-3333-4444-555555555555")
        .await
        .expect("a stored payload");
    assert!(!payload.contains(MARK), "{payload}");
    assert!(payload.contains("[redacted]"), "{payload}");
}

#[tokio::test]
async fn a_github_form_encoded_push_never_stores_its_redacted_field() {
    let (app, _) = spawn_app_with_sources(json!([github_source()])).await;
    assert_eq!(app.receive("ghpriv", &push_form()).await.status, 200);
    let payload = stored(&app, "ghpriv", "11111111-2222-3333-4444-555555555555")
        .await
        .unwrap_or_default();
    // privacy.md: "A source's redact lists the fields whose values the ledger never keeps".
    assert!(
        !payload.contains(MARK),
        "the redacted e-mail is stored in the clear: {payload}"
    );
}

#[tokio::test]
async fn a_github_form_encoded_push_is_found_by_its_subject() {
    let (app, _) = spawn_app_with_sources(json!([github_source()])).await;
    assert_eq!(app.receive("ghpriv", &push_form()).await.status, 200);
    let hash = subject_hash(&app, "ghpriv", "octocat");
    let report = forget(
        &app,
        &Target::Subject {
            source: "ghpriv".into(),
            hash,
        },
    )
    .await;
    // The payload names the subject at /sender/login, as its JSON twin does.
    assert_eq!(
        report.erased, 1,
        "forget --subject octocat missed the form-encoded event: {report:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The subject hash of a number: "a number as written" (privacy/subject.rs), but serde_json
// without arbitrary_precision reads a number beyond u64/i64 as an f64.

fn numbered_source() -> serde_json::Value {
    let mut source = standard_source("numsubj", "inline", json!([]));
    source["subject"] = json!({"pointers": ["/data/customer/id"], "key": SUBJECT_KEY});
    source
}

fn numbered_order(customer_number: &str) -> String {
    format!(r#"{{"type":"order.paid","data":{{"customer":{{"id":{customer_number}}}}}}}"#)
}

#[tokio::test]
async fn a_subject_named_by_a_long_number_is_found_by_that_number_as_written() {
    let (app, _) = spawn_app_with_sources(json!([numbered_source()])).await;
    let customer = "12345678901234567890123";
    let delivery = standard("msg_n1", &numbered_order(customer), NOW);
    assert_eq!(app.receive("numsubj", &delivery).await.status, 200);
    let report = forget(
        &app,
        &Target::Subject {
            source: "numsubj".into(),
            hash: subject_hash(&app, "numsubj", customer),
        },
    )
    .await;
    assert_eq!(
        report.erased, 1,
        "forget --subject {customer} missed the customer's event: {report:?}"
    );
}

#[tokio::test]
async fn two_customers_whose_long_numbers_differ_do_not_share_a_subject_hash() {
    let (app, _) = spawn_app_with_sources(json!([numbered_source()])).await;
    for (id, customer) in [
        ("msg_c1", "12345678901234567890123"),
        ("msg_c2", "12345678901234567890124"),
    ] {
        let delivery = standard(id, &numbered_order(customer), NOW);
        assert_eq!(app.receive("numsubj", &delivery).await.status, 200);
    }
    assert_eq!(
        app.count(
            "SELECT count(DISTINCT subject_hash) FROM webhook_event WHERE source = 'numsubj'"
        )
        .await,
        2,
        "two customers got one subject hash: forgetting one erases the other's events"
    );
}

// ---------------------------------------------------------------------------------------------
// The replay function's forget input must never echo the subject's identifier.

#[tokio::test]
async fn a_numeric_subject_in_the_replay_functions_forget_input_is_not_echoed_in_its_error() {
    let (app, _) = spawn_app_with_sources(json!([numbered_source()])).await;
    let state = ::replay::handler::AppState::new(
        &app.settings,
        app.receiver().pool.clone(),
        handlers::examples::registry(&app.settings.sources),
    )
    .unwrap();
    // The subject pointer accepts numbers, so an operator passes the customer number as one.
    let input = json!({"forget": {"source": "numsubj", "subject": 987654321987u64,
                                  "by": "ops: ticket PRIV-9"}});
    let outcome =
        ::replay::handler::handle(&state, input, || std::time::Duration::from_secs(600)).await;
    let text = match outcome {
        Ok(report) => report.to_string(),
        Err(error) => error.to_string(),
    };
    assert!(
        !text.contains("987654321987"),
        "the subject's identifier is echoed (Lambda logs the error): {text}"
    );
}

// ---------------------------------------------------------------------------------------------
// Attacks that are refused.

fn redacting_source() -> serde_json::Value {
    let mut source = standard_source("hostred", "inline", json!([]));
    source["redact"] = json!(["/data/customer/email", "/data/items/*/name"]);
    source["subject"] = json!({"pointers": ["/data/customer/id"], "key": SUBJECT_KEY});
    source
}

#[tokio::test]
async fn duplicate_members_and_escaped_member_names_are_redacted_everywhere() {
    let (app, _) = spawn_app_with_sources(json!([redacting_source()])).await;
    // serde_json's Value keeps the last duplicate; a different parser may keep the first: both
    // are redacted, as is a name spelled with escapes (`em\u0061il`, `\/`-free but escaped).
    let body = format!(
        r#"{{"type":"order.paid",
            "data":{{"customer":{{"email":"{MARK}-first","id":"cus_1"}},
                     "items":[{{"n\u0061me":"{MARK}-item"}}]}},
            "data":{{"customer":{{"em\u0061il":"{MARK}-second","email":"{MARK}-third"}}}}}}"#
    );
    let delivery = standard("msg_dup", &body, NOW);
    assert_eq!(app.receive("hostred", &delivery).await.status, 200);
    let payload = stored(&app, "hostred", "msg_dup")
        .await
        .expect("a stored payload");
    assert!(!payload.contains(MARK), "{payload}");
    assert_eq!(payload.matches("[redacted]").count(), 4, "{payload}");
}

#[tokio::test]
async fn a_scalar_or_too_deep_body_is_refused_before_anything_is_stored() {
    let (app, _) = spawn_app_with_sources(json!([redacting_source()])).await;
    let scalar = standard("msg_scalar", &format!(r#""{MARK}@example.com""#), NOW);
    assert_eq!(app.receive("hostred", &scalar).await.status, 400);
    let deep = format!(
        r#"{{"type":"order.paid","data":{{"customer":{{"email":"{MARK}"}}}},"x":{}1{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let deep = standard("msg_deep", &deep, NOW);
    assert_eq!(app.receive("hostred", &deep).await.status, 400);
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE source = 'hostred'")
            .await,
        0
    );
}

#[test]
fn a_form_body_with_repeated_and_percent_encoded_fields_is_redacted_in_every_copy() {
    let redaction = Redaction::new(&["/Body".to_owned()]).unwrap();
    let body = format!("From=%2B31600000000&Body={MARK}-1&B%6Fdy={MARK}-2&Body={MARK}-3");
    let copy = redaction.apply(body.as_bytes()).unwrap();
    let copy = String::from_utf8(copy.into_owned()).unwrap();
    assert!(!copy.contains(MARK), "{copy}");
    assert!(copy.starts_with("From=%2B31600000000&"), "{copy}");
}

#[test]
fn a_body_that_starts_like_json_but_is_not_is_never_kept_unredacted() {
    let redaction = Redaction::new(&["/data/customer/email".to_owned()]).unwrap();
    for body in [
        format!(r#"{{"data":{{"customer":{{"email":"{MARK}"}}}}"#), // unterminated
        format!(r#"  [{{"email":"{MARK}"}}] trailing"#),
        format!("{{\"data\":{{\"customer\":{{\"email\":\"{MARK}\"}}}}}}\u{0}"),
    ] {
        assert!(redaction.apply(body.as_bytes()).is_err(), "{body}");
    }
}

#[tokio::test]
async fn an_event_id_built_as_sql_erases_nothing_but_itself() {
    let (app, _) = spawn_app_with_sources(json!([redacting_source()])).await;
    for id in ["msg_q1", "msg_q2"] {
        let body = json!({"type": "order.paid", "data": {"customer": {"id": "cus_1"}}});
        let delivery = standard(id, &body.to_string(), NOW);
        assert_eq!(app.receive("hostred", &delivery).await.status, 200);
    }
    for hostile in [
        "msg_q1' OR '1'='1",
        "msg_q%",
        "msg_q1'; DELETE FROM webhook_event; --",
    ] {
        let report = forget(
            &app,
            &Target::Event {
                source: "hostred".into(),
                event_id: hostile.into(),
            },
        )
        .await;
        assert_eq!((report.events, report.erased), (0, 0), "{hostile}");
    }
    assert_eq!(
        app.count(
            "SELECT count(*) FROM webhook_event WHERE payload IS NOT NULL AND source = 'hostred'"
        )
        .await,
        2
    );
}

#[tokio::test]
async fn a_subject_is_found_whether_the_payload_writes_it_as_a_string_or_with_escapes() {
    let (app, _) = spawn_app_with_sources(json!([redacting_source()])).await;
    let plain = r#"{"type":"order.paid","data":{"customer":{"id":"cus_\u00e9A"}}}"#;
    let escaped = r#"{"type":"order.paid","data":{"customer":{"id":"\u0063us_éA"}}}"#;
    for (id, body) in [("msg_s1", plain), ("msg_s2", escaped)] {
        assert_eq!(
            app.receive("hostred", &standard(id, body, NOW))
                .await
                .status,
            200
        );
    }
    let report = forget(
        &app,
        &Target::Subject {
            source: "hostred".into(),
            hash: subject_hash(&app, "hostred", "cus_éA"),
        },
    )
    .await;
    assert_eq!(report.erased, 2, "{report:?}");
}
