//! `hookledger sweep` run as the operator runs it: the built binary, a database at
//! `DATABASE_URL` and the sources in a file. Needs PostgreSQL (`make test` starts one).

use hookledger_tests::{events_dir, TestDb};

/// `hookledger sweep ARGS` against `db` with the local sources, as a process.
async fn hookledger_sweep(db: &TestDb, args: &[&str]) -> std::process::Output {
    let output = hookledger_tests::hookledger_command(
        env!("CARGO_BIN_EXE_hookledger-examples"),
        &db.url,
        &events_dir().join("sources.local.json"),
    )
    .arg("sweep")
    .args(args)
    .env("HOOKLEDGER_SWEEP_PAUSE_MS", "1")
    .output()
    .await
    .expect("hookledger runs");
    hookledger_tests::test_log::record("hookledger", &output);
    output
}

#[tokio::test]
async fn hookledger_sweep_json_prints_the_report_of_what_it_deleted() {
    let db = hookledger_tests::test_db().await.unwrap();
    let client = db.connect().await.unwrap();
    // Three expired keys of `stripe`, one of `gone` (no longer configured: 30 days still
    // apply), and one of `stripe` claimed yesterday.
    client
        .batch_execute(
            "INSERT INTO webhook_event
                 (source, event_id, event_type, payload_digest, status, claimed_at,
                  completed_at, response_status, response_body)
             SELECT source, id, 't', sha256(id::bytea), 'completed', at, at, 200, '{}'
             FROM (VALUES ('stripe', 'evt_1', now() - interval '31 days'),
                          ('stripe', 'evt_2', now() - interval '32 days'),
                          ('stripe', 'evt_3', now() - interval '33 days'),
                          ('gone', 'evt_1', now() - interval '40 days'),
                          ('stripe', 'evt_new', now() - interval '1 day'))
                  AS k(source, id, at)",
        )
        .await
        .unwrap();

    let output = hookledger_sweep(&db, &["--json", "--batch-size", "2"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", output.stdout));
    assert_eq!(report["deleted"], 4, "{report}");
    // 2 + 2 + the short one that found nothing left.
    assert_eq!(report["batches"], 3, "{report}");
    assert_eq!(report["stopped"], "done");
    assert_eq!(
        report["deleted_by_source"],
        serde_json::json!({"gone": 1, "stripe": 3})
    );
    assert!(report["duration_ms"].is_u64(), "{report}");
    let oldest = report["oldest_remaining"].as_str().unwrap_or_default();
    assert!(oldest.ends_with('Z'), "{report}");
    let left: Vec<String> = client
        .query("SELECT source || '/' || event_id FROM webhook_event", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(left, ["stripe/evt_new"]);

    // Without --json: the readable summary; nothing is left to delete.
    let output = hookledger_sweep(&db, &[]).await;
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.starts_with("deleted 0 expired keys in 1 batches"),
        "{text}"
    );
    assert!(text.contains("nothing expired is left"), "{text}");
}

#[tokio::test]
async fn hookledger_sweep_refuses_a_non_positive_batch_size() {
    let db = hookledger_tests::test_db().await.unwrap();
    for bad in ["0", "1000000000"] {
        let output = hookledger_sweep(&db, &["--batch-size", bad]).await;
        assert!(!output.status.success(), "--batch-size {bad} was accepted");
    }
    let output = hookledger_sweep(&db, &["--batch-size", "0"]).await;
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--batch-size"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
