//! SQL handlers declared in the sources configuration (`shared::sql_handler`): their statements
//! run in the claim's transaction (in its one statement when they are plain INSERT rows),
//! through the ordering guard, routed by `when`; a missing value kills the event without
//! quoting the payload; a statement the schema refuses stops the function from serving; the
//! worker runs a deferred source's SQL handlers the same way.

use hookledger_tests::PAYLOAD_MARKER;
use shared::Outcome;

use crate::helpers::*;

/// The business tables the handlers below write.
const SCHEMA: &str = "
CREATE TABLE pay_refunds (charge_id text PRIMARY KEY, amount_minor bigint NOT NULL,
                      event_id text NOT NULL, refunded_at timestamptz, ratio numeric);
CREATE TABLE big_refunds (charge_id text PRIMARY KEY);
CREATE TABLE charges (id text PRIMARY KEY, state text NOT NULL, version bigint NOT NULL);";

/// The refund handler of issue 26: one plain INSERT row (the one-statement shape).
fn refund_handler() -> serde_json::Value {
    serde_json::json!({
        "event_types": ["charge.refunded"],
        "when": "body.data.object.amount_refunded > `0`",
        "sql": [{
            "statement": "INSERT INTO pay_refunds (charge_id, amount_minor, event_id, refunded_at, ratio) \
                          VALUES ($1, $2, $3, $4, $5) ON CONFLICT (charge_id) DO NOTHING",
            "params": [
                {"path": "/data/object/id", "type": "text"},
                {"path": "/data/object/amount_refunded", "type": "bigint"},
                {"event": "id"},
                {"path": "/created", "type": "timestamptz"},
                {"path": "/data/object/ratio", "type": "numeric", "optional": true}
            ]
        }],
        "response": {"status": 200, "body": {"refund": "recorded"}}
    })
}

/// A charge's state through the ordering guard (the transaction shape), answering the row.
fn charge_handler() -> serde_json::Value {
    serde_json::json!({
        "event_types": ["charge.updated"],
        "sql": [{
            "statement": "INSERT INTO charges (id, state, version) VALUES ($1, $2, $3) \
                          ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, version = EXCLUDED.version \
                          RETURNING id, state",
            "params": [
                {"path": "/data/object/id", "type": "text"},
                {"path": "/data/object/status", "type": "text"},
                {"path": "/created", "type": "bigint"}
            ]
        }],
        "order": {"entity_type": "charge", "entity": "/data/object/id", "version": "/created"},
        "response": {"returning": 1}
    })
}

/// A receiver whose Standard Webhooks source `pay` has `handlers`, over a database with
/// [`SCHEMA`].
async fn app_with(handlers: serde_json::Value) -> TestApp {
    let mut source = standard_source("pay", "inline", serde_json::json!([]));
    source["handlers"] = handlers;
    let (app, _) = spawn_app_with_sources(serde_json::json!([source])).await;
    app.db
        .connect()
        .await
        .unwrap()
        .batch_execute(SCHEMA)
        .await
        .unwrap();
    app
}

/// A `kind` event for charge `charge` at version `created`, carrying the payload marker.
fn event(kind: &str, charge: &str, created: i64, extra: serde_json::Value) -> String {
    let mut object = serde_json::json!({
        "id": charge,
        "status": format!("state at {created}"),
        "description": PAYLOAD_MARKER,
    });
    if let (Some(object), Some(extra)) = (object.as_object_mut(), extra.as_object()) {
        object.extend(extra.clone());
    }
    serde_json::json!({"type": kind, "created": created, "data": {"object": object}}).to_string()
}

fn refund(charge: &str, amount: i64) -> String {
    event(
        "charge.refunded",
        charge,
        NOW - 10,
        serde_json::json!({"amount_refunded": amount, "ratio": "0.25"}),
    )
}

#[tokio::test]
async fn fifty_concurrent_copies_of_one_event_apply_the_configured_sql_once() {
    let app = app_with(serde_json::json!([refund_handler()])).await;
    let delivery = standard("msg_storm", &refund("ch_storm", 500), NOW);
    let replies =
        futures_util::future::join_all((0..50).map(|_| app.receive("pay", &delivery))).await;
    let expected = r#"{"refund": "recorded"}"#;
    let mut answered = 0;
    for reply in &replies {
        match reply.status {
            200 => {
                assert_eq!(reply.body, expected, "{reply:?}");
                answered += 1;
            }
            // A copy that waited past lock_timeout on the winner's claim: the provider retries.
            409 => assert_eq!(reply.outcome, Outcome::InFlight, "{reply:?}"),
            _ => panic!("unexpected {reply:?}"),
        }
    }
    assert!(answered >= 1);
    assert_eq!(app.count("SELECT count(*) FROM pay_refunds").await, 1);
    assert_eq!(app.ledger_rows().await, 1);
    let after = app.receive("pay", &delivery).await;
    assert_eq!((after.status, after.body.as_str()), (200, expected));
    let client = app.db.connect().await.unwrap();
    let row = client
        .query_one(
            "SELECT amount_minor, event_id, extract(epoch FROM refunded_at)::bigint, ratio::text \
             FROM pay_refunds",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 500);
    assert_eq!(row.get::<_, String>(1), "msg_storm");
    assert_eq!(row.get::<_, i64>(2), NOW - 10);
    assert_eq!(row.get::<_, String>(3), "0.25");
}

#[tokio::test]
async fn a_plain_insert_sql_handler_is_sent_in_the_claims_one_statement() {
    let app = app_with(serde_json::json!([refund_handler()])).await;
    let reply = app
        .receive("pay", &standard("msg_one", &refund("ch_one", 700), NOW))
        .await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Processed),
        "{reply:?}"
    );
    let client = app.db.connect().await.unwrap();
    let ledger = client
        .query_one(
            "SELECT ctid::text, status::text, xmin::text FROM webhook_event",
            &[],
        )
        .await
        .unwrap();
    // The transaction shape inserts the row claimed and updates it: (0,1) dead, the row at (0,2).
    assert_eq!(
        ledger.get::<_, String>(0),
        "(0,1)",
        "written once, already completed"
    );
    assert_eq!(ledger.get::<_, String>(1), "completed");
    let refund_xmin: String = client
        .query_one("SELECT xmin::text FROM pay_refunds", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        refund_xmin,
        ledger.get::<_, String>(2),
        "committed with the claim"
    );
}

#[tokio::test]
async fn a_stale_version_through_the_guard_completes_as_a_recorded_no_op() {
    let app = app_with(serde_json::json!([charge_handler()])).await;
    let newer = app
        .receive(
            "pay",
            &standard(
                "msg_v2",
                &event("charge.updated", "ch_o", 200, serde_json::json!({})),
                NOW,
            ),
        )
        .await;
    assert_eq!(
        (newer.status, newer.outcome),
        (200, Outcome::Processed),
        "{newer:?}"
    );
    let body: serde_json::Value = serde_json::from_str(&newer.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"id": "ch_o", "state": "state at 200"}),
        "the RETURNING row"
    );
    let older = app
        .receive(
            "pay",
            &standard(
                "msg_v1",
                &event("charge.updated", "ch_o", 100, serde_json::json!({})),
                NOW,
            ),
        )
        .await;
    assert_eq!(
        (older.status, older.outcome),
        (200, Outcome::Processed),
        "{older:?}"
    );
    let body: serde_json::Value = serde_json::from_str(&older.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"status": "stale", "entity_type": "charge"})
    );
    assert_eq!(
        app.texts("SELECT state FROM charges").await,
        vec!["state at 200".to_owned()],
        "the older version wrote nothing"
    );
    assert_eq!(app.ledger_rows().await, 2, "both events are recorded");
    assert_eq!(
        app.texts(
            "SELECT event_id FROM webhook_event WHERE status = 'completed' \
             AND response_body ->> 'status' = 'stale'"
        )
        .await,
        vec!["msg_v1".to_owned()]
    );
}

#[tokio::test]
async fn a_missing_path_kills_the_event_naming_the_path_and_no_payload_value() {
    let app = app_with(serde_json::json!([refund_handler()])).await;
    // No data.object.id.
    let body = serde_json::json!({"type": "charge.refunded", "created": NOW,
        "data": {"object": {"amount_refunded": 5, "description": PAYLOAD_MARKER}}})
    .to_string();
    let reply = app
        .receive("pay", &standard("msg_missing", &body, NOW))
        .await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Dead),
        "{reply:?}"
    );
    let (status, _, last_error) = row(&app, "msg_missing").await;
    assert_eq!(status, "dead");
    let last_error = last_error.unwrap();
    assert!(last_error.contains("\"/data/object/id\""), "{last_error}");
    assert!(
        last_error.contains("statement 1: parameter $1"),
        "{last_error}"
    );
    assert!(!last_error.contains(PAYLOAD_MARKER), "{last_error}");
    assert_eq!(app.count("SELECT count(*) FROM pay_refunds").await, 0);
    // A value that does not convert: the kind is named, never the value.
    let body = event(
        "charge.refunded",
        "ch_bad",
        NOW,
        serde_json::json!({"amount_refunded": 5, "ratio": PAYLOAD_MARKER}),
    );
    let reply = app.receive("pay", &standard("msg_bad", &body, NOW)).await;
    assert_eq!(reply.outcome, Outcome::Dead, "{reply:?}");
    let (_, _, last_error) = row(&app, "msg_bad").await;
    let last_error = last_error.unwrap();
    assert!(
        last_error.contains("$5") && last_error.contains("not a decimal"),
        "{last_error}"
    );
    assert!(!last_error.contains(PAYLOAD_MARKER), "{last_error}");
}

#[tokio::test]
async fn when_routes_to_the_first_handler_that_applies_or_to_the_recorded_no_op() {
    let big = serde_json::json!({
        "event_types": ["charge.*"],
        "when": "body.data.object.amount_refunded > `1000`",
        "sql": [{"statement": "INSERT INTO big_refunds (charge_id) VALUES ($1)",
                 "params": [{"path": "/data/object/id", "type": "text"}]}],
        "response": {"body": {"refund": "big"}}
    });
    let app = app_with(serde_json::json!([big, refund_handler()])).await;
    let large = app
        .receive("pay", &standard("msg_big", &refund("ch_big", 5000), NOW))
        .await;
    assert_eq!(large.body, r#"{"refund": "big"}"#, "{large:?}");
    let small = app
        .receive("pay", &standard("msg_small", &refund("ch_small", 10), NOW))
        .await;
    assert_eq!(small.body, r#"{"refund": "recorded"}"#, "{small:?}");
    assert_eq!(
        app.texts("SELECT charge_id FROM big_refunds").await,
        vec!["ch_big".to_owned()]
    );
    assert_eq!(
        app.texts("SELECT charge_id FROM pay_refunds").await,
        vec!["ch_small".to_owned()]
    );
    // Matched by pattern, but no when holds: the recorded no-op.
    let none = app
        .receive("pay", &standard("msg_zero", &refund("ch_zero", 0), NOW))
        .await;
    assert_eq!(
        (none.status, none.outcome),
        (200, Outcome::Ignored),
        "{none:?}"
    );
    let body: serde_json::Value = serde_json::from_str(&none.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"status": "ignored", "event_type": "charge.refunded"})
    );
    assert_eq!(app.count("SELECT count(*) FROM pay_refunds").await, 1);
}

#[tokio::test]
async fn a_statement_the_schema_refuses_stops_the_function_naming_source_type_and_statement() {
    let broken = serde_json::json!({
        "event_types": ["charge.refunded"],
        "sql": [
            {"statement": "INSERT INTO pay_refunds (charge_id, amount_minor, event_id) VALUES ($1, 1, 'x')",
             "params": [{"path": "/data/object/id", "type": "text"}]},
            {"statement": "INSERT INTO no_such_table (a) VALUES ($1)",
             "params": [{"path": "/data/object/id", "type": "text"}]}
        ]
    });
    let app = app_with(serde_json::json!([broken])).await;
    let (logs, _guard) = capture_logs();
    for id in ["msg_a", "msg_b"] {
        // Every delivery, even of a type no SQL handler takes: the function does not serve.
        let body = if id == "msg_a" {
            refund("ch_a", 1)
        } else {
            typed_body("other.type")
        };
        let reply = app.receive("pay", &standard(id, &body, NOW)).await;
        assert_eq!(
            (reply.status, reply.outcome),
            (500, Outcome::InternalError),
            "{reply:?}"
        );
    }
    assert_eq!(app.ledger_rows().await, 0, "nothing was claimed");
    let (deliveries, refusals): (Vec<_>, Vec<_>) = logs
        .with("level", "ERROR")
        .into_iter()
        .partition(|line| line["message"] == "delivery");
    assert_eq!(
        refusals.len(),
        1,
        "one ERROR line when the refusal is found: {refusals:?}"
    );
    assert_eq!(deliveries.len(), 2, "and each refused delivery's own line");
    for line in refusals.iter().chain(&deliveries) {
        let line = line.to_string();
        for needle in [
            "pay",
            "charge.refunded",
            "statement 2",
            "no_such_table",
            "42P01",
        ] {
            assert!(line.contains(needle), "{needle} not in {line}");
        }
    }
}

#[tokio::test]
async fn a_sql_handler_taking_a_rust_handlers_type_is_a_start_up_error_naming_both() {
    let mut sources: Vec<serde_json::Value> =
        serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
    for source in &mut sources {
        if source["name"] == "stripe" {
            source["handlers"] = serde_json::json!([{
                "event_types": ["payment_intent.*"],
                "sql": [{"statement": "INSERT INTO pay_refunds (charge_id) VALUES ($1)",
                         "params": [{"event": "id"}]}]
            }]);
        }
    }
    let sources = shared::Sources::from_json(&serde_json::to_string(&sources).unwrap()).unwrap();
    let app = shared::App {
        registry: handlers::examples::registry,
        migrations: Vec::new,
    };
    let error = app.handlers(&sources).unwrap_err().to_string();
    assert!(
        error.contains("source \"stripe\"")
            && error.contains("\"payment_intent.succeeded\"")
            && error.contains("SQL handler #1")
            && error.contains("\"payment_intent.*\""),
        "{error}"
    );
}

#[tokio::test]
async fn behind_pgbouncer_the_statements_prepare_and_apply_with_and_without_the_statement_cache() {
    for statement_cache in [false, true] {
        let db = hookledger_tests::test_db().await.unwrap();
        db.connect()
            .await
            .unwrap()
            .batch_execute(SCHEMA)
            .await
            .unwrap();
        let mut database = shared::config::DatabaseSettings::with_url(
            hookledger_tests::db_pooler_url(&db).expect("the pooler's URL"),
        );
        database.pool_size = 2;
        database.statement_cache = statement_cache;
        let mut source = standard_source("pay", "inline", serde_json::json!([]));
        source["handlers"] = serde_json::json!([refund_handler(), charge_handler()]);
        let mut sources: Vec<serde_json::Value> =
            serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
        sources.push(source);
        let app = spawn_app_over_sources(db, database, &serde_json::to_string(&sources).unwrap());
        for n in 0..4 {
            let refund = app
                .receive(
                    "pay",
                    &standard(&format!("msg_r{n}"), &refund(&format!("ch_{n}"), 5), NOW),
                )
                .await;
            assert_eq!(
                (refund.status, refund.outcome),
                (200, Outcome::Processed),
                "{refund:?}"
            );
            let body = event("charge.updated", "ch_p", 100 + n, serde_json::json!({}));
            let charge = app
                .receive("pay", &standard(&format!("msg_c{n}"), &body, NOW))
                .await;
            assert_eq!(
                (charge.status, charge.outcome),
                (200, Outcome::Processed),
                "{charge:?}"
            );
        }
        assert_eq!(
            app.count("SELECT count(*) FROM pay_refunds").await,
            4,
            "cache {statement_cache}"
        );
        assert_eq!(
            app.texts("SELECT state FROM charges").await,
            vec!["state at 103".to_owned()]
        );
    }
}

/// A receiver whose deferred Standard Webhooks source `payd` has `handlers`, over a database
/// with [`SCHEMA`].
async fn deferred_app_with(handlers: serde_json::Value) -> TestApp {
    let mut source = standard_source("payd", "deferred", serde_json::json!([]));
    source["handlers"] = handlers;
    let (app, _) = spawn_app_with_sources(serde_json::json!([source])).await;
    app.db
        .connect()
        .await
        .unwrap()
        .batch_execute(SCHEMA)
        .await
        .unwrap();
    app
}

#[tokio::test]
async fn the_worker_runs_a_deferred_sources_sql_handlers_once() {
    let app = deferred_app_with(serde_json::json!([refund_handler(), charge_handler()])).await;
    let delivery = standard("msg_d1", &refund("ch_d1", 42), NOW);
    for _ in 0..2 {
        assert_eq!(app.receive("payd", &delivery).await.status, 202);
    }
    let charge = event("charge.updated", "ch_d1", 300, serde_json::json!({}));
    assert_eq!(
        app.receive("payd", &standard("msg_d2", &charge, NOW))
            .await
            .status,
        202
    );
    let worker = worker_for(&app);
    let summary = worker.worker.drain(soon, plenty).await.unwrap();
    assert_eq!((summary.leased, summary.completed), (2, 2), "{summary:?}");
    assert_eq!(
        app.texts("SELECT charge_id FROM pay_refunds").await,
        vec!["ch_d1".to_owned()]
    );
    assert_eq!(
        app.texts("SELECT response_body::text FROM webhook_event ORDER BY event_id")
            .await,
        vec![
            r#"{"refund": "recorded"}"#.to_owned(),
            r#"{"id": "ch_d1", "state": "state at 300"}"#.to_owned()
        ]
    );
}

#[tokio::test]
async fn a_worker_whose_sql_handler_does_not_prepare_processes_nothing() {
    let broken = serde_json::json!([{
        "event_types": ["*"],
        "sql": [{"statement": "INSERT INTO no_such_table (a) VALUES ($1)",
                 "params": [{"event": "id"}]}]
    }]);
    let app = deferred_app_with(broken).await;
    // The receiver refuses too: nothing is accepted.
    let reply = app
        .receive("payd", &standard("msg_w", &refund("ch_w", 1), NOW))
        .await;
    assert_eq!(reply.status, 500, "{reply:?}");
    let worker = worker_for(&app);
    let error = worker.worker.drain(soon, plenty).await.unwrap_err();
    assert!(
        shared::error_chain::error_chain(&error).contains("no_such_table"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_when_that_fails_to_evaluate_kills_the_event_naming_the_expression() {
    let failing = serde_json::json!({
        "event_types": ["charge.*"],
        // `length` of a number: a JMESPath type error, for this event only.
        "when": "length(body.data.object.amount_refunded) > `0`",
        "sql": [{"statement": "INSERT INTO big_refunds (charge_id) VALUES ($1)",
                 "params": [{"path": "/data/object/id", "type": "text"}]}]
    });
    let app = app_with(serde_json::json!([failing])).await;
    let reply = app
        .receive("pay", &standard("msg_when", &refund("ch_when", 7), NOW))
        .await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Dead),
        "{reply:?}"
    );
    let (_, _, last_error) = row(&app, "msg_when").await;
    let last_error = last_error.unwrap();
    assert!(
        last_error.contains("when:")
            && last_error.contains("length(body.data.object.amount_refunded)"),
        "{last_error}"
    );
    assert!(
        !last_error.contains(PAYLOAD_MARKER) && !last_error.contains("ch_when"),
        "{last_error}"
    );
    assert_eq!(app.count("SELECT count(*) FROM big_refunds").await, 0);
}

/// PostgreSQL quotes the value in a data exception's message, not only in its DETAIL
/// (`invalid input syntax for type bigint: "<value>"`): a cast in the statement (the reference
/// advises `$2::int` for a narrower column) must not put the payload in `last_error`.
#[tokio::test]
async fn a_cast_the_database_refuses_kills_the_event_without_quoting_the_value() {
    let handler = serde_json::json!({
        "event_types": ["charge.refunded"],
        "sql": [{
            "statement": "INSERT INTO pay_refunds (charge_id, amount_minor, event_id) \
                          VALUES ($1, $2::bigint, $3)",
            "params": [
                {"path": "/data/object/id", "type": "text"},
                {"path": "/data/object/description", "type": "text"},
                {"event": "id"}
            ]
        }]
    });
    let app = app_with(serde_json::json!([handler])).await;
    let reply = app
        .receive("pay", &standard("msg_cast", &refund("ch_cast", 5), NOW))
        .await;
    assert_eq!(reply.outcome, Outcome::Dead, "{reply:?}");
    let (status, _, last_error) = row(&app, "msg_cast").await;
    assert_eq!(status, "dead");
    let last_error = last_error.unwrap();
    assert!(
        last_error.contains("22P02") && last_error.contains("bigint"),
        "{last_error}"
    );
    assert!(!last_error.contains(PAYLOAD_MARKER), "{last_error}");
    assert_eq!(app.count("SELECT count(*) FROM pay_refunds").await, 0);
}

/// A table with a `DO ALSO` rule takes a plain INSERT, and the statement prepares at start-up,
/// but not inside a `WITH` (PostgreSQL: "DO ALSO rules are not supported for data-modifying
/// statements in WITH", SQLSTATE 0A000): the one-statement shape must leave the event to the
/// transaction shape, not fail every delivery of the source.
#[tokio::test]
async fn a_plain_insert_into_a_table_with_a_rule_falls_back_to_the_transaction_shape() {
    let handler = serde_json::json!({
        "event_types": ["charge.refunded"],
        "sql": [{
            "statement": "INSERT INTO big_refunds (charge_id) VALUES ($1)",
            "params": [{"path": "/data/object/id", "type": "text"}]
        }]
    });
    let app = app_with(serde_json::json!([handler])).await;
    app.db
        .connect()
        .await
        .unwrap()
        .batch_execute(
            "CREATE TABLE refund_audit (charge_id text);
             CREATE RULE big_refunds_audit AS ON INSERT TO big_refunds
                 DO ALSO INSERT INTO refund_audit VALUES (NEW.charge_id);",
        )
        .await
        .unwrap();
    let reply = app
        .receive("pay", &standard("msg_rule", &refund("ch_rule", 5), NOW))
        .await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Processed),
        "{reply:?}"
    );
    assert_eq!(app.count("SELECT count(*) FROM big_refunds").await, 1);
    assert_eq!(app.count("SELECT count(*) FROM refund_audit").await, 1);
}
