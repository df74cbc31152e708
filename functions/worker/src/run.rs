//! `worker`: drains deferred events from the ledger and dispatches outbox messages.
//!
//! - Triggers: the receiver's doorbell (asynchronous invoke, `{"reason": "doorbell", "source",
//!   "event_id"}`, after a deferred accept or an inline commit that queued outbox messages) and
//!   a schedule (every minute, an EventBridge event); `WorkerFunction` in template.yaml. The
//!   input is only logged: every invocation drains whatever is due.
//! - Output: the summary `{"leased", "completed", "failed", "dead", "released", "lost",
//!   "abandoned", "deadlines", "out_of_time", "outbox": {"leased", "dispatched", "delivered",
//!   "retried", "dead", "released", "lost", "abandoned", "deadlines"}}`. `deadlines` counts
//!   database steps abandoned at the client deadline (`HOOKLEDGER_DB_CLIENT_DEADLINE_MS`, the
//!   statement timeout + 1 s by default: a failover or a dead network path, where nothing
//!   answers); their connections are closed, never reused, and the drain stops after that
//!   round (log line `drain stopped: the database did not answer within the client
//!   deadline`). `abandoned` counts the events (outbox: messages) left unmarked to their
//!   lease's expiry (`HOOKLEDGER_LEASE_SECS`), when they come back: nothing lost, nothing
//!   doubled.
//! - Environment: as the receiver (`DATABASE_URL` or `HOOKLEDGER_DB_SECRET_ARN`, the sources),
//!   including `HOOKLEDGER_DB_CLIENT_DEADLINE_MS`, plus `HOOKLEDGER_LEASE_SECS`, `HOOKLEDGER_WORKER_BATCH`, `HOOKLEDGER_WORKER_MARGIN_MS`,
//!   `HOOKLEDGER_HANDLER_TIMEOUT_MS`, `HOOKLEDGER_BACKOFF_BASE_SECS`,
//!   `HOOKLEDGER_BACKOFF_CAP_SECS`, `HOOKLEDGER_OUTBOX_CONCURRENCY` (see `shared::config`).
//! - Side effects: leases, completes, fails and dead-letters `webhook_event` rows; the
//!   handlers' business rows; leases and records `outbox` rows, and sends their messages to
//!   the sources' targets (HTTP, SQS, EventBridge).
//!
//! [`main`] is the function's whole life in its execution environment, for a binary to call.

use crate::handler::{function_handler, AppState};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use shared::App;
use shared::Settings;

/// Runs the `worker` function: reads its settings from the environment (above),
/// builds its state once for the execution environment, and serves Lambda invocations until
/// the runtime stops it. A binary's `main` is this one call: `worker::main(my_handlers::APP)`.
///
/// # Errors
///
/// A configuration that cannot work (a message naming the setting, never a value) or a
/// failure to start; Lambda then reports an init error and starts the environment again.
pub fn main(app: App) -> Result<(), Error> {
    shared::startup::drop_sequential_concurrency();
    tokio::runtime::Builder::new_multi_thread()
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
    let pool =
        shared::db::pool(&settings.database).map_err(|e| shared::error_chain::error_chain(&e))?;
    // The handlers: `app.registry` and the sources' SQL handlers (`App::handlers`).
    let registry = app.handlers(&settings.sources).map_err(|e| e.to_string())?;
    shared::coverage::Coverage::of(&registry, &settings.sources).log();
    let state: &'static AppState = Box::leak(Box::new(AppState::new(&settings, pool, registry)));
    run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        function_handler(state, event)
    }))
    .await
}
