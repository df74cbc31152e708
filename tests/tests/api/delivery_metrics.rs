//! The per-delivery metrics (`deliveries`, `delivery_latency` by `source` and `outcome`):
//! exactly one per delivery, whatever the outcome, observed through the `emf_metric` debug
//! events that mirror every EMF line.

use std::collections::BTreeMap;

use lambda_http::http::Method;
use lambda_http::{Body, Request};

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
    assert_eq!(app.receive("stripe", &first).await.outcome, "processed");
    assert_eq!(app.receive("stripe", &first).await.outcome, "replayed");
    let mut forged = stripe_payment("evt_m2", "ord_m2", 5, NOW);
    forged.body = payment_intent_body("evt_m2", "ord_m2", 6);
    assert_eq!(app.receive("stripe", &forged).await.outcome, "unauthorized");
    let deferred = deferred(payment_intent_body("evt_m3", "ord_m3", 5));
    assert_eq!(
        app.receive("stripe-deferred", &deferred).await.outcome,
        "accepted"
    );
    // The sender chooses the path segment: any unconfigured source is counted under one
    // fixed value, so made-up sources cannot create metrics.
    for made_up in ["nope", "x-1", "evil\"name"] {
        assert_eq!(app.receive(made_up, &first).await.outcome, "unknown_source");
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
