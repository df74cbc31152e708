//! `hookledger forget` run as an operator runs it: the built binary, a database at
//! `DATABASE_URL` and the sources in a file whose `stripe` source names its data subjects.

use hookledger_tests::{local_sources_json, TestDb, PAYLOAD_MARKER as MARK};
use serde_json::{json, Value};

const SUBJECT_KEY: &str = "cli-forget-subject-key-0123456789";

/// The local sources with `stripe` naming its subjects at `/data/object/customer`, in a file
/// of this test's own folder.
fn sources() -> (std::path::PathBuf, shared::Sources) {
    let mut sources: Vec<Value> = serde_json::from_str(&local_sources_json().unwrap()).unwrap();
    for source in &mut sources {
        if source["name"] == "stripe" {
            source["subject"] = json!({"pointers": ["/data/object/customer"], "key": SUBJECT_KEY});
        }
    }
    let text = Value::Array(sources).to_string();
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "hookledger-cli-forget-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sources.json");
    std::fs::write(&path, &text).unwrap();
    (path, shared::Sources::from_json(&text).unwrap())
}

async fn hookledger(url: &str, sources: &std::path::Path, args: &[&str]) -> std::process::Output {
    let output = hookledger_tests::hookledger_command(
        env!("CARGO_BIN_EXE_hookledger-examples"),
        url,
        sources,
    )
    .args(args)
    .output()
    .await
    .expect("hookledger runs");
    hookledger_tests::test_log::record("hookledger", &output);
    output
}

/// Rows of `stripe` as the paths leave them, each payload and answer holding the marker:
/// `(event_id, customer, status)`.
async fn seed(db: &TestDb, sources: &shared::Sources, rows: &[(&str, &str, &str)]) {
    let subject = sources
        .get("stripe")
        .and_then(|s| s.subject.as_ref())
        .unwrap();
    let client = db.connect().await.unwrap();
    for (id, customer, status) in rows {
        let payload = json!({"id": id, "data": {"object": {"customer": customer,
                                                           "email": MARK}}})
        .to_string();
        let hash = subject.hash(customer);
        client
            .execute(
                "INSERT INTO webhook_event
                     (source, event_id, event_type, payload_digest, payload, status,
                      response_status, response_body, completed_at, dead_at, last_error,
                      next_attempt_at, subject_hash)
                 VALUES ('stripe', $1, 'payment_intent.succeeded', sha256($1::text::bytea),
                         $2::text::bytea, $3::text::event_status,
                         CASE WHEN $3 = 'completed' THEN 200::smallint END,
                         CASE WHEN $3 = 'completed'
                              THEN jsonb_build_object('receipt_to', $4::text) END,
                         CASE WHEN $3 = 'completed' THEN now() END,
                         CASE WHEN $3 = 'dead' THEN now() END,
                         CASE WHEN $3 IN ('dead', 'failed') THEN 'failed for ' || $4 END,
                         CASE WHEN $3 = 'failed' THEN now() END, $5)",
                &[id, &payload, status, &MARK, &hash.as_slice()],
            )
            .await
            .unwrap();
    }
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The marked rows left, as `event_id`s.
async fn marked(db: &TestDb) -> Vec<String> {
    db.connect()
        .await
        .unwrap()
        .query(
            "SELECT event_id FROM webhook_event
             WHERE position($1 IN convert_from(coalesce(payload, ''), 'UTF8') ||
                   coalesce(response_body::text, '') || coalesce(history::text, '') ||
                   coalesce(last_error, '')) > 0
             ORDER BY event_id",
            &[&MARK],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[tokio::test]
async fn hookledger_forget_erases_a_subjects_events_after_a_dry_run_and_names_the_unfinished() {
    let db = hookledger_tests::test_db().await.unwrap();
    let (file, sources) = sources();
    seed(
        &db,
        &sources,
        &[
            ("evt_k1", "cus_cli", "completed"),
            ("evt_k2", "cus_cli", "dead"),
            ("evt_k3", "cus_cli", "failed"),
            ("evt_o1", "cus_other", "completed"),
        ],
    )
    .await;
    let args = |extra: &[&'static str]| {
        let mut args = vec![
            "forget",
            "--source",
            "stripe",
            "--subject",
            "cus_cli",
            "--by",
            "ops: ticket 7",
            "--reason",
            "erasure request",
        ];
        args.extend_from_slice(extra);
        args
    };

    // Not a terminal to ask on, and no --yes: refused, nothing erased.
    let output = hookledger(&db.url, &file, &args(&[])).await;
    assert!(!output.status.success(), "{}", stdout(&output));
    assert!(stderr(&output).contains("--yes"), "{}", stderr(&output));
    assert_eq!(marked(&db).await.len(), 4);

    // A dry run counts and writes nothing.
    let output = hookledger(&db.url, &file, &args(&["--dry-run", "--json"])).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report,
        json!({"source": "stripe", "target": "subject", "dry_run": true, "events": 3,
               "erased": 2, "outbox_messages": 0, "unfinished_count": 1,
               "unfinished": ["evt_k3"], "batches": 0, "done": false})
    );
    assert_eq!(marked(&db).await.len(), 4);

    let output = hookledger(&db.url, &file, &args(&["--yes"])).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with("stripe: the subject's events: erased 2 events"),
        "{text}"
    );
    assert!(text.contains("unfinished"), "{text}");
    assert!(text.contains("evt_k3"), "{text}");
    assert!(text.contains("run the same forget again"), "{text}");
    // Nothing of the payloads, nor the subject, is printed.
    assert!(!text.contains(MARK) && !text.contains("cus_cli"), "{text}");
    assert_eq!(marked(&db).await, ["evt_k3", "evt_o1"]);

    // inspect shows who erased it, and nothing erased.
    let output = hookledger(&db.url, &file, &["inspect", "--source", "stripe", "evt_k1"]).await;
    let text = stdout(&output);
    assert!(
        text.contains("forget (by \"ops: ticket 7\", reason \"erasure request\")"),
        "{text}"
    );
    assert!(!text.contains(MARK), "{text}");

    // Again: nothing left.
    let output = hookledger(&db.url, &file, &args(&["--yes"])).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("unfinished"),
        "{}",
        stdout(&output)
    );
    let output = hookledger(&db.url, &file, &args(&["--yes", "--json"])).await;
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (report["erased"].clone(), report["done"].clone()),
        (json!(0), json!(true))
    );

    // By event id, the other customer's one.
    let output = hookledger(
        &db.url,
        &file,
        &[
            "forget",
            "--source",
            "stripe",
            "--event-id",
            "evt_o1",
            "--by",
            "ops",
            "--yes",
        ],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("stripe/evt_o1: erased 1 events"),
        "{}",
        stdout(&output)
    );
    assert_eq!(marked(&db).await, ["evt_k3"]);
}

#[tokio::test]
async fn hookledger_forget_refuses_a_subject_on_a_source_without_one_and_a_request_without_by() {
    let db = hookledger_tests::test_db().await.unwrap();
    let (file, _) = sources();
    let output = hookledger(
        &db.url,
        &file,
        &[
            "forget",
            "--source",
            "github",
            "--subject",
            "x",
            "--by",
            "ops",
            "--yes",
        ],
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    let line = stderr(&output);
    assert!(line.starts_with("hookledger: "), "{line}");
    assert!(line.contains("no \"subject\" configured"), "{line}");
    let output = hookledger(
        &db.url,
        &file,
        &["forget", "--source", "stripe", "--event-id", "evt_1"],
    )
    .await;
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("--by"), "{}", stderr(&output));
    let output = hookledger(
        &db.url,
        &file,
        &["forget", "--source", "stripe", "--by", "ops"],
    )
    .await;
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}
