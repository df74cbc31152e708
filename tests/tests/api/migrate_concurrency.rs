//! The migrate function (the CloudFormation custom resource `Custom::HookledgerSchema`) and
//! `hookledger migrate` beside other sessions on the same database: two deploys at once (of the
//! schema, of one new login) and two `migrate_with` runs at once all succeed, and a migration
//! blocked behind an open transaction fails by its lock_timeout and leaves nothing queued.

use std::time::{Duration, Instant};

use hookledger_tests::TestDb;
use serde_json::json;
use shared::db::MigrationSet;

use crate::migrate::{answer_body, invoke, login_secret, request, s3, state, unique};

/// template.yaml gives the migrate function `HOOKLEDGER_LOCK_TIMEOUT_MS: "30000"` and
/// `HOOKLEDGER_STATEMENT_TIMEOUT_MS: "240000"`, but `shared::db::connect` (what the migrate
/// function migrates over) applies neither: a migration's `ALTER TABLE` queued behind any open
/// transaction waits without limit, and while it waits every receiver's query on that table
/// queues behind its ACCESS EXCLUSIVE request. Abandoning the work at the margin does not
/// cancel the server side either: the ALTER keeps waiting (and blocking) after the answer.
#[tokio::test]
async fn migrate_applies_its_lock_timeout_so_a_blocked_migration_fails_fast_and_leaves_nothing_waiting(
) {
    let db = TestDb::new(&[]).await.unwrap();
    // An open transaction that has read the ledger (a worker's handler holds one for up to
    // its idle_in_transaction limit; an operator's psql session, indefinitely).
    let blocker = db.connect().await.unwrap();
    blocker
        .batch_execute("BEGIN; SELECT count(*) FROM webhook_event;")
        .await
        .unwrap();
    // A later migration that alters the ledger (as V8, V9, V12 did).
    let alter = refinery::Migration::unapplied(
        "V1__add_review_column",
        "ALTER TABLE webhook_event ADD COLUMN review_column int",
    )
    .unwrap();
    let mut settings = db.settings(1);
    settings.lock_timeout_ms = 1_000; // what HOOKLEDGER_LOCK_TIMEOUT_MS says
    settings.statement_timeout_ms = 5_000;
    let mut state = state(
        settings,
        vec![MigrationSet::new(
            "review_lock",
            refinery::Runner::new(&[alter]),
        )],
    )
    .await;
    state.resource.margin = Duration::from_secs(2);
    let server = s3(200).await;
    let started = Instant::now();
    invoke(
        &state,
        request(&server, "Update", json!({"Version": "2"})),
        14,
    )
    .await
    .unwrap();
    let elapsed = started.elapsed();
    let body = answer_body(&server);
    let reason = body["Reason"].as_str().unwrap_or_default().to_owned();
    // What is left on the server once CloudFormation has its answer.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let waiting: i64 = db
        .connect()
        .await
        .unwrap()
        .query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'
               AND query LIKE 'ALTER TABLE webhook_event%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    drop(blocker);
    assert!(
        body["Status"] == "FAILED"
            && reason.contains("lock timeout")
            && elapsed < Duration::from_secs(6)
            && waiting == 0,
        "a migration blocked on a lock must fail by lock_timeout (1 s) and leave nothing \
         queued; got after {elapsed:?}: {body}; ALTERs still waiting on the server after the \
         answer: {waiting}"
    );
}

/// Two invocations at once against one database (Lambda may deliver CloudFormation's
/// asynchronous invocation twice, retries one whose answer was lost, or an operator runs
/// `hookledger migrate` during a deploy): the runs race on the same CREATE TABLEs, because
/// nothing serialises them (no advisory lock around `migrate_client`).
#[tokio::test]
async fn two_deploys_at_once_on_a_fresh_database_both_succeed() {
    let db = TestDb::empty().await.unwrap();
    let sets = handlers::examples::migrations();
    let first = state(db.settings(1), sets.clone()).await;
    let second = state(db.settings(1), sets).await;
    let (server_a, server_b) = (s3(200).await, s3(200).await);
    let (a, b) = tokio::join!(
        invoke(
            &first,
            request(&server_a, "Create", json!({"Version": "1"})),
            60
        ),
        invoke(
            &second,
            request(&server_b, "Create", json!({"Version": "1"})),
            60
        ),
    );
    a.unwrap();
    b.unwrap();
    let (a, b) = (answer_body(&server_a), answer_body(&server_b));
    assert!(
        a["Status"] == "SUCCESS" && b["Status"] == "SUCCESS",
        "both deploys must succeed (the second finding the work done):\n{a}\n{b}"
    );
}

/// The same race on the logins: two invocations provisioning the same new login at once
/// both see it absent and both `CREATE ROLE` it; the second fails on pg_authid's unique index.
#[tokio::test]
async fn two_deploys_at_once_provisioning_the_same_new_login_both_succeed() {
    let aws = crate::aws::emulator().await;
    let db = TestDb::new(&handlers::examples::migrations())
        .await
        .unwrap();
    let username = unique("review_race_login");
    let arn = login_secret(
        &aws,
        &json!({"username": username, "password": "race-password-1"}),
    )
    .await;
    let properties = json!({"Version": "1", "Logins": [{"Role": "worker", "SecretArn": arn}]});
    let first = state(db.settings(1), handlers::examples::migrations()).await;
    let second = state(db.settings(1), handlers::examples::migrations()).await;
    let mut failures = Vec::new();
    // The window is the time between the SELECT and the CREATE: try a few times.
    for _ in 0..5 {
        let (server_a, server_b) = (s3(200).await, s3(200).await);
        let _ = db
            .connect()
            .await
            .unwrap()
            .batch_execute(&format!("DROP ROLE IF EXISTS {username}"))
            .await;
        let (a, b) = tokio::join!(
            invoke(&first, request(&server_a, "Create", properties.clone()), 60),
            invoke(
                &second,
                request(&server_b, "Create", properties.clone()),
                60
            ),
        );
        a.unwrap();
        b.unwrap();
        for body in [answer_body(&server_a), answer_body(&server_b)] {
            if body["Status"] != "SUCCESS" {
                failures.push(body["Reason"].to_string());
            }
        }
    }
    assert!(
        failures.is_empty(),
        "concurrent provisioning of one login failed: {failures:?}"
    );
}

/// The same race from the operator CLI's path (`hookledger migrate`, `shared::db::migrate_with`)
/// during a deploy: the schema lock is taken by the migration runner itself, so both succeed.
#[tokio::test]
async fn two_migrate_with_runs_at_once_on_a_fresh_database_both_succeed() {
    let db = TestDb::empty().await.unwrap();
    let settings = db.settings(1);
    let sets = handlers::examples::migrations();
    let (a, b) = tokio::join!(
        shared::db::migrate_with(&settings, &sets),
        shared::db::migrate_with(&settings, &sets),
    );
    let (a, b) = (a.map_err(|e| e.to_string()), b.map_err(|e| e.to_string()));
    assert!(
        a.is_ok() && b.is_ok(),
        "both runs must succeed:\n{a:?}\n{b:?}"
    );
    assert!(
        a.unwrap().is_empty() || b.unwrap().is_empty(),
        "one of them found the work done"
    );
}
