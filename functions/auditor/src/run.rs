//! `auditor`: reports what needs a human, every five minutes.
//!
//! - Trigger: a schedule (`rate(5 minutes)`, an EventBridge event); `AuditorFunction` in
//!   template.yaml. The input is not read.
//! - Output: the audit report (see `shared::audit`), also logged as one `audit` line, plus one
//!   CloudWatch EMF document per source and one for the database.
//! - Environment: as the worker (`DATABASE_URL` or `HOOKLEDGER_DB_SECRET_ARN`, the sources),
//!   plus `HOOKLEDGER_AUDIT_STUCK_AFTER_SECS` and `HOOKLEDGER_AUDIT_IDLE_IN_TRANSACTION_SECS`.
//!   The database role needs `pg_read_all_stats` (or `pg_monitor`) to see other roles'
//!   sessions idle in a transaction.
//! - Side effects: moves `audit_run.last_run_at` to the run's time; nothing else is written.
//!
//! [`main`] is the function's whole life in its execution environment, for a binary to call.

use crate::handler::{function_handler, AppState};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use shared::sources_refresh::LiveSources;
use shared::Settings;

/// Runs the `auditor` function: reads its settings from the environment (above),
/// builds its state once for the execution environment, and serves Lambda invocations until
/// the runtime stops it. A binary's `main` is this one call: `auditor::main()`.
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
    // A retention or expected interval changed in the sources secret or file applies from the
    // next run.
    state.sources = LiveSources::from_settings(&settings).await;
    let state: &'static AppState = Box::leak(Box::new(state));
    run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        function_handler(state, event)
    }))
    .await
}
