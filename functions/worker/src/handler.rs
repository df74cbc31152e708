//! Translates an invocation into a drain of the ledger, with the invocation's deadline as the
//! time budget.

use std::time::SystemTime;

use lambda_runtime::{Error, LambdaEvent};
use shared::db::Pool;
use shared::handler::Registry;
use shared::invocation::{deadline, remaining};
use shared::work::{Summary, Worker};
use shared::Settings;

/// Built once per execution environment.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The drain logic, pool and handlers.
    pub worker: Worker,
}

impl AppState {
    /// State for `settings` running `handlers` (`handlers::registry`).
    pub fn new(settings: &Settings, pool: Pool, handlers: Registry) -> Self {
        Self {
            worker: Worker::new(settings, pool, handlers),
        }
    }
}

/// Drains due events and outbox messages until none is due or the invocation is about to time
/// out.
///
/// # Errors
/// When the database fails outside an event's own processing (the invocation fails and the
/// next one continues; events already processed stay processed).
pub async fn function_handler(
    state: &AppState,
    event: LambdaEvent<serde_json::Value>,
) -> Result<Summary, Error> {
    let deadline = deadline(event.context.deadline, SystemTime::now());
    let reason = event
        .payload
        .get("reason")
        .and_then(|r| r.as_str())
        .unwrap_or("schedule")
        .to_owned();
    let remaining_ms = remaining(deadline).as_millis() as u64;
    // The runtime reports an error's own text only: the message with its causes.
    let summary = state
        .worker
        .drain(SystemTime::now, || remaining(deadline))
        .await
        .map_err(|e| shared::error_chain::error_chain(&e))?;
    tracing::info!(
        reason,
        remaining_ms,
        leased = summary.leased,
        completed = summary.completed,
        failed = summary.failed,
        dead = summary.dead,
        released = summary.released,
        lost = summary.lost,
        abandoned = summary.abandoned,
        deadlines = summary.deadlines,
        out_of_time = summary.out_of_time,
        outbox_leased = summary.outbox.leased,
        outbox_dispatched = summary.outbox.dispatched,
        outbox_delivered = summary.outbox.delivered,
        outbox_retried = summary.outbox.retried,
        outbox_dead = summary.outbox.dead,
        outbox_released = summary.outbox.released,
        outbox_lost = summary.outbox.lost,
        outbox_abandoned = summary.outbox.abandoned,
        outbox_deadlines = summary.outbox.deadlines,
        "drain"
    );
    Ok(summary)
}
