//! `sweeper`: deletes expired keys from the ledger, so it stays the size of its retention window.
//!
//! - Triggers: a schedule (every 5 minutes, an EventBridge event); `SweeperFunction` in
//!   template.yaml. The input is ignored: every invocation sweeps whatever has expired.
//! - Output: the report `{"deleted", "payloads_dropped", "batches", "duration_ms",
//!   "oldest_remaining", "stopped", "deleted_by_source", "payloads_dropped_by_source",
//!   "rejected_deleted", "unconfigured"}` (`stopped`: `done`,
//!   `max_batches` or `out_of_time`), also logged as one `sweep` line, with the EMF metric
//!   `swept` per source.
//! - Environment: as the receiver (`DATABASE_URL` or `HOOKLEDGER_DB_SECRET_ARN`, the sources,
//!   for each source's `retention_days`, `dead_retention_days` and `payload_retention_hours`), plus
//!   `HOOKLEDGER_SWEEP_BATCH_SIZE`, `HOOKLEDGER_SWEEP_MAX_BATCHES`, `HOOKLEDGER_SWEEP_PAUSE_MS`,
//!   `HOOKLEDGER_SWEEP_MARGIN_MS`, `HOOKLEDGER_REJECTED_RETENTION_DAYS` (see `shared::config`).
//! - Side effects: deletes `completed` `webhook_event` rows claimed longer ago than their
//!   source's retention and `dead` rows dead longer than its dead-letter retention, the outbox
//!   messages by the same rules, and the counts of rejected deliveries (`rejected_delivery`)
//!   older than their retention, in batches of one short transaction each. Never `claimed`,
//!   `processing` or `failed` rows, nor the handlers' business rows.
//!
//! [`main`] is the function's whole life in its execution environment, for a binary to call.

use crate::handler::{function_handler, AppState};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use shared::sources_refresh::LiveSources;
use shared::Settings;

/// Runs the `sweeper` function: reads its settings from the environment (above),
/// builds its state once for the execution environment, and serves Lambda invocations until
/// the runtime stops it. A binary's `main` is this one call: `sweeper::main()`.
///
/// # Errors
///
/// A configuration that cannot work (a message naming the setting, never a value) or a
/// failure to start; Lambda then reports an init error and starts the environment again.
pub fn main() -> Result<(), Error> {
    shared::startup::drop_sequential_concurrency();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(serve())
}

async fn serve() -> Result<(), Error> {
    shared::telemetry::init();
    // A message, not the error (its Debug): it names the problem ("set only one of ..."), and
    // what caused it where that quotes no value.
    let settings = Settings::from_env()
        .await
        .map_err(|e| shared::startup::config_failure(&e))?;
    let pool =
        shared::db::pool(&settings.database).map_err(|e| shared::error_chain::error_chain(&e))?;
    let mut state = AppState::new(&settings, pool);
    // A retention changed in the sources secret or file applies from the next run.
    state.sources = LiveSources::from_settings(&settings).await;
    let state: &'static AppState = Box::leak(Box::new(state));
    run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        function_handler(state, event)
    }))
    .await
}
