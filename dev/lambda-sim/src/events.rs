//! The events the harnesses hand to a function, as AWS would, and what they read back.

use bytes::Bytes;
use serde_json::{json, Map, Value};

/// The route of the receiver's HTTP API (template.yaml): every event carries it as its
/// `routeKey`.
const ROUTE_KEY: &str = "POST /webhooks/{source}";

/// An API Gateway HTTP API request event (payload format 2.0), built up and then serialised
/// with [`HttpApiEvent::to_bytes`].
///
/// The request context is fixed but for the API id: account `123456789012`, domain
/// `<api_id>.execute-api.us-east-1.amazonaws.com`, request id `<api_id>`, stage `$default`,
/// source IP `54.187.174.169`, Stripe's user agent, time 01/Dec/2026 00:00:00 UTC (epoch 0).
/// `routeKey` is always `POST /webhooks/{source}`; `pathParameters` is `{"source": S}` when the
/// path is `/webhooks/S`, else empty.
#[derive(Debug, Clone)]
pub struct HttpApiEvent {
    api_id: String,
    method: String,
    path: String,
    headers: Map<String, Value>,
    body: String,
    is_base64: bool,
}

impl HttpApiEvent {
    /// `method` (e.g. `GET`) on `path` (starting with `/`, no query string) through the API
    /// `api_id` (e.g. `chaos`), with no headers and an empty body.
    pub fn new(api_id: &str, method: &str, path: &str) -> Self {
        Self {
            api_id: api_id.to_owned(),
            method: method.to_owned(),
            path: path.to_owned(),
            headers: Map::new(),
            body: String::new(),
            is_base64: false,
        }
    }

    /// A webhook delivery: `POST /webhooks/{source}` through the API `api_id`.
    pub fn webhook(api_id: &str, source: &str) -> Self {
        Self::new(api_id, "POST", &format!("/webhooks/{source}"))
    }

    /// Sets header `name` (stored lower-case, as API Gateway passes it on) to `value`,
    /// replacing an earlier value of the same name.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers
            .insert(name.to_ascii_lowercase(), Value::String(value.into()));
        self
    }

    /// Sets the raw body: UTF-8 text (`isBase64Encoded` false).
    pub fn body(mut self, body: impl Into<String>) -> Self {
        self.body = body.into();
        self.is_base64 = false;
        self
    }

    /// Sets the body as base64 text (`isBase64Encoded` true), as API Gateway passes a binary
    /// one.
    pub fn base64_body(mut self, body: impl Into<String>) -> Self {
        self.body = body.into();
        self.is_base64 = true;
        self
    }

    /// The event as JSON.
    pub fn to_json(&self) -> Value {
        let path_parameters = match self.path.strip_prefix("/webhooks/") {
            Some(source) if !source.is_empty() && !source.contains('/') => {
                json!({ "source": source })
            }
            _ => json!({}),
        };
        let api = &self.api_id;
        json!({
            "version": "2.0",
            "routeKey": ROUTE_KEY,
            "rawPath": self.path,
            "rawQueryString": "",
            "headers": self.headers,
            "pathParameters": path_parameters,
            "requestContext": {
                "accountId": "123456789012",
                "apiId": api,
                "domainName": format!("{api}.execute-api.us-east-1.amazonaws.com"),
                "domainPrefix": api,
                "http": {"method": self.method, "path": self.path, "protocol": "HTTP/1.1",
                         "sourceIp": "54.187.174.169", "userAgent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
                "requestId": api,
                "routeKey": ROUTE_KEY,
                "stage": "$default",
                "time": "01/Dec/2026:00:00:00 +0000",
                "timeEpoch": 0
            },
            "body": self.body,
            "isBase64Encoded": self.is_base64
        })
    }

    /// The event as the JSON bytes a Runtime API hands out.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from(self.to_json().to_string())
    }
}

/// The `statusCode` of a function's response as JSON (an API Gateway or ALB response
/// `{"statusCode", "headers", "body"}`); `None` when `body` is not JSON or has no numeric
/// `statusCode` (e.g. the worker's summary).
pub fn status_code(body: &[u8]) -> Option<u16> {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("statusCode").and_then(Value::as_u64))
        .map(|s| s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_event_is_an_http_api_v2_request_lambda_http_accepts() {
        let event = HttpApiEvent::webhook("chaos", "stripe")
            .header("Content-Type", "application/json")
            .header("stripe-signature", "t=1,v1=ab")
            .body(r#"{"id":"evt_1"}"#);
        let json = event.to_json();
        assert_eq!(json["rawPath"], "/webhooks/stripe");
        assert_eq!(json["pathParameters"]["source"], "stripe");
        assert_eq!(json["headers"]["content-type"], "application/json");
        assert_eq!(
            json["requestContext"]["domainName"],
            "chaos.execute-api.us-east-1.amazonaws.com"
        );
        assert_eq!(json["isBase64Encoded"], false);

        let request: lambda_http::request::LambdaRequest =
            serde_json::from_slice(&event.to_bytes()).expect("lambda_http parses the event");
        let request: lambda_http::Request = request.into();
        assert_eq!(request.method(), "POST");
        assert_eq!(request.uri().path(), "/webhooks/stripe");
        assert_eq!(request.headers()["stripe-signature"], "t=1,v1=ab");
        assert_eq!(request.body().as_ref(), br#"{"id":"evt_1"}"#);
    }

    #[test]
    fn other_paths_have_no_path_parameters_and_base64_bodies_are_marked() {
        let json = HttpApiEvent::new("bench", "GET", "/")
            .base64_body("aGk=")
            .to_json();
        assert_eq!(json["pathParameters"], json!({}));
        assert_eq!(json["requestContext"]["http"]["method"], "GET");
        assert_eq!(json["isBase64Encoded"], true);
    }

    #[test]
    fn status_code_reads_a_response_and_nothing_else() {
        assert_eq!(
            status_code(br#"{"statusCode": 409, "body": ""}"#),
            Some(409)
        );
        assert_eq!(status_code(br#"{"leased": 0}"#), None);
        assert_eq!(status_code(b"not json"), None);
    }
}
