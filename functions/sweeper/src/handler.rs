//! Translates an invocation into one sweep of the ledger, with the invocation's deadline as the
//! time budget.

use std::time::SystemTime;

use lambda_runtime::{Error, LambdaEvent};
use shared::config::SweepSettings;
use shared::db::Pool;
use shared::invocation::{deadline, remaining};
use shared::sources_refresh::LiveSources;
use shared::sweep::SweepReport;
use shared::Settings;

/// Built once per execution environment.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database pool (one connection is enough: batches run one after another).
    pub pool: Pool,
    /// The sources, for each one's retention (a source not configured keeps the defaults):
    /// re-read from their file or secret at each invocation (at most once a minute), so a
    /// retention changed there applies from the next run.
    pub sources: LiveSources,
    /// Batch size, batches per run, pause and time margin.
    pub sweep: SweepSettings,
}

impl AppState {
    /// State for `settings` over `pool`.
    pub fn new(settings: &Settings, pool: Pool) -> Self {
        Self {
            pool,
            sources: LiveSources::fixed(settings.sources.clone()),
            sweep: settings.sweep,
        }
    }
}

/// Sweeps the ledger once at the current time: deletes expired keys in batches until none is
/// left, `max_batches` ran, or less than the margin of the invocation's time is left. Logs the
/// report (`sweep`), counts the `swept` metric per source, and returns the report.
///
/// # Errors
/// When no connection can be had or a batch fails (the invocation fails; batches committed
/// before stay committed and the next run continues).
pub async fn function_handler(
    state: &AppState,
    event: LambdaEvent<serde_json::Value>,
) -> Result<SweepReport, Error> {
    let deadline = deadline(event.context.deadline, SystemTime::now());
    let conn = state
        .pool
        .get()
        .await
        .map_err(|e| shared::db::describe_pool(&e))?;
    state.sources.refresh("sweeper").await;
    let sources = state.sources.current();
    // Ages against the database's clock, which stamped claimed_at and dead_at.
    let now = shared::db::now(&conn)
        .await
        .map_err(|e| shared::db::describe(&e))?;
    // The runtime reports an error's own text only: the message with its causes.
    let report = shared::sweep::run(&conn, &sources, &state.sweep, now, || remaining(deadline))
        .await
        .map_err(|e| shared::error_chain::error_chain(&e))?;
    report.emit();
    Ok(report)
}
