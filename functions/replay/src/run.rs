//! `replay`: the operator's function, invoked by hand (no trigger); `ReplayFunction` in
//! template.yaml.
//!
//! - Input, one of:
//!   - `{"source", "since", "until"?, "dry_run"?, "starting_after"?, "delivery_success"?}`:
//!     replay a window from the provider's API (Stripe, Paddle: through the claim path;
//!     GitHub: redeliveries), see `shared::replay`;
//!   - `{"source", "redrive": {"status": "dead" | "ignored", ...}, "dry_run"?}`: re-drive dead
//!     letters or re-run ignored events, see `shared::redrive`;
//!   - `{"source", "inspect": "<event_id>"}`: one ledger row in full;
//!   - `{"forget": {"source", "event_id" | "subject", "by", "reason"?, "dry_run"?}}`: erase one
//!     event's payloads, or a data subject's, keeping the keys, see `shared::forget`.
//! - Output: the report as JSON (`{"fetched", "new", "duplicates", "redelivered", "failed",
//!   "next_cursor"}` for a replay). Bounded by the invocation's deadline: a replay that stops
//!   early returns `next_cursor`; invoke again with `"starting_after": next_cursor`.
//! - Errors: an invalid input, or a replay that failed (the message names the problem, and
//!   carries the partial report with the cursor to resume from).
//! - Environment: as the receiver (database, sources with `api_key`, `api_base_url`,
//!   `github_hook`); `HOOKLEDGER_WORKER_FUNCTION` (the doorbell for deferred sources).
//! - Side effects: ledger rows (marked `replayed_at`) and the handlers' business rows for new
//!   Stripe and Paddle events; redelivery requests to GitHub; re-driven rows back to
//!   `claimed`; erased payloads, responses and outbox payloads. One `replay_run` (or
//!   `redrive`, `forget`) log line per invocation.
//!
//! [`main`] is the function's whole life in its execution environment, for a binary to call.

use crate::handler::{function_handler, AppState};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use shared::doorbell::Doorbell;
use shared::sources_refresh::LiveSources;
use shared::App;
use shared::Settings;

/// Runs the `replay` function: reads its settings from the environment (above),
/// builds its state once for the execution environment, and serves Lambda invocations until
/// the runtime stops it. A binary's `main` is this one call: `replay::main(my_handlers::APP)`.
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
    let mut state = AppState::new(&settings, pool, registry)
        .map_err(|e| shared::error_chain::error_chain(&e))?;
    state.receiver = state
        .receiver
        .with_doorbell(Doorbell::new(settings.worker_function.as_deref()).await);
    // A new api_key in the sources secret or file applies from the next invocation.
    state.receiver.sources = LiveSources::from_settings(&settings).await;
    let state: &'static AppState = Box::leak(Box::new(state));
    run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        function_handler(state, event)
    }))
    .await
}
