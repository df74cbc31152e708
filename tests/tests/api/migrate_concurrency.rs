//! Regression tests from a hostile review of the deployment: the migrate function (the
//! CloudFormation custom resource `Custom::HookledgerSchema`) under concurrent deploys, blocked
//! migrations, logins that belong to another stack or to a privileged role; the bootstrap
//! checker; the template's IAM check against mutated templates. Each failed on the code before
//! its fix.

use std::time::{Duration, Instant};

use hookledger_tests::fake_providers::{FakeServer, Request};
use hookledger_tests::TestDb;
use serde_json::{json, Value};
use shared::db::MigrationSet;

use crate::migrate::{invoke, login_secret, request, s3, scram_matches, state, unique};

/// The body of the one PUT `server` received (the shape is checked by `migrate`'s tests).
fn answer(server: &FakeServer) -> Value {
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
    let body = answer(&server);
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
    let sets = handlers::migrations();
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
    let (a, b) = (answer(&server_a), answer(&server_b));
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
    let db = TestDb::new(&handlers::migrations()).await.unwrap();
    let username = unique("review_race_login");
    let arn = login_secret(
        &aws,
        &json!({"username": username, "password": "race-password-1"}),
    )
    .await;
    let properties = json!({"Version": "1", "Logins": [{"Role": "worker", "SecretArn": arn}]});
    let first = state(db.settings(1), handlers::migrations()).await;
    let second = state(db.settings(1), handlers::migrations()).await;
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
        for body in [answer(&server_a), answer(&server_b)] {
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
    assert_eq!(answer(&server)["Status"], "SUCCESS");
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
    let staging_answer = answer(&server);
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
    let body = answer(&server);
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

/// glibc 2.36 added the symbol version `GLIBC_ABI_DT_RELR`, which a binary linked with
/// `-z pack-relative-relocs` (DT_RELR; the default of newer toolchains and distributions)
/// requires. al2023's glibc is 2.34: the loader refuses such a bootstrap ("version
/// `GLIBC_ABI_DT_RELR' not found"). `scripts/check-bootstrap.py` only weighs `GLIBC_<digits>`
/// versions (its regex) and drops every other `GLIBC_*` name from the report, so it passes the
/// bootstrap as fit for al2023. The fixture: Debian 12's own `/usr/bin/getconf`, which needs
/// GLIBC_2.34 at most, and GLIBC_ABI_DT_RELR.
#[test]
fn the_bootstrap_check_refuses_a_binary_needing_glibc_abi_dt_relr() {
    let fixture = "/usr/bin/getconf";
    let bytes = std::fs::read(fixture).unwrap();
    assert!(
        bytes
            .windows(b"GLIBC_ABI_DT_RELR".len())
            .any(|w| w == b"GLIBC_ABI_DT_RELR"),
        "the fixture {fixture} needs GLIBC_ABI_DT_RELR on this machine (Debian 12)"
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let arch = match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "x86_64",
    };
    let output = std::process::Command::new("python3")
        .arg(root.join("scripts/check-bootstrap.py"))
        .args(["--arch", arch, "--max-glibc", "2.34", fixture])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        !output.status.success(),
        "accepted for al2023 (glibc 2.34) a binary that needs GLIBC_ABI_DT_RELR (glibc 2.36+): {text}"
    );
}

/// Runs this binary's `template::template_function_roles_have_exactly_the_expected_actions`
/// against `yaml` (through `HOOKLEDGER_TEMPLATE`, as the template test documents): whether it
/// passed, and its output.
fn iam_test_passes_on(yaml: &str, tag: &str) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!("hookledger-review-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{tag}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "template::template_function_roles_have_exactly_the_expected_actions",
            "--exact",
            "--test-threads=1",
        ])
        .env("HOOKLEDGER_TEMPLATE", &path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("1 passed") || text.contains("1 failed"),
        "{text}"
    );
    (output.status.success(), text)
}

/// Contract 5 names each function's secrets: "receiver `secretsmanager:GetSecretValue` (its DB
/// secret + sources)", the worker's targets "named ARNs only". The template test checks the
/// actions and a `*` on secrets and functions only: a template that lets the RECEIVER read the
/// database OWNER's secret, one that lets the worker send to every queue (`Resource: "*"`), and
/// one that attaches an `Action: "*"` policy to the receiver's role through a separate
/// `AWS::IAM::Policy` all pass it.
#[test]
fn the_template_iam_test_catches_least_privilege_breaches() {
    let original =
        std::fs::read_to_string(hookledger_tests::repo_root().join("template.yaml")).unwrap();
    let receiver_secrets = "                - !If [GenerateReceiverSecret, !Ref ReceiverDatabaseSecret, !Ref ReceiverDatabaseSecretArn]\n                - !Ref SourcesSecretArn\n            - Effect: Allow\n              Action: lambda:InvokeFunction";
    let worker_queue = "Action: sqs:SendMessage\n                Resource: !Ref OutboxQueueArns";
    assert!(original.contains(receiver_secrets) && original.contains(worker_queue));
    let mutations = [
        (
            "receiver-reads-admin-secret",
            original.replacen(
                receiver_secrets,
                &receiver_secrets.replacen(
                    "                - !Ref SourcesSecretArn\n",
                    "                - !Ref SourcesSecretArn\n                - !Ref DatabaseAdminSecretArn\n",
                    1,
                ),
                1,
            ),
        ),
        (
            "worker-sends-anywhere",
            original.replacen(
                worker_queue,
                "Action: sqs:SendMessage\n                Resource: \"*\"",
                1,
            ),
        ),
        (
            "receiver-role-admin-policy",
            original.replacen(
                "\nResources:\n",
                "\nResources:\n  ReviewExtraPolicy:\n    Type: AWS::IAM::Policy\n    Properties:\n      PolicyName: everything\n      Roles: [!Ref ReceiverFunctionRole]\n      PolicyDocument:\n        Version: \"2012-10-17\"\n        Statement:\n          - Effect: Allow\n            Action: \"*\"\n            Resource: \"*\"\n",
                1,
            ),
        ),
    ];
    let mut passed = Vec::new();
    for (tag, yaml) in &mutations {
        assert_ne!(yaml, &original, "{tag}: the mutation applied");
        if iam_test_passes_on(yaml, tag).0 {
            passed.push(*tag);
        }
    }
    assert!(
        passed.is_empty(),
        "the template IAM test passed these least-privilege breaches: {passed:?}"
    );
}

/// The same race from the operator CLI's path (`hookledger migrate`, `shared::db::migrate_with`)
/// during a deploy: the schema lock is taken by the migration runner itself, so both succeed.
#[tokio::test]
async fn two_migrate_with_runs_at_once_on_a_fresh_database_both_succeed() {
    let db = TestDb::empty().await.unwrap();
    let settings = db.settings(1);
    let sets = handlers::migrations();
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
