//! Translates an invocation into a drain of the ledger, with the invocation's deadline as the
//! time budget.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lambda_runtime::{Error, LambdaEvent};
use shared::db::Pool;
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
            worker: Worker::new(settings, pool, Registry::with_examples(&settings.sources)),
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
    let deadline = deadline(event.context.deadline, SystemTime::now());
    let reason = event
        .payload
        .get("reason")
        .and_then(|r| r.as_str())
        .unwrap_or("schedule")
        .to_owned();
    let remaining_ms = deadline
        .duration_since(SystemTime::now())
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
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
        remaining_ms,
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

/// The invocation's deadline from the runtime's `Lambda-Runtime-Deadline-Ms` (unix epoch,
/// milliseconds). cargo-lambda's local emulator sends the timeout itself (e.g. `600000`)
/// instead; a value before 2001 is read that way, as milliseconds from `now`.
pub fn deadline(deadline_ms: u64, now: SystemTime) -> SystemTime {
    const EPOCH_2001_MS: u64 = 1_000_000_000_000;
    if deadline_ms < EPOCH_2001_MS {
        now + Duration::from_millis(deadline_ms)
    } else {
        UNIX_EPOCH + Duration::from_millis(deadline_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_an_epoch_or_the_emulators_relative_timeout() {
        let now = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
        assert_eq!(
            deadline(1_750_000_060_000, now),
            UNIX_EPOCH + Duration::from_millis(1_750_000_060_000)
        );
        assert_eq!(deadline(600_000, now), now + Duration::from_secs(600));
    }
}
