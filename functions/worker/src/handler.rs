//! Translates an invocation into a drain of the ledger, with the invocation's deadline as the
//! time budget.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use deadpool_postgres::Pool;
use lambda_runtime::{Error, LambdaEvent};
use shared::handlers::Registry;
use shared::work::{Summary, Worker};
use shared::Settings;

/// Built once per execution environment.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The drain logic, pool and handlers.
    pub worker: Worker,
}

impl AppState {
    /// State for `settings` with the example handlers registered.
    pub fn new(settings: &Settings, pool: Pool) -> Self {
        Self {
            worker: Worker {
                pool,
                handlers: Registry::with_examples(&settings.sources),
                sources: settings.sources.clone(),
                settings: settings.worker.clone(),
            },
        }
    }
}

/// Drains due events until none is due or the invocation is about to time out.
///
/// # Errors
/// When the database fails outside an event's own processing (the invocation fails and the
/// next one continues; events already processed stay processed).
pub async fn function_handler(
    state: &AppState,
    event: LambdaEvent<serde_json::Value>,
) -> Result<Summary, Error> {
    let deadline = UNIX_EPOCH + Duration::from_millis(event.context.deadline);
    let reason = event
        .payload
        .get("reason")
        .and_then(|r| r.as_str())
        .unwrap_or("schedule")
        .to_owned();
    let summary = state
        .worker
        .drain(SystemTime::now, || {
            deadline
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO)
        })
        .await?;
    tracing::info!(
        reason,
        leased = summary.leased,
        completed = summary.completed,
        failed = summary.failed,
        dead = summary.dead,
        released = summary.released,
        lost = summary.lost,
        out_of_time = summary.out_of_time,
        "drain"
    );
    Ok(summary)
}
