//! Filters and transforms on built-in targets (issue 26): a target's `filter` decides which
//! events it takes at enqueue (the outbox rows prove it), an event no target takes keeps the
//! one-statement shape, and a target's `transform` reshapes its message at dispatch (a `forward`
//! the official Standard Webhooks library verifies), a failing one making only that message
//! dead while the event completes.

use std::time::{Duration, SystemTime};

use base64::Engine;
use serde_json::{json, Value};

use crate::helpers::*;
use crate::targets::{forward_server, recorded, scratch, SECRET};

/// The local development sources with `targets` added to the `stripe` source (whose
/// `payment_intent.succeeded` handler is plain SQL: the one-statement shape when no target
/// takes the event).
async fn stripe_with_targets(targets: Value) -> TestApp {
    let mut sources: Vec<Value> =
        serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
    let stripe = sources
        .iter_mut()
        .find(|s| s["name"] == "stripe")
        .expect("the local sources have stripe");
    stripe["targets"] = targets;
    let json = serde_json::to_string(&sources).unwrap();
    let db = hookledger_tests::test_db().await.expect("test database");
    let database = db.settings(8);
    spawn_app_over_sources(db, database, &json)
}

fn sqs(name: &str, filter: &str) -> Value {
    json!({"type": "sqs", "name": name, "filter": filter,
           "queue_url": format!("https://sqs.eu-west-1.amazonaws.com/123456789012/{name}")})
}

#[tokio::test]
async fn each_event_goes_only_to_the_targets_whose_filter_holds() {
    let app = stripe_with_targets(json!([
        sqs("big", "body.data.object.amount > `5000`"),
        sqs(
            "small",
            "body.data.object.amount > `1000` && body.data.object.amount <= `5000`"
        ),
        // A JMESPath runtime error for every event (length of a number): never takes one.
        sqs("broken", "length(body.data.object.amount) > `0`"),
        // No filter: every event of its types.
        json!({"type": "eventbridge", "name": "bus", "event_types": ["payment_intent.*"]}),
    ]))
    .await;
    let (logs, _guard) = capture_logs();
    for (id, amount) in [("evt_f_1", 9000), ("evt_f_2", 2000), ("evt_f_3", 500)] {
        let reply = app
            .receive(
                "stripe",
                &stripe_payment(id, &format!("ord_{id}"), amount, NOW),
            )
            .await;
        assert_eq!(reply.status, 200, "{reply:?}");
    }
    assert_eq!(
        app.texts(
            "SELECT event_id || ' ' || target || ' ' || verified_body FROM outbox \
             ORDER BY event_id, n"
        )
        .await,
        [
            "evt_f_1 big true",
            "evt_f_1 bus true",
            "evt_f_2 small true",
            "evt_f_2 bus true",
            "evt_f_3 bus true",
        ]
    );
    // The failing filter queued nothing and failed no event.
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE status = 'completed'")
            .await,
        3
    );
    assert_eq!(app.count("SELECT count(*) FROM orders").await, 3);
    // Visible: a warning per event naming the target and the expression's failing position,
    // and the metric, never a value of the event.
    let text = logs.text();
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("a target's filter failed for this event"))
        .collect();
    assert_eq!(warnings.len(), 3, "{text}");
    for (line, id) in warnings.iter().zip(["evt_f_1", "evt_f_2", "evt_f_3"]) {
        // `target` as the functions' subscriber prints it (without tracing's own target, which
        // this test subscriber adds after it).
        assert!(line.contains(r#""target":"broken""#), "{line}");
        let line: Value = serde_json::from_str(line).unwrap();
        assert_eq!(line["level"], "WARN");
        assert_eq!(line["source"], "stripe");
        assert_eq!(line["event_id"], id);
        let error = line["error"].as_str().unwrap();
        assert!(
            error.contains("length(body.data.object.amount)") && error.contains("column"),
            "{error}"
        );
    }
    assert_eq!(
        text.matches("\"emf_metric\":\"target_filter_failed\"")
            .count(),
        3,
        "{text}"
    );
    for value in ["9000", "2000", hookledger_tests::PAYLOAD_MARKER] {
        assert!(
            !text.contains(value),
            "a value of the event in the log: {value}"
        );
    }
}

#[tokio::test]
async fn an_event_every_filter_excludes_keeps_the_one_statement_shape() {
    let app = stripe_with_targets(json!([sqs("big", "body.data.object.amount > `5000`")])).await;
    let reply = app
        .receive(
            "stripe",
            &stripe_payment("evt_f_small", "ord_small", 500, NOW),
        )
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let client = app.db.connect().await.unwrap();
    let ctid: String = client
        .query_one("SELECT ctid::text FROM webhook_event", &[])
        .await
        .unwrap()
        .get(0);
    // The first tuple of a fresh table, never updated: written once, already completed (the
    // transaction shape inserts it claimed and updates it, leaving the row at (0,2)).
    assert_eq!(
        ctid, "(0,1)",
        "the excluded event took the one-statement shape"
    );
    assert_eq!(app.count("SELECT count(*) FROM outbox").await, 0);
    // The filter holds: the target takes the event, in the transaction shape.
    app.receive("stripe", &stripe_payment("evt_f_big", "ord_big", 9000, NOW))
        .await;
    assert_eq!(
        app.texts("SELECT event_id || ' ' || target FROM outbox")
            .await,
        ["evt_f_big big"]
    );
    let completed: String = client
        .query_one(
            "SELECT ctid::text FROM webhook_event WHERE event_id = 'evt_f_big'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        completed, "(0,3)",
        "inserted claimed at (0,2), then completed: the transaction shape"
    );
}

#[tokio::test]
async fn a_failing_transform_makes_its_message_dead_while_the_event_completes_and_a_reshaped_forward_verifies(
) {
    let record = scratch("transforms");
    let server = forward_server(&record);
    let url = |path: &str| format!("http://127.0.0.1:{}{path}", server.port);
    let (app, _) = spawn_app_with_sources(json!([{
        "name": "relay", "scheme": "stripe", "secrets": [STRIPE_SECRET],
        "targets": [
            {"name": "service", "type": "forward", "url": url("/hooks"), "secret": SECRET,
             "transform": "{event: id, kind: type, order: body.data.object.metadata.order_id, \
                            amount: body.data.object.amount}"},
            // length() of a number: fails for every event at dispatch.
            {"name": "broken", "type": "forward", "url": url("/broken"), "secret": SECRET,
             "transform": "length(body.data.object.amount)"},
        ],
    }]))
    .await;
    let reply = app
        .receive("relay", &stripe_payment("evt_t_1", "ord_t_1", 4242, NOW))
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(row(&app, "evt_t_1").await.0, "completed");

    let worker = worker_for(&app);
    let at = SystemTime::now() + Duration::from_secs(1);
    let summary = worker.worker.drain(move || at, plenty).await.unwrap();
    assert_eq!(
        (summary.outbox.delivered, summary.outbox.dead),
        (1, 1),
        "{summary:?}"
    );
    drop(server);

    let client = app.db.connect().await.unwrap();
    let rows = client
        .query(
            "SELECT target, status::text, last_error FROM outbox ORDER BY n",
            &[],
        )
        .await
        .unwrap();
    let rows: Vec<(String, String, Option<String>)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(rows[0].0, "service");
    assert_eq!((rows[0].1.as_str(), &rows[0].2), ("delivered", &None));
    assert_eq!((rows[1].0.as_str(), rows[1].1.as_str()), ("broken", "dead"));
    let error = rows[1].2.clone().unwrap_or_default();
    assert!(
        error.contains("transform")
            && error.contains("length(body.data.object.amount)")
            && error.contains("column"),
        "{error}"
    );
    assert!(
        !error.contains("4242") && !error.contains(hookledger_tests::PAYLOAD_MARKER),
        "no value of the event in last_error: {error}"
    );
    // The event itself is untouched by its message's failure.
    assert_eq!(row(&app, "evt_t_1").await.0, "completed");

    let requests = recorded(&record);
    assert_eq!(requests.len(), 1, "only the service's message was sent");
    let request = &requests[0];
    assert_eq!(request["path"], "/hooks");
    assert_eq!(
        request["verified"], true,
        "the official library verifies the transformed bytes: {}",
        request["error"]
    );
    assert_eq!(request["webhook_id"], "relay:evt_t_1:1");
    assert_eq!(request["headers"]["content-type"], "application/json");
    let sent = base64::engine::general_purpose::STANDARD
        .decode(request["body_b64"].as_str().unwrap())
        .unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    assert_eq!(
        sent,
        json!({"event": "evt_t_1", "kind": "payment_intent.succeeded", "order": "ord_t_1",
               "amount": 4242})
    );
}

/// A handler that adds a message of its own to the `service` target.
struct Notes;

#[async_trait::async_trait]
impl shared::handler::Handler for Notes {
    async fn handle(
        &self,
        tx: &mut shared::ledger::Tx<'_>,
        event: &shared::effect::Event<'_>,
    ) -> Result<shared::effect::Effect, shared::effect::HandlerError> {
        tx.outbox(
            "service",
            &json!({"note": "from the handler", "event": event.event_id}),
        )?;
        Ok(shared::effect::Effect::ok(json!({"noted": true})))
    }
}

#[tokio::test]
async fn a_handlers_own_message_is_never_transformed_and_a_fixed_transform_applies_on_redrive() {
    const BROKEN: &str = "body.data.object.metadata.nope";
    const FIXED: &str = "{event: id, amount: body.data.object.amount}";
    let record = scratch("transform-redrive");
    let server = forward_server(&record);
    let (mut app, sources_json) = spawn_app_with_sources(json!([{
        "name": "relay", "scheme": "stripe", "secrets": [STRIPE_SECRET],
        "targets": [{"name": "service", "type": "forward",
                     "url": format!("http://127.0.0.1:{}/hooks", server.port),
                     "secret": SECRET, "transform": BROKEN}],
    }]))
    .await;
    app.state.receiver.handlers.register(
        "relay",
        "payment_intent.succeeded",
        std::sync::Arc::new(Notes) as std::sync::Arc<dyn shared::handler::Handler>,
    );
    let reply = app
        .receive("relay", &stripe_payment("evt_r_1", "ord_r_1", 4242, NOW))
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let at = SystemTime::now() + Duration::from_secs(1);
    let summary = worker_for(&app)
        .worker
        .drain(move || at, plenty)
        .await
        .unwrap();
    assert_eq!(
        (summary.outbox.delivered, summary.outbox.dead),
        (1, 1),
        "{summary:?}"
    );
    assert_eq!(
        app.texts(
            "SELECT n || ' ' || verified_body || ' ' || status || ' ' || coalesce(last_error, '-') \
             FROM outbox ORDER BY n"
        )
        .await,
        [
            format!(
                "1 true dead fatal: transform: expression {BROKEN:?} gave null (a path that \
                 matched nothing?)"
            ),
            "2 false delivered -".to_owned(),
        ]
    );

    // The transform fixed in the configuration, the dead message re-driven: it goes out
    // transformed with the new expression, under the same key.
    let mut fixed = app.settings.clone();
    fixed.sources =
        shared::config::Sources::from_json(&sources_json.replace(BROKEN, FIXED)).unwrap();
    let report = shared::redrive::run(
        &app.receiver().pool,
        &fixed.sources,
        &app.state.receiver.handlers,
        &shared::doorbell::Doorbell::off(),
        "relay",
        &shared::redrive::Selection::OutboxIds(vec!["evt_r_1".to_owned()]),
        false,
        plenty,
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(report.redriven, 1, "{report:?}");
    let worker = worker::handler::AppState::new(
        &fixed,
        app.receiver().pool.clone(),
        handlers::examples::registry(&fixed.sources),
    );
    let at = SystemTime::now() + Duration::from_secs(2);
    let summary = worker.worker.drain(move || at, plenty).await.unwrap();
    assert_eq!(summary.outbox.delivered, 1, "{summary:?}");
    drop(server);

    let requests = recorded(&record);
    let bodies: Vec<(String, Value)> = requests
        .iter()
        .map(|request| {
            assert_eq!(request["verified"], true, "{}", request["error"]);
            assert_eq!(request["headers"]["content-type"], "application/json");
            let body = base64::engine::general_purpose::STANDARD
                .decode(request["body_b64"].as_str().unwrap())
                .unwrap();
            (
                request["webhook_id"].as_str().unwrap().to_owned(),
                serde_json::from_slice(&body).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        bodies,
        [
            (
                "relay:evt_r_1:2".to_owned(),
                json!({"note": "from the handler", "event": "evt_r_1"})
            ),
            (
                "relay:evt_r_1:1".to_owned(),
                json!({"event": "evt_r_1", "amount": 4242})
            ),
        ]
    );
}
