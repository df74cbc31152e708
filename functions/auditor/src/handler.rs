//! Translates a scheduled invocation into one audit of the ledger.

use lambda_runtime::{Error, LambdaEvent};
use shared::audit::AuditReport;
use shared::config::AuditSettings;
use shared::db::Pool;
use shared::sources_refresh::LiveSources;
use shared::Settings;

/// Built once per execution environment.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The pool (one connection is enough).
    pub pool: Pool,
    /// The sources, for each one's retention, horizon and expected interval: re-read from their
    /// file or secret at each invocation (at most once a minute).
    pub sources: LiveSources,
    /// The thresholds.
    pub audit: AuditSettings,
}

impl AppState {
    /// State for `settings` over `pool`.
    pub fn new(settings: &Settings, pool: Pool) -> Self {
        Self {
            pool,
            sources: LiveSources::fixed(settings.sources.clone()),
            audit: settings.audit,
        }
    }
}

/// Audits the ledger now, records the run, logs the `audit` line and prints the EMF metrics;
/// returns the report. The event (an EventBridge schedule) is not read.
///
/// # Errors
/// When no connection can be had or PostgreSQL fails (nothing is recorded; the next run
/// counts from the last recorded one).
pub async fn function_handler(
    state: &AppState,
    _event: LambdaEvent<serde_json::Value>,
) -> Result<AuditReport, Error> {
    let conn = state
        .pool
        .get()
        .await
        .map_err(|e| shared::db::describe_pool(&e))?;
    state.sources.refresh("auditor").await;
    let sources = state.sources.current();
    // Ages against the database's clock, which stamped claimed_at and dead_at.
    let now = shared::db::now(&conn)
        .await
        .map_err(|e| shared::db::describe(&e))?;
    let report = match shared::audit::run(&conn, &sources, &state.audit, now).await {
        Ok(report) => report,
        Err(error) => {
            let error = shared::error_chain::error_chain(&error);
            tracing::error!(error = %error, "audit failed");
            // The audit rolled back, but a failed round trip may leave the connection in
            // an unknown state: do not pool it.
            conn.discard();
            // The runtime reports an error's own text only: the message with its causes.
            return Err(error.into());
        }
    };
    report.emit();
    Ok(report)
}
