//! `chaos-receiver`: the receiver function (functions/receiver/src/run.rs: the same
//! `AppState::from_settings`, `function_handler`, `Base64Guard`, `Adapter`) with the chaos
//! handlers registered too (`chaos::handlers::registry`), run by the harness under its Lambda
//! Runtime API (`AWS_LAMBDA_RUNTIME_API`).
//!
//! Fault hook: `CHAOS_REPLY_DELAY_MS` (milliseconds, default 0) sleeps AFTER the function
//! returned (its transaction committed) and BEFORE the reply is posted, so a SIGKILL can land
//! between COMMIT and the reply.

use std::time::Duration;

use lambda_http::{service_fn, Error, Request};
use receiver::handler::{function_handler, AppState};
use receiver::stack::stack;
use shared::Settings;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let settings = Settings::from_env()
        .await
        .map_err(|e| shared::startup::config_failure(&e))?;
    let state = AppState::from_settings(&settings, chaos::handlers::registry(&settings.sources))
        .await
        .map_err(|e| shared::error_chain::error_chain(&e))?;
    let state: &'static AppState = Box::leak(Box::new(state));
    let delay = Duration::from_millis(
        std::env::var("CHAOS_REPLY_DELAY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    );
    let handler = service_fn(move |request: Request| async move {
        let response = function_handler(state, request).await;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        response
    });
    lambda_runtime::run(stack(handler)).await
}
