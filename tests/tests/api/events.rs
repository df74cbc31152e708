//! The event files in `events/receiver/` through lambda_http's own deserializer and the
//! receiver function's handler: API Gateway HTTP API (v2), REST API (v1, stage in the path),
//! Function URL, with `isBase64Encoded` true and false.

use hookledger_tests::EventFile;
use lambda_http::http::Method;
use lambda_http::{Body, Request};
use receiver::handler::handle_at;

use crate::helpers::spawn_app;

async fn send(app: &crate::helpers::TestApp, request: Request, now: i64) -> (u16, String, bool) {
    let response = handle_at(&app.state, request, now).await.unwrap();
    let status = response.status().as_u16();
    let replayed = response.headers().get("idempotent-replayed").is_some();
    let body = match response.body() {
        Body::Text(text) => text.clone(),
        Body::Binary(bytes) => String::from_utf8(bytes.clone()).unwrap(),
        Body::Empty => String::new(),
        _ => panic!("unexpected body kind"),
    };
    (status, body, replayed)
}

const STRIPE_FLAVOURS: [&str; 4] = [
    "receiver/stripe-payment-intent-succeeded.json",
    "receiver/stripe-payment-intent-succeeded.rest-v1.json",
    "receiver/stripe-payment-intent-succeeded.rest-v1-base64.json",
    "receiver/stripe-payment-intent-succeeded.function-url-base64.json",
];

#[tokio::test]
async fn every_api_gateway_flavour_of_the_same_event_gives_the_same_raw_body() {
    let bodies: Vec<Vec<u8>> = STRIPE_FLAVOURS
        .iter()
        .map(|name| {
            let event = EventFile::load(name).unwrap();
            let request = event.request().unwrap();
            request.body().as_ref().to_vec()
        })
        .collect();
    assert!(bodies.iter().all(|b| b == &bodies[0] && !b.is_empty()));
    let v1 = EventFile::load(STRIPE_FLAVOURS[1])
        .unwrap()
        .request()
        .unwrap();
    assert_eq!(
        v1.uri().path(),
        "/prod/webhooks/stripe",
        "REST v1 keeps the stage"
    );
}

#[tokio::test]
async fn each_flavour_is_processed_once_then_replayed() {
    for name in STRIPE_FLAVOURS {
        let app = spawn_app().await;
        let event = EventFile::load(name).unwrap();
        let now = event.signed_at().unwrap();
        let (status, body, replayed) = send(&app, event.request().unwrap(), now).await;
        assert_eq!(status, 200, "{name}: {body}");
        assert!(body.contains("\"ord_1001\""), "{name}: {body}");
        assert!(!replayed);
        let (again, again_body, replayed) = send(&app, event.request().unwrap(), now + 5).await;
        assert_eq!((again, again_body.as_str()), (200, body.as_str()), "{name}");
        assert!(replayed, "{name}");
        assert_eq!(app.order_rows().await, 1, "{name}");
    }
}

#[tokio::test]
async fn the_demo_scenarios_get_their_documented_statuses() {
    let app = spawn_app().await;
    let cases = [
        ("receiver/stripe-payment-intent-succeeded.json", 200),
        ("receiver/stripe-payment-intent-succeeded.json", 200),
        (
            "receiver/stripe-payment-intent-succeeded.different-body.json",
            409,
        ),
        ("receiver/stripe-bad-signature.json", 401),
        ("receiver/github-push.json", 200),
        ("receiver/standard-webhooks-invoice-paid.json", 200),
    ];
    for (name, expected) in cases {
        let event = EventFile::load(name).unwrap();
        let now = event.signed_at().unwrap_or(1_732_870_000);
        let (status, body, _) = send(&app, event.request().unwrap(), now).await;
        assert_eq!(status, expected, "{name}: {body}");
    }
    assert_eq!(app.ledger_rows().await, 3);
    assert_eq!(app.order_rows().await, 1);
}

#[tokio::test]
async fn a_stale_event_file_is_rejected_at_the_real_time() {
    let app = spawn_app().await;
    let event = EventFile::load(STRIPE_FLAVOURS[0]).unwrap();
    let now = event.signed_at().unwrap() + 301;
    let (status, body, _) = send(&app, event.request().unwrap(), now).await;
    assert_eq!(status, 401);
    assert!(body.contains("tolerance"), "{body}");
    assert_eq!(app.ledger_rows().await, 0);
}

#[tokio::test]
async fn other_methods_and_paths_are_refused() {
    let app = spawn_app().await;
    let event = EventFile::load(STRIPE_FLAVOURS[0]).unwrap();
    let mut get = event.request().unwrap();
    *get.method_mut() = Method::GET;
    assert_eq!(send(&app, get, 0).await.0, 405);
    let mut elsewhere = event.request().unwrap();
    *elsewhere.uri_mut() = "/admin/stripe".parse().unwrap();
    assert_eq!(send(&app, elsewhere, 0).await.0, 404);
    assert_eq!(app.ledger_rows().await, 0);
}
