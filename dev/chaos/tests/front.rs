//! The harness's own path end to end, fast enough for `make test`: the real `chaos-receiver`
//! and `chaos-worker` processes behind the Lambda Runtime API front, against the test server
//! (`DATABASE_URL`, as `make test` sets it): an inline `charge.refunded` is applied once
//! (a duplicate is replayed, not re-applied), a bad signature is refused with nothing written,
//! a deferred `invoice.paid` is accepted with 202 and applied by a worker invocation, and a
//! killed receiver comes back by itself.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use chaos::lambda::{scheduled_event, Fleet, Outcome, ProcessSpec};
use chaos::scenarios::DEFAULT_SOURCES;
use chaos::simulator::{secrets_of, SimEvent, Simulator};

fn spec(name: &str, binary: &str, url: &str, logs: &std::path::Path) -> ProcessSpec {
    ProcessSpec {
        name: name.into(),
        binary: PathBuf::from(binary),
        env: vec![
            ("DATABASE_URL".into(), url.into()),
            ("HOOKLEDGER_SOURCES".into(), DEFAULT_SOURCES.into()),
            ("HOOKLEDGER_DB_POOL_SIZE".into(), "1".into()),
            ("RUST_LOG".into(), "warn".into()),
        ],
        log_dir: logs.to_path_buf(),
    }
}

async fn effects(client: &tokio_postgres::Client, id: &str) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM chaos_effects WHERE event_id = $1",
            &[&id],
        )
        .await
        .expect("count")
        .get(0)
}

#[tokio::test]
async fn the_real_functions_answer_through_the_front_and_apply_each_event_once() {
    let server = std::env::var("DATABASE_URL")
        .expect("DATABASE_URL (run under scripts/with-postgres.sh, as make test does)");
    let name = format!("chaos_front_{}", std::process::id());
    let db = chaos::cluster::prepare_database(&server, &name)
        .await
        .expect("database");
    let client = db.connect().await.expect("connect");
    let logs = std::env::temp_dir().join(format!("chaos-front-{}", std::process::id()));
    let receivers = std::sync::Arc::new(
        Fleet::start(
            spec(
                "receiver",
                env!("CARGO_BIN_EXE_chaos-receiver"),
                &db.url,
                &logs,
            ),
            2,
            Duration::from_secs(20),
            Duration::from_secs(20),
        )
        .await
        .expect("receivers"),
    );
    let simulator = Simulator::new(receivers.clone(), secrets_of(DEFAULT_SOURCES));
    let created = bench::unix_now();
    let object = serde_json::json!({"id": "ch_front", "object": "charge"});

    // Inline: applied once; the duplicate is answered from the ledger.
    let inline = SimEvent::stripe(
        "stripe",
        "evt_front_inline",
        "charge.refunded",
        created,
        object.clone(),
    );
    assert_eq!(simulator.attempt(&inline).await, 200);
    assert_eq!(simulator.attempt(&inline).await, 200);
    assert_eq!(effects(&client, "evt_front_inline").await, 1);

    // A wrong signature: refused, nothing written.
    let wrong = Simulator::new(
        receivers.clone(),
        HashMap::from([("stripe".to_owned(), "whsec_not_the_secret".to_owned())]),
    );
    let forged = SimEvent::stripe(
        "stripe",
        "evt_front_forged",
        "charge.refunded",
        created,
        object.clone(),
    );
    let status = wrong.attempt(&forged).await;
    assert!((400..500).contains(&status), "{status}");
    let rows: i64 = client
        .query_one(
            "SELECT count(*) FROM webhook_event WHERE event_id = 'evt_front_forged'",
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 0);
    assert_eq!(effects(&client, "evt_front_forged").await, 0);

    // Deferred: 202, then the worker applies it.
    let deferred = SimEvent::stripe(
        "stripe-deferred",
        "evt_front_deferred",
        "invoice.paid",
        created,
        object,
    );
    assert_eq!(simulator.attempt(&deferred).await, 202);
    assert_eq!(effects(&client, "evt_front_deferred").await, 0);
    let workers = Fleet::start(
        spec("worker", env!("CARGO_BIN_EXE_chaos-worker"), &db.url, &logs),
        1,
        // The template's worker timeout: the worker leases nothing with less than its margin
        // plus the handler timeout left (it answers `"out_of_time": true`).
        Duration::from_secs(300),
        Duration::from_secs(30),
    )
    .await
    .expect("worker");
    let summary = workers.invoke(scheduled_event(), Default::default()).await;
    assert!(
        matches!(summary.outcome, Outcome::Response(_)),
        "{:?}",
        summary.outcome
    );
    let json = summary.outcome.json().unwrap_or_default();
    assert_eq!(json["completed"], 1, "{json}");
    assert_eq!(effects(&client, "evt_front_deferred").await, 1);

    // A killed receiver is replaced, and the next deliveries are served.
    assert!(receivers.environments[0].kill().is_some());
    let again = SimEvent::stripe(
        "stripe",
        "evt_front_after_kill",
        "charge.refunded",
        created,
        serde_json::json!({"id": "ch_front_2"}),
    );
    let record = simulator
        .deliver(&again, 2, &mut chaos::rng::Rng::new(1))
        .await;
    assert_eq!(record.acks, 2, "{record:?}");
    assert_eq!(effects(&client, "evt_front_after_kill").await, 1);

    assert!(receivers.panics().is_empty(), "{:?}", receivers.panics());
    assert!(workers.panics().is_empty(), "{:?}", workers.panics());
    assert!(
        receivers.unexpected_exits().is_empty(),
        "{:?}",
        receivers.exits()
    );
    receivers.shutdown().await;
    workers.shutdown().await;
    drop(client);
    let admin = chaos::cluster::connect(&server).await.expect("server");
    let _ = admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await;
    let _ = std::fs::remove_dir_all(&logs);
}
