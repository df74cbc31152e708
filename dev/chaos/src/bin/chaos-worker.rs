//! `chaos-worker`: the worker function (functions/worker/src/run.rs: the same `AppState` and
//! `function_handler`) with the chaos handlers registered too (`chaos::handlers::registry`),
//! run by the harness under its Lambda Runtime API; the harness invokes it with a
//! scheduled-event payload (`chaos::lambda::scheduled_event`).

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use shared::Settings;
use worker::handler::{function_handler, AppState};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let settings = Settings::from_env().await.map_err(|e| e.to_string())?;
    let pool = shared::db::pool(&settings.database).map_err(|e| e.to_string())?;
    let registry = chaos::handlers::registry(&settings.sources);
    let state: &'static AppState = Box::leak(Box::new(AppState::new(&settings, pool, registry)));
    run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        function_handler(state, event)
    }))
    .await
}
