//! The operator's commands run as the operator runs them: the built `hookledger` binary, a
//! database at `DATABASE_URL` and the sources in a file. Needs PostgreSQL (`make test` starts
//! one).

use hookledger_tests::{events_dir, TestDb};
use tokio::process::Command;

/// `hookledger ARGS` against `url` with the local sources, as a process.
async fn hookledger(url: &str, args: &[&str]) -> std::process::Output {
    let output = hookledger_tests::hookledger_command(
        env!("CARGO_BIN_EXE_hookledger-examples"),
        url,
        &events_dir().join("sources.local.json"),
    )
    .args(args)
    .output()
    .await
    .expect("hookledger runs");
    hookledger_tests::test_log::record("hookledger", &output);
    output
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the command failed with exactly one line on stderr, `hookledger: ...`, and returns it.
fn one_line_failure(output: &std::process::Output) -> String {
    assert!(!output.status.success(), "succeeded: {}", stdout(output));
    let text = stderr(output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "not one line: {text:?}");
    assert!(lines[0].starts_with("hookledger: "), "{text}");
    lines[0].to_owned()
}

/// Dead letters of `stripe-deferred`: `(event_id, has a payload)`, gone dead 30 minutes ago.
async fn seed_dead(db: &TestDb, rows: &[(&str, bool)]) {
    let client = db.connect().await.unwrap();
    for (id, payload) in rows {
        client
            .execute(
                "INSERT INTO webhook_event
                     (source, event_id, event_type, payload_digest, payload, status, attempts,
                      last_error, claimed_at, dead_at)
                 VALUES ('stripe-deferred', $1, 'payment_intent.succeeded',
                         sha256(convert_to($1::text, 'UTF8')),
                         CASE WHEN $2 THEN convert_to('{\"id\": \"' || $1::text || '\"}', 'UTF8') END,
                         'dead', 8, 'downstream answered 502', now() - interval '1 hour',
                         now() - interval '30 minutes')",
                &[id, payload],
            )
            .await
            .unwrap();
    }
}

async fn snapshot(db: &TestDb) -> String {
    db.connect()
        .await
        .unwrap()
        .query_one(
            "SELECT coalesce(string_agg(e::text, '|' ORDER BY source, event_id), '')
             FROM webhook_event e",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn hookledger_migrate_migrates_a_fresh_database_then_is_up_to_date() {
    let db = TestDb::empty().await.unwrap();
    // The sources are not needed to migrate.
    let output = Command::new(env!("CARGO_BIN_EXE_hookledger-examples"))
        .arg("migrate")
        .env_clear()
        .env("DATABASE_URL", &db.url)
        .output()
        .await
        .unwrap();
    hookledger_tests::test_log::record("hookledger", &output);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.starts_with("migrations applied: V1__"), "{text}");
    for name in shared::db::migration_names() {
        assert!(text.contains(&name), "{name} missing from {text}");
    }
    let client = db.connect().await.unwrap();
    let columns: i64 = client
        .query_one(
            "SELECT count(*) FROM information_schema.columns
             WHERE table_name = 'webhook_event' AND column_name IN ('history', 'replayed_at')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(columns, 2);

    let again = hookledger(&db.url, &["migrate", "--json"]).await;
    assert!(again.status.success(), "{}", stderr(&again));
    let report: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(report, serde_json::json!({"applied": []}));
    let again = hookledger(&db.url, &["migrate"]).await;
    assert_eq!(stdout(&again).trim(), "migrations: up to date");

    // An unreachable database: one line, non-zero.
    let line = one_line_failure(&hookledger("postgres://127.0.0.1:1/nothing", &["migrate"]).await);
    assert!(line.contains("migrating"), "{line}");
}

#[tokio::test]
async fn hookledger_check_config_reports_a_bad_sources_configuration_before_the_demo_serves() {
    let check = |sources: &str| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_hookledger-examples"))
            .arg("check-config")
            .env_clear()
            .env("DATABASE_URL", "postgres://127.0.0.1:1/unused")
            .env("HOOKLEDGER_SOURCES", sources)
            .output()
            .unwrap();
        hookledger_tests::test_log::record("hookledger", &output);
        output
    };
    let line = one_line_failure(&check("not json"));
    assert!(line.contains("sources JSON is invalid"), "{line}");
    let secret = check(r#"[{"name": "s", "scheme": "stripe", "secrets": "whsec_oops"}]"#);
    one_line_failure(&secret);
    assert!(!stderr(&secret).contains("whsec_oops"));
    // GitHub: no example handler runs on it (this CLI has them on every Stripe source).
    let good = check(r#"[{"name": "s", "scheme": "github", "secrets": ["a-secret"]}]"#);
    assert!(good.status.success(), "{good:?}");
    assert_eq!(
        stdout(&good),
        "configuration: sources s\nsource s: no handler; no target\nwarning: source \"s\" has no \
         handler and no built-in target: every event is recorded and answered 200 \"ignored\"\n"
    );
    // demo.sh runs the check (with this binary) before it starts serving.
    let demo =
        std::fs::read_to_string(hookledger_tests::repo_root().join("scripts/demo.sh")).unwrap();
    let check_at = demo
        .find("\"$hookledger\" check-config")
        .expect("demo.sh checks the configuration with hookledger");
    assert!(check_at < demo.find("cargo lambda watch").unwrap());
    assert!(demo.find("\"$hookledger\" migrate").unwrap() < check_at);
}

/// A GitHub source (no example handler runs on it) with one SQL handler whose statement is
/// `statement` (one text parameter) and whose parameter reads `path`.
fn sql_source(statement: &str, path: &str) -> String {
    serde_json::json!([{"name": "s", "scheme": "github", "secrets": ["a-secret"],
        "handlers": [{"event_types": ["push"],
                      "sql": [{"statement": statement,
                               "params": [{"path": path, "type": "text"}]}]}]}])
    .to_string()
}

#[tokio::test]
async fn hookledger_check_config_refuses_a_bad_sql_handler_with_and_without_a_database() {
    let check_with = |url: &str, sources: &str, strict: bool| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_hookledger-examples"))
            .arg("check-config")
            .args(strict.then_some("--strict"))
            .env_clear()
            .env("DATABASE_URL", url)
            .env("HOOKLEDGER_SOURCES", sources)
            .output()
            .unwrap();
        hookledger_tests::test_log::record("hookledger", &output);
        output
    };
    let check = |url: &str, sources: &str| check_with(url, sources, false);
    let unused = "postgres://127.0.0.1:1/unused";
    // Refused while parsing: no database needed.
    let line = one_line_failure(&check(
        unused,
        &sql_source("INSERT INTO pushes (id) VALUES ($1)", "after"),
    ));
    assert!(
        line.contains("source \"s\"")
            && line.contains("SQL handler #1 (event_types \"push\"), statement 1")
            && line.contains("JSON pointer"),
        "{line}"
    );
    // A count that does not match: said once (the message carried its cause twice).
    let line = one_line_failure(&check(
        unused,
        &sql_source("INSERT INTO pushes (id, at) VALUES ($1, $2)", "/after"),
    ));
    assert_eq!(
        line.matches("params lists 1").count(),
        1,
        "the problem is said once: {line}"
    );
    // Good, no database: said so, and the check passes (make check has no database).
    let good = sql_source("INSERT INTO pushes (id) VALUES ($1)", "/after");
    let offline = check(unused, &good);
    assert!(offline.status.success(), "{offline:?}");
    assert!(
        stdout(&offline).contains("source s: handlers for push")
            && stdout(&offline)
                .contains("SQL handlers: statements not prepared (no database reachable)"),
        "{}",
        stdout(&offline)
    );
    // With --strict (CI), statements no database checked are a failure, not a pass.
    let line = one_line_failure(&check_with(unused, &good, true));
    assert!(
        line.contains("--strict") && line.contains("not checked against the schema"),
        "{line}"
    );
    // With a database: prepared against its schema, and refused when it does not prepare.
    let db = hookledger_tests::test_db().await.unwrap();
    db.connect()
        .await
        .unwrap()
        .batch_execute("CREATE TABLE pushes (id text PRIMARY KEY)")
        .await
        .unwrap();
    let online = check(&db.url, &good);
    assert!(online.status.success(), "{online:?}");
    let strict = check_with(&db.url, &good, true);
    assert!(strict.status.success(), "{strict:?}");
    assert!(
        stdout(&online).contains("SQL handlers: statements prepared against the database (1)"),
        "{}",
        stdout(&online)
    );
    let line = one_line_failure(&check(
        &db.url,
        &sql_source("INSERT INTO no_such_table (id) VALUES ($1)", "/after"),
    ));
    assert!(
        line.contains("source \"s\": SQL handler #1 (event_types \"push\"), statement 1")
            && line.contains("no_such_table"),
        "{line}"
    );
}

#[tokio::test]
async fn hookledger_redrive_dry_run_json_reports_what_would_move_and_writes_nothing() {
    let db = hookledger_tests::test_db().await.unwrap();
    seed_dead(
        &db,
        &[("evt_a", true), ("evt_b", true), ("evt_lean", false)],
    )
    .await;
    let before = snapshot(&db).await;
    let output = hookledger(
        &db.url,
        &[
            "redrive",
            "--source",
            "stripe-deferred",
            "--event-id",
            "evt_a",
            "evt_b",
            "evt_lean",
            "evt_nowhere",
            "--dry-run",
            "--json",
        ],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "",
        "--json draws no progress and logs nothing"
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(&output)));
    assert_eq!(
        report,
        serde_json::json!({
            "source": "stripe-deferred", "status": "dead", "dry_run": true, "matched": 2,
            "redriven": 0, "no_payload": 1, "not_dead": [], "not_found": ["evt_nowhere"],
            "no_payload_ids": ["evt_lean"], "event_ids": ["evt_a", "evt_b"], "complete": true
        })
    );
    assert_eq!(snapshot(&db).await, before);

    // By window, dry run: the same two, and still nothing written.
    let output = hookledger(
        &db.url,
        &[
            "redrive",
            "--source",
            "stripe-deferred",
            "--since",
            "2000-01-01T00:00:00Z",
            "--dry-run",
            "--json",
        ],
    )
    .await;
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (report["matched"].as_u64(), report["no_payload"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(snapshot(&db).await, before);
}

#[tokio::test]
async fn hookledger_redrive_moves_dead_letters_and_names_the_ids_it_left() {
    let db = hookledger_tests::test_db().await.unwrap();
    seed_dead(&db, &[("evt_a", true), ("evt_lean", false)]).await;
    let output = hookledger(
        &db.url,
        &[
            "redrive",
            "--source",
            "stripe-deferred",
            "--event-id",
            "evt_a",
            "--event-id",
            "evt_lean",
            "--event-id",
            "evt_nowhere",
        ],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with("stripe-deferred: re-drove 1 of 1 dead letters"),
        "{text}"
    );
    assert!(text.contains("no payload stored"), "{text}");
    assert!(text.contains("evt_lean"), "{text}");
    assert!(text.contains("not in the ledger: 1: evt_nowhere"), "{text}");
    let client = db.connect().await.unwrap();
    let rows: Vec<(String, String, i32)> = client
        .query(
            "SELECT event_id, status::text, attempts FROM webhook_event ORDER BY event_id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    assert_eq!(
        rows,
        [
            ("evt_a".to_owned(), "claimed".to_owned(), 0),
            ("evt_lean".to_owned(), "dead".to_owned(), 8)
        ]
    );

    // inspect shows the move and the error it came back from.
    let output = hookledger(
        &db.url,
        &["inspect", "--source", "stripe-deferred", "evt_a", "--json"],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let row: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(row["status"], "claimed");
    assert_eq!(row["attempts"], 0);
    assert_eq!(row["replayed"], false);
    assert_eq!(row["history"][0]["action"], "redrive");
    assert_eq!(row["history"][0]["last_error"], "downstream answered 502");
    assert!(row["claimed_at"].as_str().unwrap().ends_with('Z'), "{row}");
    let text = stdout(
        &hookledger(
            &db.url,
            &["inspect", "--source", "stripe-deferred", "evt_a"],
        )
        .await,
    );
    assert!(
        text.starts_with("stripe-deferred/evt_a (payment_intent.succeeded)"),
        "{text}"
    );
    assert!(
        text.contains("redrive (was dead, 8 attempts, error \"downstream answered 502\")"),
        "{text}"
    );
}

#[tokio::test]
async fn hookledger_inspect_shows_the_outcome_of_a_completed_event() {
    let db = hookledger_tests::test_db().await.unwrap();
    let client = db.connect().await.unwrap();
    // Completed rows as the paths write them: a handler's answer, the recorded no-op of a type
    // without a handler, the ordering guard's no-op; and a dead one.
    client
        .batch_execute(
            "INSERT INTO webhook_event
                 (source, event_id, event_type, payload_digest, status, response_status,
                  response_body, completed_at)
             VALUES ('stripe', 'evt_done', 'payment_intent.succeeded', sha256('a'), 'completed',
                     200, '{\"order_id\": \"ord_1\", \"status\": \"recorded\"}', now()),
                    ('stripe', 'evt_nobody', 'invoice.paid', sha256('b'), 'completed', 200,
                     jsonb_build_object('status', 'ignored', 'event_type', 'invoice.paid'), now()),
                    ('stripe', 'evt_old', 'customer.subscription.updated', sha256('c'),
                     'completed', 200, '{\"status\": \"stale\", \"version\": 1}', now());
             INSERT INTO webhook_event
                 (source, event_id, event_type, payload_digest, status, attempts, last_error,
                  dead_at)
             VALUES ('stripe', 'evt_gone', 'invoice.paid', sha256('d'), 'dead', 8, 'gave up',
                     now());",
        )
        .await
        .unwrap();
    for (id, outcome, line) in [
        ("evt_done", "processed", "processed (a handler ran)"),
        (
            "evt_nobody",
            "ignored",
            "ignored (no handler for invoice.paid: the recorded no-op",
        ),
        ("evt_old", "stale", "stale (the ordering guard's no-op"),
        ("evt_gone", "dead", "dead"),
    ] {
        let output = hookledger(&db.url, &["inspect", "--source", "stripe", id, "--json"]).await;
        assert!(output.status.success(), "{}", stderr(&output));
        let row: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(row["outcome"], outcome, "{row}");
        let text = stdout(&hookledger(&db.url, &["inspect", "--source", "stripe", id]).await);
        let shown = text
            .lines()
            .find(|l| l.trim_start().starts_with("outcome "))
            .unwrap_or_else(|| panic!("no outcome line: {text}"));
        assert!(
            shown.trim_start()["outcome".len()..]
                .trim_start()
                .starts_with(line),
            "{id}: {shown}"
        );
    }
    // A completed row shows status completed and its outcome beside it.
    let text = stdout(&hookledger(&db.url, &["inspect", "--source", "stripe", "evt_nobody"]).await);
    assert!(text.contains("status            completed"), "{text}");
}

#[tokio::test]
async fn hookledger_rejected_prints_the_counts_per_source_and_reason() {
    let db = hookledger_tests::test_db().await.unwrap();
    let output = hookledger(&db.url, &["rejected"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).ends_with("none\n"), "{}", stdout(&output));
    // Counts as the receiver writes them: per source, reason and hour (UTC).
    db.connect()
        .await
        .unwrap()
        .batch_execute(
            "INSERT INTO rejected_delivery (source, reason, bucket, count, last_at)
             SELECT source, reason, date_trunc('hour', now() - age, 'UTC'), n,
                    date_trunc('hour', now() - age, 'UTC') + interval '1 minute'
             FROM (VALUES ('stripe', 'unauthorized', interval '0 minutes', 3),
                          ('stripe', 'unauthorized', interval '5 hours', 4),
                          ('stripe', 'too_large', interval '3 days', 1),
                          ('(unknown)', 'unknown_source', interval '2 hours', 2),
                          ('github', 'bad_request', interval '20 days', 9))
                  AS r(source, reason, age, n)",
        )
        .await
        .unwrap();
    // The last 24 hours by default: a plain table.
    let text = stdout(&hookledger(&db.url, &["rejected"]).await);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("rejected deliveries since "), "{text}");
    let columns = |line: &str| {
        line.split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        columns(lines[1]),
        ["SOURCE", "REASON", "STATUS", "COUNT", "LAST", "SEEN"]
    );
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(
        columns(lines[2])[..4],
        ["(unknown)", "unknown_source", "404", "2"]
    );
    assert_eq!(
        columns(lines[3])[..4],
        ["stripe", "unauthorized", "401", "7"]
    );
    assert!(columns(lines[3])[4].ends_with('Z'), "{text}");
    // A week, as JSON.
    let output = hookledger(&db.url, &["rejected", "--since", "7d", "--json"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows: Vec<(String, String, u64, u64)> = report["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["source"].as_str().unwrap().to_owned(),
                r["reason"].as_str().unwrap().to_owned(),
                r["status"].as_u64().unwrap(),
                r["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("(unknown)".to_owned(), "unknown_source".to_owned(), 404, 2),
            ("stripe".to_owned(), "too_large".to_owned(), 413, 1),
            ("stripe".to_owned(), "unauthorized".to_owned(), 401, 7),
        ]
    );
    assert!(report["since"].as_str().unwrap().ends_with('Z'), "{report}");
    // A window that is not a duration is a usage error.
    let output = hookledger(&db.url, &["rejected", "--since", "yesterday"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        one_line_failure(&output).contains("--since"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn hookledger_inspect_of_a_missing_id_exits_1_with_one_line() {
    let db = hookledger_tests::test_db().await.unwrap();
    let output = hookledger(&db.url, &["inspect", "--source", "stripe", "evt_missing"]).await;
    assert_eq!(output.status.code(), Some(1));
    let line = one_line_failure(&output);
    assert_eq!(
        line,
        "hookledger: stripe/evt_missing not found in the ledger"
    );
    assert_eq!(stdout(&output), "");
}

/// tokio-postgres logs each statement's parameters at debug (target `tokio_postgres::query`):
/// the CLI caps it at info however specific the `RUST_LOG` directive, as the functions do.
#[tokio::test]
async fn hookledger_with_rust_log_debug_never_logs_a_statement_s_parameters() {
    let db = hookledger_tests::test_db().await.unwrap();
    let output = hookledger_tests::hookledger_command(
        env!("CARGO_BIN_EXE_hookledger-examples"),
        &db.url,
        &events_dir().join("sources.local.json"),
    )
    .args(["inspect", "--source", "stripe", "evt_parameter_probe"])
    .env(
        "RUST_LOG",
        "tokio_postgres::query=trace,tokio_postgres=trace,trace",
    )
    .output()
    .await
    .expect("hookledger runs");
    hookledger_tests::test_log::record("hookledger", &output);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = stderr(&output);
    // Without the cap, stderr has `DEBUG tokio_postgres::query: executing statement s0 with
    // parameters: ["stripe", "evt_parameter_probe"]`.
    assert!(!text.contains("with parameters"), "{text}");
    assert!(!text.contains("tokio_postgres"), "{text}");
}

#[tokio::test]
async fn hookledger_stuck_json_lists_the_stuck_claims_oldest_first() {
    let db = hookledger_tests::test_db().await.unwrap();
    let client = db.connect().await.unwrap();
    client
        .batch_execute(
            "INSERT INTO webhook_event
                 (source, event_id, event_type, payload_digest, status, claimed_at)
             SELECT 'stripe', id, 't', sha256(id::bytea), 'claimed', now() - age
             FROM (VALUES ('evt_old', interval '2 hours'), ('evt_mid', interval '20 minutes'),
                          ('evt_fresh', interval '5 seconds')) AS k(id, age)",
        )
        .await
        .unwrap();
    let output = hookledger(&db.url, &["stuck", "--json"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["total"], 2, "{report}");
    assert_eq!(report["stuck_after_secs"], 300);
    assert_eq!(report["capped"], false);
    assert_eq!(report["sources"]["stripe"]["count"], 2);
    let oldest = report["sources"]["stripe"]["oldest_age_secs"]
        .as_u64()
        .unwrap();
    assert!((7200..7300).contains(&oldest), "{report}");
    let keys: Vec<&str> = report["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["evt_old", "evt_mid"]);

    let text = stdout(&hookledger(&db.url, &["stuck", "--stuck-after-secs", "3600"]).await);
    assert!(text.starts_with("1 stuck at "), "{text}");
    assert!(text.contains("stripe/evt_old (2h)"), "{text}");
    assert!(!text.contains("evt_mid"), "{text}");
}

#[tokio::test]
async fn hookledger_refuses_with_one_line_and_a_non_zero_exit() {
    let db = hookledger_tests::test_db().await.unwrap();
    seed_dead(&db, &[("evt_a", true)]).await;
    let before = snapshot(&db).await;
    let cases: [(&[&str], &str); 5] = [
        (
            &["redrive", "--source", "nowhere", "--event-id", "evt_a"],
            "source \"nowhere\" is not configured",
        ),
        (
            &[
                "redrive",
                "--source",
                "stripe-deferred",
                "--since",
                "yesterday",
            ],
            "\"yesterday\" is not an RFC 3339 time",
        ),
        (
            &[
                "redrive",
                "--source",
                "github",
                "--ignored",
                "--event-type",
                "push",
                "--since",
                "2026-01-01T00:00:00Z",
            ],
            "has no handler for event type \"push\"",
        ),
        (
            &[
                "redrive",
                "--source",
                "stripe-deferred",
                "--since",
                "2026-01-02T00:00:00Z",
                "--until",
                "2026-01-01T00:00:00Z",
            ],
            "until must be after since",
        ),
        (
            &[
                "redrive",
                "--source",
                "stripe-deferred",
                "--event-id",
                "a",
                "--since",
                "2026-01-01T00:00:00Z",
            ],
            "cannot be used with",
        ),
    ];
    for (args, reason) in cases {
        let output = hookledger(&db.url, args).await;
        let line = one_line_failure(&output);
        assert!(line.contains(reason), "{args:?}: {line}");
    }
    // A usage error exits 2, with clap's reason on the one line.
    let output = hookledger(&db.url, &["redrive", "--source", "stripe"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(one_line_failure(&output).contains("--event-id"));
    assert_eq!(snapshot(&db).await, before, "a refusal writes nothing");
    // No DATABASE_URL: one line naming it.
    let output = Command::new(env!("CARGO_BIN_EXE_hookledger-examples"))
        .arg("stuck")
        .env_clear()
        .output()
        .await
        .unwrap();
    assert!(one_line_failure(&output).contains("DATABASE_URL"));
}

#[tokio::test]
async fn a_time_that_is_not_rfc_3339_is_a_usage_error_with_exit_status_2() {
    let db = hookledger_tests::test_db().await.unwrap();
    for args in [
        &["redrive", "--source", "stripe", "--since", "yesterday"][..],
        &["replay", "--source", "stripe", "--since", "2026-12-01"][..],
    ] {
        let output = hookledger(&db.url, args).await;
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        let line = one_line_failure(&output);
        assert!(line.contains("RFC 3339"), "{line}");
    }
}

#[tokio::test]
async fn hookledger_redrive_outbox_sends_dead_messages_again_and_inspect_shows_them() {
    let db = hookledger_tests::test_db().await.unwrap();
    seed_dead(&db, &[("evt_o", true)]).await;
    let client = db.connect().await.unwrap();
    client
        .execute(
            "INSERT INTO outbox (source, event_id, n, event_type, target, payload, content_type,
                                 status, attempts, last_error, last_status, dead_at)
             VALUES ('stripe-deferred', 'evt_o', 1, 'payment_intent.succeeded', 'billing',
                     '\\x7b7d', 'application/json', 'dead', 8,
                     'fatal: HTTP 400: {\"error\": \"unknown customer\"}', 400,
                     now() - interval '10 minutes')",
            &[],
        )
        .await
        .unwrap();
    let text = stdout(
        &hookledger(
            &db.url,
            &["inspect", "--source", "stripe-deferred", "evt_o"],
        )
        .await,
    );
    assert!(
        text.contains("stripe-deferred:evt_o:1 -> billing dead at ")
            && text.contains("(8 attempts, HTTP 400): fatal: HTTP 400"),
        "{text}"
    );
    let output = hookledger(
        &db.url,
        &[
            "redrive",
            "--source",
            "stripe-deferred",
            "--outbox",
            "--event-id",
            "evt_o",
            "--json",
        ],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["status"], "outbox");
    assert_eq!(report["redriven"], 1);
    assert_eq!(
        report["idempotency_keys"],
        serde_json::json!(["stripe-deferred:evt_o:1"])
    );
    let row = client
        .query_one(
            "SELECT status::text, attempts FROM outbox WHERE event_id = 'evt_o'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, i32>(1)),
        ("pending".to_owned(), 0)
    );
    // The event itself stays dead: only its message moved.
    let status: String = client
        .query_one(
            "SELECT status::text FROM webhook_event WHERE event_id = 'evt_o'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "dead");
    // --outbox and --ignored are two different things.
    let output = hookledger(
        &db.url,
        &[
            "redrive",
            "--source",
            "stripe-deferred",
            "--outbox",
            "--ignored",
            "--event-type",
            "x",
            "--since",
            "2026-12-01T00:00:00Z",
        ],
    )
    .await;
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}
