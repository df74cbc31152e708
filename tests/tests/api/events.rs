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

const INVALID_BASE64: [&str; 2] = [
    "receiver/stripe-invalid-base64.function-url.json",
    "receiver/stripe-invalid-base64.rest-v1.json",
];

#[test]
fn lambda_http_alone_panics_on_a_body_flagged_base64_that_does_not_decode() {
    // The reason Base64Guard exists: if this ever stops panicking, the guard may go.
    for name in INVALID_BASE64 {
        let event = EventFile::load(name).unwrap();
        let text = event.json.to_string();
        let outcome = std::panic::catch_unwind(|| lambda_http::request::from_str(&text));
        assert!(outcome.is_err(), "{name}: lambda_http no longer panics");
    }
}

#[tokio::test]
async fn the_full_service_stack_answers_400_to_invalid_base64_and_writes_nothing() {
    use lambda_http::{service_fn, Context, LambdaEvent, Service};

    let app = spawn_app().await;
    let state: &'static receiver::handler::AppState = Box::leak(Box::new(app.state.clone()));
    let mut service = receiver::stack::stack(service_fn(move |request| {
        receiver::handler::function_handler(state, request)
    }));
    for name in INVALID_BASE64 {
        let event = EventFile::load(name).unwrap();
        let payload = serde_json::value::to_raw_value(&event.json).unwrap();
        let response = service
            .call(LambdaEvent::new(payload, Context::default()))
            .await
            .unwrap();
        let response = serde_json::to_value(response).unwrap();
        assert_eq!(response["statusCode"], 400, "{name}: {response}");
        assert!(
            response["body"].as_str().unwrap().contains("base64"),
            "{name}: {response}"
        );
    }
    // A valid event still goes through the same stack.
    let event = EventFile::load(STRIPE_FLAVOURS[3]).unwrap();
    let mut valid = event.clone();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let stripe = hookledger_tests::local_source("stripe").unwrap();
    valid.sign(&stripe.verifier, 0, now).unwrap();
    let payload = serde_json::value::to_raw_value(&valid.json).unwrap();
    let response = service
        .call(LambdaEvent::new(payload, Context::default()))
        .await
        .unwrap();
    let response = serde_json::to_value(response).unwrap();
    assert_eq!(response["statusCode"], 200, "{response}");
    assert_eq!(app.ledger_rows().await, 1);
}

#[tokio::test]
async fn a_sender_cannot_forge_the_invalid_base64_marker() {
    let app = spawn_app().await;
    let mut event = EventFile::load(STRIPE_FLAVOURS[0]).unwrap();
    event
        .set_header(receiver::transport::INVALID_BASE64_HEADER, "1")
        .unwrap();
    let mut payload: lambda_http::request::LambdaRequest =
        serde_json::from_value(event.json.clone()).unwrap();
    receiver::transport::guard(&mut payload);
    let request: lambda_http::Request = payload.into();
    let now = event.signed_at().unwrap();
    let (status, body, _) = send(&app, request, now).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn every_provider_event_file_is_accepted_once_and_replayed_after() {
    let app = spawn_app().await;
    let cases = [
        ("receiver/github-push.json", "push"),
        ("receiver/github-ping-form.json", "ping"),
        ("receiver/shopify-orders-create.json", "orders/create"),
        ("receiver/slack-app-mention.json", "app_mention"),
        ("receiver/slack-slash-command.json", "slash_command"),
        (
            "receiver/paddle-transaction-completed.json",
            "transaction.completed",
        ),
        (
            "receiver/standard-webhooks-invoice-paid.json",
            "invoice.paid",
        ),
        ("receiver/svix-invoice-paid.json", "invoice.paid"),
        (
            "receiver/generic-partner-order-shipped.json",
            "order.shipped",
        ),
    ];
    for (name, event_type) in cases {
        let event = EventFile::load(name).unwrap();
        let now = event.signed_at().unwrap_or(1_732_870_000);
        let (status, body, replayed) = send(&app, event.request().unwrap(), now).await;
        assert_eq!(status, 200, "{name}: {body}");
        assert!(!replayed, "{name}");
        assert!(body.contains(event_type), "{name}: {body}");
        let (again, again_body, replayed) = send(&app, event.request().unwrap(), now).await;
        assert_eq!((again, again_body.as_str()), (200, body.as_str()), "{name}");
        assert!(replayed, "{name}");
    }
    assert_eq!(app.ledger_rows().await, cases.len() as i64);
    let types = app
        .texts("SELECT event_type FROM webhook_event ORDER BY claimed_at")
        .await;
    assert_eq!(types, cases.map(|(_, t)| t.to_owned()));
}

#[tokio::test]
async fn slack_url_verification_is_answered_with_its_challenge_and_not_claimed() {
    let app = spawn_app().await;
    let event = EventFile::load("receiver/slack-url-verification.json").unwrap();
    let now = event.signed_at().unwrap();
    let (status, body, _) = send(&app, event.request().unwrap(), now).await;
    assert_eq!(status, 200);
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["challenge"],
        "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );
    assert_eq!(app.ledger_rows().await, 0);
    // Unsigned, it is refused like any other delivery.
    let mut unsigned = event.clone();
    unsigned.set_header("x-slack-signature", "v0=00").unwrap();
    let (status, _, _) = send(&app, unsigned.request().unwrap(), now).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn a_secret_in_rotation_verifies_and_the_index_is_reported() {
    let app = spawn_app().await;
    let stripe = hookledger_tests::local_source("stripe").unwrap();
    assert_eq!(
        stripe.verifier.key_count(),
        2,
        "sources.local.json rotates Stripe"
    );
    let body = crate::helpers::payment_intent_body("evt_rot", "ord_rot", 10);
    for (index, signing) in [(1usize, "previous"), (0, "current")] {
        let headers = stripe.verifier.sign(index, "", crate::helpers::NOW, &body);
        let mut map = http::HeaderMap::new();
        for (name, value) in headers {
            map.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        let verified = stripe
            .verifier
            .verify(&map, &body, crate::helpers::NOW)
            .unwrap();
        assert_eq!(verified.key_index, index, "{signing} secret");
        let reply = app
            .receiver()
            .receive("stripe", &map, &body, crate::helpers::NOW)
            .await;
        assert_eq!(reply.status, 200, "{signing}: {reply:?}");
    }
    assert_eq!(app.order_rows().await, 1);
}

#[tokio::test]
async fn malformed_query_strings_and_host_headers_do_not_panic_lambda_http() {
    use lambda_http::{service_fn, Context, LambdaEvent, Service};

    let app = spawn_app().await;
    let state: &'static receiver::handler::AppState = Box::leak(Box::new(app.state.clone()));
    let mut service = receiver::stack::stack(service_fn(move |request| {
        receiver::handler::function_handler(state, request)
    }));
    let stripe = hookledger_tests::local_source("stripe").unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    type Edit = fn(&mut EventFile);
    let cases: [(&str, Edit); 3] = [
        ("query with a quote", |e| {
            e.json["rawQueryString"] = "a=\"b\"&c=<d> e".into()
        }),
        ("host with a space", |e| {
            e.set_header("host", "a b").unwrap()
        }),
        ("odd forwarded proto", |e| {
            e.set_header("x-forwarded-proto", "ht tp").unwrap()
        }),
    ];
    for (what, edit) in cases {
        let mut event = EventFile::load(STRIPE_FLAVOURS[0]).unwrap();
        edit(&mut event);
        // Without the guard, lambda_http panics on this event.
        let text = event.json.to_string();
        let unguarded = std::panic::catch_unwind(|| lambda_http::request::from_str(&text));
        assert!(unguarded.is_err(), "{what}: lambda_http no longer panics");
        event.sign(&stripe.verifier, 0, now).unwrap();
        let payload = serde_json::value::to_raw_value(&event.json).unwrap();
        let response = service
            .call(LambdaEvent::new(payload, Context::default()))
            .await
            .unwrap();
        let response = serde_json::to_value(response).unwrap();
        assert_eq!(response["statusCode"], 200, "{what}: {response}");
    }
}

#[test]
fn structurally_invalid_hosts_do_not_panic_lambda_http_after_the_guard() {
    let mut panics = Vec::new();
    for host in [
        "a:99999",
        "[",
        "1.2.3.256",
        ":80",
        "a:b",
        "[::1",
        "0x100000000",
        "a b",
    ] {
        for base in [STRIPE_FLAVOURS[0], STRIPE_FLAVOURS[1]] {
            let mut event = EventFile::load(base).unwrap();
            event.set_header("host", host).unwrap();
            let mut payload: lambda_http::request::LambdaRequest =
                serde_json::from_value(event.json.clone()).unwrap();
            receiver::transport::guard(&mut payload);
            if std::panic::catch_unwind(move || lambda_http::Request::from(payload)).is_err() {
                panics.push(format!("{base}: host {host:?}"));
            }
        }
    }
    assert!(
        panics.is_empty(),
        "lambda_http panicked after the guard: {panics:#?}"
    );
}
