//! `receiver`: the webhook endpoint, `POST /webhooks/{source}`.
//!
//! - Trigger: API Gateway HTTP API (payload v2), REST API (v1), a Function URL or an ALB;
//!   `ReceiverFunction` in template.yaml.
//! - Input: the HTTP request with the provider's raw body and signature headers.
//! - Environment: `DATABASE_URL` or `HOOKLEDGER_DB_SECRET_ARN`; `HOOKLEDGER_SOURCES`,
//!   `HOOKLEDGER_SOURCES_FILE` or `HOOKLEDGER_SOURCES_SECRET_ARN` (the secret or file is re-read
//!   after a signature mismatch, at most once per `HOOKLEDGER_SOURCES_REFRESH_SECS`, default 60);
//!   and the optional database settings read by `shared::config` (see its docs);
//!   `HOOKLEDGER_WORKER_FUNCTION` (the doorbell; unset = off); `RUST_LOG`.
//! - Side effects: one `webhook_event` row per new event, the handler's business rows in the
//!   same transaction; one JSON log line per delivery.

use lambda_http::{service_fn, Error, Request};
use receiver::handler::{function_handler, AppState};
use receiver::stack::stack;
use shared::Settings;

// One invocation at a time (the Lambda runtime polls, handles, answers): a current-thread
// runtime starts no worker threads and keeps one allocator arena (dev/bench/results/cold.md).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    // A message, not the error (its Debug): it names the problem ("set only one of ..."), and
    // what caused it where that quotes no value.
    let settings = Settings::from_env()
        .await
        .map_err(|e| shared::startup::config_failure(&e))?;
    // Lives for the whole execution environment. The handlers: handlers/src/registry.rs.
    let state = AppState::from_settings(&settings, handlers::registry(&settings.sources))
        .await
        .map_err(|e| shared::error_chain::error_chain(&e))?;
    let state: &'static AppState = Box::leak(Box::new(state));
    let handler = service_fn(move |request: Request| function_handler(state, request));
    // lambda_http::run(handler) is this without the guards: it panics on invalid base64
    // (transport.rs) and cannot read an event with a CR, LF or NUL in a header (unreadable.rs).
    lambda_runtime::run(stack(handler)).await
}
