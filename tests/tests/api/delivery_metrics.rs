//! The per-delivery metrics (`deliveries`, `delivery_latency` by `source` and `outcome`):
//! exactly one per delivery, whatever the outcome, observed through the `emf_metric` debug
//! events that mirror every EMF line; and `signature_failed`, one per delivery whose signature
//! fails, by `source`.

use std::collections::BTreeMap;

use lambda_http::http::Method;
use lambda_http::{Body, Request};
use shared::Outcome;

use crate::helpers::*;

/// `(source, outcome) -> count` of the `deliveries` events in `logs`, checking each one's
/// shape on the way.
fn deliveries(logs: &Captured) -> BTreeMap<(String, String), usize> {
    let mut counted = BTreeMap::new();
    for line in logs.with("emf_metric", "deliveries") {
        assert_eq!(line["value"], 1, "{line}");
        assert!(line["latency_ms"].is_u64(), "{line}");
        let key = (
            line["source"].as_str().unwrap().to_owned(),
            line["emf_outcome"].as_str().unwrap().to_owned(),
        );
        *counted.entry(key).or_default() += 1;
    }
    counted
}

fn key(source: &str, outcome: &str) -> (String, String) {
    (source.to_owned(), outcome.to_owned())
}

#[tokio::test]
async fn every_delivery_is_counted_once_by_source_and_outcome() {
    let app = spawn_app().await;
    let (logs, _guard) = capture_logs();
    let first = stripe_payment("evt_m1", "ord_m1", 5, NOW);
    assert_eq!(
        app.receive("stripe", &first).await.outcome,
        Outcome::Processed
    );
    assert_eq!(
        app.receive("stripe", &first).await.outcome,
        Outcome::Replayed
    );
    let mut forged = stripe_payment("evt_m2", "ord_m2", 5, NOW);
    forged.body = payment_intent_body("evt_m2", "ord_m2", 6);
    assert_eq!(
        app.receive("stripe", &forged).await.outcome,
        Outcome::Unauthorized
    );
    let deferred = deferred(payment_intent_body("evt_m3", "ord_m3", 5));
    assert_eq!(
        app.receive("stripe-deferred", &deferred).await.outcome,
        Outcome::Accepted
    );
    // The sender chooses the path segment: any unconfigured source is counted under one
    // fixed value, so made-up sources cannot create metrics.
    for made_up in ["nope", "x-1", "evil\"name"] {
        assert_eq!(
            app.receive(made_up, &first).await.outcome,
            Outcome::UnknownSource
        );
    }
    assert_eq!(
        deliveries(&logs),
        BTreeMap::from([
            (key("stripe", "processed"), 1),
            (key("stripe", "replayed"), 1),
            (key("stripe", "unauthorized"), 1),
            (key("stripe-deferred", "accepted"), 1),
            (key("(unknown)", "unknown_source"), 3),
        ]),
        "{}",
        logs.text()
    );
    // The outcome the metric carries is the one the delivery line logs, line for line.
    let logged: Vec<String> = logs
        .with("message", "delivery")
        .iter()
        .map(|line| line["outcome"].as_str().unwrap().to_owned())
        .collect();
    let counted: Vec<String> = logs
        .with("emf_metric", "deliveries")
        .iter()
        .map(|line| line["emf_outcome"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(logged, counted);
}

#[tokio::test]
async fn requests_the_function_refuses_are_counted_too() {
    let app = spawn_app().await;
    let (logs, _guard) = capture_logs();
    let request = |method: Method, path: &str| {
        let mut request = Request::new(Body::Text("{}".into()));
        *request.method_mut() = method;
        *request.uri_mut() = format!("https://example.test{path}").parse().unwrap();
        request
    };
    let statuses = [
        (Method::GET, "/webhooks/stripe"),
        (Method::POST, "/elsewhere"),
        (Method::GET, "/webhooks/made-up"),
    ];
    for (method, path) in statuses {
        receiver::handler::handle_at(&app.state, request(method, path), NOW)
            .await
            .unwrap();
    }
    assert_eq!(
        deliveries(&logs),
        BTreeMap::from([
            (key("stripe", "method_not_allowed"), 1),
            (key("(unknown)", "not_found"), 1),
            (key("(unknown)", "method_not_allowed"), 1),
        ]),
        "{}",
        logs.text()
    );
}

/// With the functions' own subscriber (`shared::telemetry::subscriber`, what `init` installs on
/// stdout), a delivery of a configured source writes ONE line, which is its log line and the
/// EMF document of its metrics at once (CloudWatch reads `_aws` and the dimension and metric
/// members from the root of the line); an unknown source's line stays a plain log line (its
/// metric, under `(unknown)`, goes on its own EMF line).
#[tokio::test]
async fn with_the_functions_subscriber_each_delivery_line_is_also_its_emf_document() {
    let app = spawn_app().await;
    let captured = Captured::default();
    let _guard = tracing::subscriber::set_default(shared::telemetry::subscriber(
        captured.clone(),
        "info,shared::telemetry=debug".parse().expect("a filter"),
    ));
    let first = stripe_payment("evt_l1", "ord_l1", 5, NOW);
    assert_eq!(
        app.receive("stripe", &first).await.outcome,
        Outcome::Processed
    );
    assert_eq!(
        app.receive("stripe", &first).await.outcome,
        Outcome::Replayed
    );
    let mut forged = stripe_payment("evt_l2", "ord_l2", 5, NOW);
    forged.body = payment_intent_body("evt_l2", "ord_l2", 6);
    assert_eq!(
        app.receive("stripe", &forged).await.outcome,
        Outcome::Unauthorized
    );
    let deferred = deferred(payment_intent_body("evt_l3", "ord_l3", 5));
    assert_eq!(
        app.receive("stripe-deferred", &deferred).await.outcome,
        Outcome::Accepted
    );
    assert_eq!(
        app.receive("nope", &first).await.outcome,
        Outcome::UnknownSource
    );

    let text = captured.text();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let delivery: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|line| line["message"] == "delivery")
        .collect();
    let outcomes: Vec<(&str, &str)> = delivery
        .iter()
        .map(|line| {
            (
                line["source"].as_str().unwrap(),
                line["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("stripe", "processed"),
            ("stripe", "replayed"),
            ("stripe", "unauthorized"),
            ("stripe-deferred", "accepted"),
            ("nope", "unknown_source"),
        ],
        "{text}"
    );
    for line in &delivery[..4] {
        let aws = &line["_aws"];
        assert!(
            aws["Timestamp"].as_u64().unwrap() > 1_700_000_000_000,
            "{line}"
        );
        assert_eq!(
            aws["CloudWatchMetrics"],
            serde_json::json!([{
                "Namespace": "hookledger",
                "Dimensions": [["source", "outcome"]],
                "Metrics": [
                    {"Name": "deliveries", "Unit": "Count"},
                    {"Name": "delivery_latency", "Unit": "Milliseconds"}
                ]
            }]),
            "{line}"
        );
        assert_eq!(line["deliveries"], 1, "{line}");
        assert!(line["delivery_latency"].is_u64(), "{line}");
        // Still the log line it was.
        assert!(
            line["event_id"].is_string() && line["status"].is_u64(),
            "{line}"
        );
    }
    assert!(delivery[4].get("_aws").is_none(), "{}", delivery[4]);
    assert!(delivery[4].get("deliveries").is_none(), "{}", delivery[4]);
    // Every delivery is still counted exactly once; only the unknown source's metrics take a
    // line of their own.
    let in_line: Vec<(String, bool)> = lines
        .iter()
        .filter(|line| line["emf_metric"] == "deliveries")
        .map(|line| {
            (
                line["emf_outcome"].as_str().unwrap().to_owned(),
                line["in_log_line"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        in_line,
        [
            ("processed".to_owned(), true),
            ("replayed".to_owned(), true),
            ("unauthorized".to_owned(), true),
            ("accepted".to_owned(), true),
            ("unknown_source".to_owned(), false),
        ],
        "{text}"
    );
}

/// A delivery line the filter drops cannot carry the metrics: they go on their own EMF line.
#[tokio::test]
async fn a_filtered_out_delivery_line_leaves_the_metrics_on_their_own_line() {
    let app = spawn_app().await;
    let captured = Captured::default();
    let _guard = tracing::subscriber::set_default(shared::telemetry::subscriber(
        captured.clone(),
        "warn,shared::telemetry=debug".parse().expect("a filter"),
    ));
    let first = stripe_payment("evt_l4", "ord_l4", 5, NOW);
    assert_eq!(
        app.receive("stripe", &first).await.outcome,
        Outcome::Processed
    );
    let lines = captured.lines();
    assert!(
        lines.iter().all(|line| line["message"] != "delivery"),
        "{lines:?}"
    );
    let counted: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|line| line["emf_metric"] == "deliveries")
        .collect();
    assert_eq!(counted.len(), 1, "{lines:?}");
    assert_eq!(counted[0]["in_log_line"], false);
    assert_eq!(counted[0]["emf_outcome"], "processed");
}

#[tokio::test]
async fn a_bad_signature_is_counted_as_signature_failed_per_source() {
    let app = spawn_app().await;
    let (logs, _guard) = capture_logs();
    let mut forged = stripe_payment("evt_forged", "ord_forged", 5, NOW);
    forged.body = payment_intent_body("evt_forged", "ord_forged", 6);
    for _ in 0..3 {
        assert_eq!(app.receive("stripe", &forged).await.status, 401);
    }
    let good = stripe_payment("evt_good", "ord_good", 5, NOW);
    assert_eq!(app.receive("stripe", &good).await.status, 200);
    let counted = logs.with("emf_metric", "signature_failed");
    assert_eq!(counted.len(), 3, "{}", logs.text());
    assert!(counted
        .iter()
        .all(|line| line["source"] == "stripe" && line["value"] == 1));
}
