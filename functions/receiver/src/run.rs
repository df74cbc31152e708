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
//!
//! [`main`] is the function's whole life in its execution environment, for a binary to call.

use crate::handler::{function_handler, AppState};
use crate::stack::stack;
use lambda_http::{service_fn, Error, Request};
use shared::App;
use shared::Settings;

/// Runs the `receiver` function: reads its settings from the environment (above),
/// builds its state once for the execution environment, and serves Lambda invocations until
/// the runtime stops it. A binary's `main` is this one call: `receiver::main(my_handlers::APP)`.
///
/// # Errors
///
/// A configuration that cannot work (a message naming the setting, never a value) or a
/// failure to start; Lambda then reports an init error and starts the environment again.
pub fn main(app: App) -> Result<(), Error> {
    shared::startup::drop_sequential_concurrency();
    // One invocation at a time (the Lambda runtime polls, handles, answers): a current-thread
    // runtime starts no worker threads and keeps one allocator arena (dev/bench/results/cold.md).
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(serve(app))
}

async fn serve(app: App) -> Result<(), Error> {
    shared::telemetry::init();
    // A message, not the error (its Debug): it names the problem ("set only one of ..."), and
    // what caused it where that quotes no value.
    let settings = Settings::from_env()
        .await
        .map_err(|e| shared::startup::config_failure(&e))?;
    // Lives for the whole execution environment. The handlers: `app.registry` and the sources' SQL handlers (`App::handlers`).
    let state = AppState::from_settings(
        &settings,
        app.handlers(&settings.sources).map_err(|e| e.to_string())?,
    )
    .await
    .map_err(|e| shared::error_chain::error_chain(&e))?;
    let state: &'static AppState = Box::leak(Box::new(state));
    // Once the pool's first connection is open (its TLS connector built, the thread that built
    // it gone), give back what that build freed (heap.rs).
    let pool = state.receiver.pool.clone();
    tokio::spawn(async move {
        pool.warmed_up().await;
        crate::heap::release_freed_memory();
    });
    let handler = service_fn(move |request: Request| function_handler(state, request));
    // lambda_http::run(handler) is this without the guards: it panics on invalid base64
    // (transport.rs) and cannot read an event with a CR, LF or NUL in a header (unreadable.rs).
    lambda_runtime::run(stack(handler)).await
}
