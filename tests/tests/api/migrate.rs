//! The migrate function (the CloudFormation custom resource `Custom::HookledgerSchema`) on real
//! PostgreSQL, answering a local HTTP server that stands in for the presigned S3 URL, with the
//! login secrets in the local AWS emulator (moto).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use hookledger_tests::fake_providers::{Answer, FakeServer, Request};
use hookledger_tests::TestDb;
use lambda_runtime::{Context, LambdaEvent};
use migrate::custom_resource::ResponseUrls;
use migrate::handler::{function_handler, AppState};
use migrate::resource::SchemaResource;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use shared::config::DatabaseSettings;
use shared::db::MigrationSet;

use crate::roles::user_url;

static NEXT: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn unique(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The stand-in for S3: answers `status` to every request, recording it.
pub(crate) async fn s3(status: u16) -> FakeServer {
    FakeServer::start(move |_| Answer::raw(status, ""))
        .await
        .unwrap()
}

/// A request of `request_type` answering to `server`, with `properties`.
pub(crate) fn request(server: &FakeServer, request_type: &str, properties: Value) -> Value {
    json!({
        "RequestType": request_type,
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:migrate",
        "ResponseURL": format!("{}/cfn/response?X-Amz-Signature=abc", server.base_url),
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/hookledger/1",
        "RequestId": unique("req"),
        "LogicalResourceId": "Schema",
        "PhysicalResourceId": "hookledger-schema",
        "ResourceType": "Custom::HookledgerSchema",
        "ResourceProperties": properties,
    })
}

/// The migrate function's state over `database` with `sets` (after the ledger's) and the
/// emulator's Secrets Manager.
pub(crate) async fn state(database: DatabaseSettings, sets: Vec<MigrationSet>) -> AppState {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let secrets = shared::secrets::Secrets::from_env().await;
    let mut resource = SchemaResource::new(Ok(database), Some(secrets), sets).unwrap();
    resource.response_urls = ResponseUrls::AlsoLoopbackForTests;
    AppState { resource }
}

/// Invokes the function handler with `event` and `secs` of invocation time.
pub(crate) async fn invoke(state: &AppState, event: Value, secs: u64) -> Result<Value, String> {
    let mut context = Context::default();
    context.deadline = (SystemTime::now() + Duration::from_secs(secs))
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    function_handler(state, LambdaEvent::new(event, context))
        .await
        .map_err(|e| e.to_string())
}

/// The one answer `server` received: checked to be a PUT with an empty content type and the
/// documented fields, returned as JSON.
fn answer(server: &FakeServer, event: &Value) -> Value {
    let requests: Vec<Request> = server.requests();
    assert_eq!(requests.len(), 1, "one answer: {requests:?}");
    let put = &requests[0];
    assert_eq!(put.method, "PUT");
    assert_eq!(put.path, "/cfn/response");
    assert_eq!(
        put.param("X-Amz-Signature"),
        Some("abc"),
        "the presigned query kept"
    );
    assert_eq!(
        put.header("content-type").unwrap_or(""),
        "",
        "S3 signs an empty type"
    );
    let body: Value = serde_json::from_slice(&put.body).unwrap();
    for (field, from) in [
        ("StackId", "StackId"),
        ("RequestId", "RequestId"),
        ("LogicalResourceId", "LogicalResourceId"),
    ] {
        assert_eq!(body[field], event[from], "{field}");
    }
    assert_eq!(body["PhysicalResourceId"], "hookledger-schema");
    assert_eq!(body["NoEcho"], false);
    assert!(
        body["Reason"].is_string() && body["Data"].is_object(),
        "{body}"
    );
    body
}

fn every_migration(sets: &[MigrationSet]) -> Vec<String> {
    std::iter::once(MigrationSet::ledger())
        .chain(sets.iter().cloned())
        .flat_map(|s| s.names())
        .collect()
}

#[tokio::test]
async fn create_on_a_fresh_database_applies_every_migration_and_answers_success() {
    let db = TestDb::empty().await.unwrap();
    let sets = handlers::examples::migrations();
    let state = state(db.settings(1), sets.clone()).await;
    let server = s3(200).await;
    let event = request(&server, "Create", json!({"Version": "1"}));
    let returned = invoke(&state, event.clone(), 60).await.unwrap();
    let body = answer(&server, &event);
    assert_eq!(body["Status"], "SUCCESS", "{body}");
    assert_eq!(returned, body, "the function returns what it sent");
    let applied: Vec<String> = body["Data"]["Applied"]
        .as_str()
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(applied, every_migration(&sets));
    assert_eq!(body["Data"]["DatabaseAhead"], "false");
    let client = db.connect().await.unwrap();
    let tables: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'
               AND tablename IN ('webhook_event', 'outbox', 'orders', 'subscriptions')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 4);

    // Again (a second Create, then an Update): nothing applied, still SUCCESS.
    for kind in ["Create", "Update"] {
        let server = s3(200).await;
        let event = request(&server, kind, json!({"Version": "2"}));
        invoke(&state, event.clone(), 60).await.unwrap();
        let body = answer(&server, &event);
        assert_eq!(body["Status"], "SUCCESS", "{body}");
        assert_eq!(body["Data"]["AppliedCount"], "0", "{body}");
        assert_eq!(body["Data"]["Applied"], "");
    }
}

/// A set whose one migration fails, as a broken handlers' migration would.
fn broken_set() -> MigrationSet {
    let migration =
        refinery::Migration::unapplied("V1__create_broken", "CREATE TABLE broken (").unwrap();
    MigrationSet::new("broken", refinery::Runner::new(&[migration]))
}

#[tokio::test]
async fn a_failing_migration_answers_failed_with_a_short_reason() {
    let db = TestDb::empty().await.unwrap();
    let state = state(db.settings(1), vec![broken_set()]).await;
    let server = s3(200).await;
    let event = request(&server, "Create", json!({}));
    invoke(&state, event.clone(), 60).await.unwrap();
    let body = answer(&server, &event);
    assert_eq!(body["Status"], "FAILED", "{body}");
    let reason = body["Reason"].as_str().unwrap();
    assert!(reason.contains("V1__create_broken"), "{reason}");
    assert!(reason.len() <= 600, "{reason}");
    assert!(
        !reason.contains("postgres://"),
        "no connection string: {reason}"
    );
}

#[tokio::test]
async fn a_database_the_admin_cannot_write_answers_failed() {
    let db = TestDb::empty().await.unwrap();
    // An "admin" that may connect but not create anything (PostgreSQL 15: no CREATE on public).
    let weak = unique("weak_admin");
    db.connect()
        .await
        .unwrap()
        .batch_execute(&format!(
            "CREATE ROLE {weak} LOGIN PASSWORD 'weak-pass-1234'"
        ))
        .await
        .unwrap();
    let mut settings = db.settings(1);
    let url = user_url(&db.url, &weak).replacen(
        &format!("{weak}@"),
        &format!("{weak}:weak-pass-1234@"),
        1,
    );
    settings.url = url.into();
    let state = state(settings, Vec::new()).await;
    let server = s3(200).await;
    let event = request(&server, "Update", json!({"Version": "9"}));
    invoke(&state, event.clone(), 60).await.unwrap();
    let body = answer(&server, &event);
    assert_eq!(body["Status"], "FAILED", "{body}");
    let reason = body["Reason"].as_str().unwrap();
    assert!(reason.contains("permission denied"), "{reason}");
    assert!(!reason.contains("weak-pass-1234"), "{reason}");
}

#[tokio::test]
async fn delete_answers_success_without_connecting_and_leaves_the_schema() {
    let db = TestDb::new(&[]).await.unwrap();
    // Nothing listens there: Delete must not need the database.
    let state = state(
        DatabaseSettings::with_url("postgres://nobody@127.0.0.1:1/none"),
        Vec::new(),
    )
    .await;
    let server = s3(200).await;
    let event = request(&server, "Delete", json!({"Version": "1"}));
    invoke(&state, event.clone(), 60).await.unwrap();
    assert_eq!(answer(&server, &event)["Status"], "SUCCESS");
    let tables: i64 = db
        .connect()
        .await
        .unwrap()
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE tablename = 'webhook_event'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 1);
}

#[tokio::test]
async fn a_rollback_to_an_older_build_on_a_newer_database_succeeds_a_divergent_one_fails() {
    let db = TestDb::new(&handlers::examples::migrations())
        .await
        .unwrap();
    let client = db.connect().await.unwrap();
    // A newer build applied V99 to the ledger's set; this (older) build does not know it.
    client
        .batch_execute(
            "CREATE TABLE from_the_future (id int);
             INSERT INTO refinery_schema_history (version, name, applied_on, checksum)
             VALUES (99, 'create_from_the_future', '2030-01-01T00:00:00Z', '1')",
        )
        .await
        .unwrap();
    let state = state(db.settings(1), handlers::examples::migrations()).await;
    let server = s3(200).await;
    let event = request(&server, "Update", json!({"Version": "old"}));
    invoke(&state, event.clone(), 60).await.unwrap();
    let body = answer(&server, &event);
    assert_eq!(body["Status"], "SUCCESS", "{body}");
    assert_eq!(body["Data"]["DatabaseAhead"], "true");
    assert_eq!(body["Data"]["Ahead"], "V99__create_from_the_future");
    assert_eq!(body["Data"]["AppliedCount"], "0");
    // The CLI's `hookledger migrate` (migrate_with) behaves the same.
    let applied = shared::db::migrate_with(&db.settings(1), &handlers::examples::migrations())
        .await
        .unwrap();
    assert!(applied.is_empty());

    // A migration this build knows, recorded with another checksum: a divergence still fails.
    client
        .batch_execute("UPDATE refinery_schema_history SET checksum = '42' WHERE version = 1")
        .await
        .unwrap();
    let server = s3(200).await;
    let event = request(&server, "Update", json!({"Version": "old"}));
    invoke(&state, event.clone(), 60).await.unwrap();
    let body = answer(&server, &event);
    assert_eq!(body["Status"], "FAILED", "{body}");
    assert!(body["Reason"].as_str().unwrap().contains("V1"), "{body}");
}

#[tokio::test]
async fn a_migration_past_the_deadline_answers_failed_timed_out_in_time() {
    let db = TestDb::empty().await.unwrap();
    let slow = refinery::Migration::unapplied("V1__wait", "SELECT pg_sleep(30)").unwrap();
    let mut state = state(
        db.settings(1),
        vec![MigrationSet::new("slow", refinery::Runner::new(&[slow]))],
    )
    .await;
    state.resource.margin = Duration::from_secs(2);
    let server = s3(200).await;
    let event = request(&server, "Create", json!({}));
    let started = std::time::Instant::now();
    invoke(&state, event.clone(), 6).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    let body = answer(&server, &event);
    assert_eq!(body["Status"], "FAILED");
    assert!(
        body["Reason"].as_str().unwrap().starts_with("timed out"),
        "{body}"
    );
}

/// The invoker may not be CloudFormation: a `ResponseURL` that is not CloudFormation's
/// pre-signed S3 URL gets no work and no answer, and a redirect from the URL is not followed.
#[tokio::test]
async fn a_response_url_that_is_not_cloudformations_gets_nothing_and_no_redirect_is_followed() {
    let database = DatabaseSettings::with_url("postgres://x@127.0.0.1:1/x");
    let secrets = shared::secrets::Secrets::from_env().await;
    let production = AppState {
        resource: SchemaResource::new(Ok(database.clone()), Some(secrets), Vec::new()).unwrap(),
    };
    let server = s3(200).await;
    for request_type in ["Create", "Delete"] {
        let error = invoke(
            &production,
            request(&server, request_type, json!({"Version": "1"})),
            60,
        )
        .await
        .unwrap_err();
        assert!(
            error.contains("not CloudFormation's pre-signed S3 URL"),
            "{error}"
        );
    }
    assert!(
        server.requests().is_empty(),
        "an answer went to the invoker's URL"
    );
    // The test switch is the resource's field, set in code; nothing in the event turns it on.
    let mut event = request(&server, "Delete", json!({}));
    event["ResourceProperties"] = json!({"ResponseUrls": "AlsoLoopbackForTests"});
    assert!(invoke(&production, event, 60).await.is_err());
    assert!(server.requests().is_empty());

    // A redirect (to where the invoker listens) is an answer not taken, not a hop.
    let elsewhere = s3(200).await;
    let location = format!("{}/taken", elsewhere.base_url);
    let redirecting =
        FakeServer::start(move |_| Answer::raw(307, "").with_header("location", &location))
            .await
            .unwrap();
    let state = state(database, Vec::new()).await;
    let error = invoke(&state, request(&redirecting, "Delete", json!({})), 60)
        .await
        .unwrap_err();
    assert!(error.contains("307"), "{error}");
    assert!(elsewhere.requests().is_empty(), "the redirect was followed");
}

#[tokio::test]
async fn an_answer_s3_refuses_is_retried_then_the_invocation_fails() {
    let state = state(
        DatabaseSettings::with_url("postgres://x@127.0.0.1:1/x"),
        Vec::new(),
    )
    .await;
    // Refused once, then taken.
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let server = FakeServer::start(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            Answer::raw(503, "SlowDown")
        } else {
            Answer::raw(200, "")
        }
    })
    .await
    .unwrap();
    let event = request(&server, "Delete", json!({}));
    invoke(&state, event, 60).await.unwrap();
    assert_eq!(server.requests_with("PUT").len(), 2);
    // Always refused: a few attempts, then the invocation fails.
    let server = s3(403).await;
    let error = invoke(&state, request(&server, "Delete", json!({})), 60)
        .await
        .unwrap_err();
    assert!(error.contains("403"), "{error}");
    assert_eq!(
        server.requests_with("PUT").len(),
        migrate::custom_resource::SEND_ATTEMPTS as usize
    );
    // No ResponseURL: nothing to answer, the invocation fails.
    assert!(invoke(&state, json!({"RequestType": "Create"}), 60)
        .await
        .is_err());
}

pub(crate) async fn login_secret(client: &aws_sdk_secretsmanager::Client, value: &Value) -> String {
    client
        .create_secret()
        .name(unique("hookledger/login"))
        .secret_string(value.to_string())
        .send()
        .await
        .unwrap()
        .arn
        .unwrap()
}

/// Whether `verifier` (`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, as
/// pg_authid keeps it) was made from `password` (RFC 5802: StoredKey = H(HMAC(SaltedPassword,
/// "Client Key")), SaltedPassword = PBKDF2-HMAC-SHA-256). The throwaway cluster trusts local
/// connections, so this is how the test knows the password is right.
pub(crate) fn scram_matches(verifier: &str, password: &str) -> bool {
    let b64 = base64::engine::general_purpose::STANDARD;
    let Some(rest) = verifier.strip_prefix("SCRAM-SHA-256$") else {
        return false;
    };
    let (params, keys) = rest.split_once('$').unwrap();
    let (iterations, salt) = params.split_once(':').unwrap();
    let (stored, _) = keys.split_once(':').unwrap();
    let iterations: u32 = iterations.parse().unwrap();
    let salt = b64.decode(salt).unwrap();
    let hmac = |key: &[u8], data: &[u8]| -> Vec<u8> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap();
        mac.update(data);
        mac.finalize().into_bytes().to_vec()
    };
    let mut u = hmac(
        password.as_bytes(),
        &[salt.as_slice(), &[0, 0, 0, 1]].concat(),
    );
    let mut salted = u.clone();
    for _ in 1..iterations {
        u = hmac(password.as_bytes(), &u);
        for (s, x) in salted.iter_mut().zip(&u) {
            *s ^= x;
        }
    }
    let client_key = hmac(&salted, b"Client Key");
    Sha256::digest(&client_key).to_vec() == b64.decode(stored).unwrap()
}

#[tokio::test]
async fn logins_are_provisioned_from_their_secrets_and_do_their_functions_work() {
    let aws = crate::aws::emulator().await;
    let db = TestDb::empty().await.unwrap();
    let receiver = unique("receiver_login");
    let sweeper = unique("sweeper_login");
    // A quote, a backslash and a dollar in the password.
    let password = "it's a \\ pa$$word";
    let receiver_arn = login_secret(
        &aws,
        &json!({"username": receiver, "password": password, "engine": "postgres"}),
    )
    .await;
    let sweeper_arn = login_secret(
        &aws,
        &json!({"username": sweeper, "password": "s3cret-sweep"}),
    )
    .await;
    let properties = |version: &str| {
        json!({
            "Version": version,
            "Logins": [
                {"Role": "receiver", "SecretArn": receiver_arn, "StatementTimeoutMs": "5000",
                 "LockTimeoutMs": "2000", "IdleInTransactionTimeoutMs": "10000"},
                {"Role": "sweeper", "SecretArn": sweeper_arn},
            ],
            "ConnectionBudget": {"UseProxy": "false", "Functions": [
                {"Name": "receiver", "ReservedConcurrency": "5", "PoolSize": "1"},
                {"Name": "sweeper", "ReservedConcurrency": "0", "PoolSize": "1"}]}
        })
    };
    let state = state(db.settings(1), handlers::examples::migrations()).await;
    let server = s3(200).await;
    let event = request(&server, "Create", properties("1"));
    invoke(&state, event.clone(), 60).await.unwrap();
    let body = answer(&server, &event);
    assert_eq!(body["Status"], "SUCCESS", "{body}");
    assert_eq!(body["Data"]["Logins"], format!("{receiver},{sweeper}"));
    assert_eq!(
        body["Data"]["Unreserved"], "sweeper",
        "reported, not failed"
    );
    assert_eq!(body["Data"]["ReservedConnections"], "5");
    assert!(!body.to_string().contains("pa$$word") && !body.to_string().contains("s3cret"));

    let admin = db.connect().await.unwrap();
    let row = admin
        .query_one(
            "SELECT a.rolcanlogin, a.rolpassword, coalesce(r.rolconfig, '{}'),
                    pg_has_role(a.rolname, 'hookledger_receiver', 'MEMBER'),
                    pg_has_role(a.rolname, 'hookledger_sweeper', 'MEMBER')
             FROM pg_authid a JOIN pg_roles r ON r.oid = a.oid WHERE a.rolname = $1",
            &[&receiver],
        )
        .await
        .unwrap();
    let (login, verifier, config, in_receiver, in_sweeper): (
        bool,
        String,
        Vec<String>,
        bool,
        bool,
    ) = (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
    assert!(login && in_receiver && !in_sweeper);
    assert!(
        scram_matches(&verifier, password),
        "the stored verifier is the secret's password"
    );
    assert!(!scram_matches(&verifier, "its a \\ pa$$word"));
    let mut config = config;
    config.sort();
    assert_eq!(
        config,
        [
            "idle_in_transaction_session_timeout=10000",
            "lock_timeout=2000",
            "statement_timeout=5000"
        ]
    );

    // The receiver's login does its work; the sweeper's cannot insert.
    let mut receiver_db = db.settings(2);
    receiver_db.url = user_url(&db.url, &receiver).into();
    let app = crate::helpers::spawn_app_over(db.clone(), receiver_db);
    let reply = app
        .receive(
            "stripe",
            &crate::helpers::stripe_payment("evt_login_1", "ord_login_1", 5, crate::helpers::NOW),
        )
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let mut sweeper_db = db.settings(1);
    sweeper_db.url = user_url(&db.url, &sweeper).into();
    let sweeper_client = shared::db::connect(&sweeper_db).await.unwrap();
    let error = sweeper_client
        .execute("INSERT INTO outbox (source, event_id, n, event_type, target, payload, content_type) VALUES ('a','b',1,'c','d','','e')", &[])
        .await
        .unwrap_err();
    assert_eq!(error.code().map(|c| c.code()), Some("42501"));

    // A rotated password (the secret's new value) and changed timeouts apply on Update.
    aws.put_secret_value()
        .secret_id(&receiver_arn)
        .secret_string(json!({"username": receiver, "password": "rotated'pw"}).to_string())
        .send()
        .await
        .unwrap();
    let mut changed = properties("2");
    changed["Logins"][0]["LockTimeoutMs"] = json!("3000");
    changed["Logins"][0]
        .as_object_mut()
        .unwrap()
        .remove("StatementTimeoutMs");
    let server = s3(200).await;
    let event = request(&server, "Update", changed);
    invoke(&state, event.clone(), 60).await.unwrap();
    assert_eq!(answer(&server, &event)["Status"], "SUCCESS");
    let row = admin
        .query_one(
            "SELECT a.rolpassword, coalesce(r.rolconfig, '{}')
             FROM pg_authid a JOIN pg_roles r ON r.oid = a.oid WHERE a.rolname = $1",
            &[&receiver],
        )
        .await
        .unwrap();
    let (verifier, mut config): (String, Vec<String>) = (row.get(0), row.get(1));
    config.sort();
    assert!(scram_matches(&verifier, "rotated'pw"));
    assert_eq!(
        config,
        [
            "idle_in_transaction_session_timeout=10000",
            "lock_timeout=3000"
        ]
    );
}

#[tokio::test]
async fn a_login_that_is_not_an_identifier_or_is_the_admin_is_refused() {
    let aws = crate::aws::emulator().await;
    let db = TestDb::empty().await.unwrap();
    let state = state(db.settings(1), Vec::new()).await;
    for (username, expected) in [
        ("x\"; DROP TABLE webhook_event; --", "identifier"),
        ("postgres", "reserved"),
    ] {
        let arn = login_secret(
            &aws,
            &json!({"username": username, "password": "pw-123456"}),
        )
        .await;
        let server = s3(200).await;
        let event = request(
            &server,
            "Create",
            json!({"Logins": [{"Role": "worker", "SecretArn": arn}]}),
        );
        invoke(&state, event.clone(), 60).await.unwrap();
        let body = answer(&server, &event);
        assert_eq!(body["Status"], "FAILED", "{body}");
        let reason = body["Reason"].as_str().unwrap();
        assert!(
            reason.contains(expected) && reason.contains("worker"),
            "{reason}"
        );
        assert!(!reason.contains("pw-123456"));
    }
}

#[tokio::test]
async fn an_over_budget_connection_budget_answers_failed_unless_behind_a_proxy() {
    let db = TestDb::empty().await.unwrap();
    let state = state(db.settings(1), Vec::new()).await;
    let usable: i64 = db
        .connect()
        .await
        .unwrap()
        .query_one(
            "SELECT current_setting('max_connections')::int8
                  - current_setting('superuser_reserved_connections')::int8",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let budget = |use_proxy: &str| {
        json!({"ConnectionBudget": {"UseProxy": use_proxy, "Functions": [
            {"Name": "receiver", "ReservedConcurrency": usable.to_string(), "PoolSize": "1"},
            {"Name": "worker", "ReservedConcurrency": "1", "PoolSize": "1"}]}})
    };
    let server = s3(200).await;
    let event = request(&server, "Create", budget("false"));
    invoke(&state, event.clone(), 60).await.unwrap();
    let body = answer(&server, &event);
    assert_eq!(body["Status"], "FAILED", "{body}");
    let reason = body["Reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("{}", usable + 1)) && reason.contains(&usable.to_string()),
        "{reason}"
    );
    // Read-only check first: nothing was migrated.
    let tables: i64 = db
        .connect()
        .await
        .unwrap()
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 0);
    // Behind RDS Proxy the same budget passes.
    let server = s3(200).await;
    let event = request(&server, "Create", budget("true"));
    invoke(&state, event.clone(), 60).await.unwrap();
    let body = answer(&server, &event);
    assert_eq!(body["Status"], "SUCCESS", "{body}");
    assert_eq!(body["Data"]["UsableConnections"], usable.to_string());
}

#[tokio::test]
async fn unreadable_admin_settings_answer_failed_on_create_and_success_on_delete() {
    // What main.rs does when the admin secret cannot be read at cold start: the function
    // still starts and answers, so the deploy fails at once (not after ServiceTimeout) and
    // the rollback's Delete completes.
    let settings = migrate::resource::database_settings_from(|name| match name {
        "HOOKLEDGER_DB_SECRET_ARN" => Some("not-an-arn".to_owned()),
        "AWS_ENDPOINT_URL_SECRETS_MANAGER" => Some("http://127.0.0.1:1".to_owned()),
        _ => None,
    })
    .await
    .map_err(|e| shared::startup::config_failure(&e));
    let reason = settings
        .clone()
        .expect_err("a bad admin secret is an error");
    let secrets = shared::secrets::Secrets::from_env().await;
    let mut resource = SchemaResource::new(settings, Some(secrets), Vec::new()).unwrap();
    resource.response_urls = ResponseUrls::AlsoLoopbackForTests;
    let state = AppState { resource };
    let server = s3(200).await;
    let create = request(&server, "Create", json!({"Version": "1"}));
    invoke(&state, create.clone(), 60).await.unwrap();
    let answered = answer(&server, &create);
    assert_eq!(answered["Status"], "FAILED", "{answered}");
    let text = answered["Reason"].as_str().unwrap_or_default();
    assert!(
        text.contains("database settings") && text.contains(&reason[..reason.len().min(20)]),
        "the reason says what is wrong: {text}"
    );
    let server = s3(200).await;
    let delete = request(&server, "Delete", json!({"Version": "1"}));
    invoke(&state, delete.clone(), 60).await.unwrap();
    assert_eq!(answer(&server, &delete)["Status"], "SUCCESS");
}

/// The body of the one PUT `server` received (its shape is checked by `answer`).
pub(crate) fn answer_body(server: &FakeServer) -> Value {
    let puts: Vec<Request> = server.requests_with("PUT");
    assert_eq!(puts.len(), 1, "one answer: {puts:?}");
    serde_json::from_slice(&puts[0].body).unwrap()
}

async fn verifier_of(db: &TestDb, role: &str) -> String {
    db.connect()
        .await
        .unwrap()
        .query_one(
            "SELECT rolpassword FROM pg_authid WHERE rolname = $1",
            &[&role],
        )
        .await
        .unwrap()
        .get(0)
}

/// Roles are cluster-wide and the template's default login names are the same for every stack
/// (`DatabaseLoginPrefix` = `hookledger_app` -> `hookledger_app_receiver`, ...). A second stack
/// on another database of the same cluster (staging beside production, two teams) generates
/// its own secret with the same username: its deploy silently ALTERs the first stack's login
/// to its own password, and the first stack's functions can no longer log in (the next cold
/// start fails authentication: an outage of the first stack, caused by deploying the second).
#[tokio::test]
async fn a_second_stack_on_the_same_cluster_does_not_take_over_the_first_stacks_login() {
    let aws = crate::aws::emulator().await;
    let production = TestDb::empty().await.unwrap();
    let staging = TestDb::empty().await.unwrap();
    // Both stacks generated `<prefix>_receiver` with the default prefix.
    let username = unique("app_receiver");
    let production_secret = login_secret(
        &aws,
        &json!({"username": username, "password": "production-password"}),
    )
    .await;
    let staging_secret = login_secret(
        &aws,
        &json!({"username": username, "password": "staging-password"}),
    )
    .await;
    let props = |arn: &str| json!({"Logins": [{"Role": "receiver", "SecretArn": arn}]});

    let server = s3(200).await;
    let production_state = state(production.settings(1), Vec::new()).await;
    invoke(
        &production_state,
        request(&server, "Create", props(&production_secret)),
        60,
    )
    .await
    .unwrap();
    assert_eq!(answer_body(&server)["Status"], "SUCCESS");
    assert!(scram_matches(
        &verifier_of(&production, &username).await,
        "production-password"
    ));

    let server = s3(200).await;
    let staging_state = state(staging.settings(1), Vec::new()).await;
    invoke(
        &staging_state,
        {
            // Another stack: CloudFormation gives each its own stack id.
            let mut staging = request(&server, "Create", props(&staging_secret));
            staging["StackId"] =
                json!("arn:aws:cloudformation:us-east-1:123456789012:stack/staging/2");
            staging
        },
        60,
    )
    .await
    .unwrap();
    let staging_answer = answer_body(&server);
    let production_still_logs_in = scram_matches(
        &verifier_of(&production, &username).await,
        "production-password",
    );
    assert!(
        production_still_logs_in || staging_answer["Status"] == "FAILED",
        "the staging deploy answered {} and replaced production's login password: \
         production's receiver can no longer authenticate",
        staging_answer
    );
}

/// The only guard against taking over an existing role is `rolsuper`, which no role but
/// `rdsadmin` has on RDS. A login whose username names an existing role keeps every attribute
/// and membership that role had (only `hookledger_` groups are revoked): here a role with
/// CREATEROLE and `pg_write_all_data` becomes "the receiver's login", which then can DELETE
/// from the ledger (the receiver must not) and create roles.
#[tokio::test]
async fn a_login_that_names_an_existing_privileged_role_is_refused_or_stripped() {
    let aws = crate::aws::emulator().await;
    let db = TestDb::new(&[]).await.unwrap();
    let username = unique("legacy_ops");
    db.connect()
        .await
        .unwrap()
        .batch_execute(&format!(
            "CREATE ROLE {username} LOGIN CREATEROLE PASSWORD 'old';
             GRANT pg_write_all_data TO {username};"
        ))
        .await
        .unwrap();
    let arn = login_secret(
        &aws,
        &json!({"username": username, "password": "receiver-password"}),
    )
    .await;
    let state = state(db.settings(1), Vec::new()).await;
    let server = s3(200).await;
    invoke(
        &state,
        request(
            &server,
            "Create",
            json!({"Logins": [{"Role": "receiver", "SecretArn": arn}]}),
        ),
        60,
    )
    .await
    .unwrap();
    let body = answer_body(&server);
    let row = db
        .connect()
        .await
        .unwrap()
        .query_one(
            "SELECT has_table_privilege(rolname, 'webhook_event', 'DELETE'), rolcreaterole
             FROM pg_roles WHERE rolname = $1",
            &[&username],
        )
        .await
        .unwrap();
    let (can_delete, can_create_roles): (bool, bool) = (row.get(0), row.get(1));
    assert!(
        body["Status"] == "FAILED" || (!can_delete && !can_create_roles),
        "answered {body}; the receiver's login can DELETE from webhook_event: {can_delete}, \
         has CREATEROLE: {can_create_roles}"
    );
}
