//! `console`: the ledger console (`hookledger_console`) behind API Gateway's JWT authorizer;
//! `ConsoleFunction` in template.yaml, deployed when `ConsoleJwtIssuer` is set.
//!
//! - Trigger: the console's HTTP API (`ConsoleApi`, payload 2.0), every route behind its JWT
//!   authorizer (issuer `ConsoleJwtIssuer`, audience `ConsoleJwtAudience`).
//! - Input: the browser's request; the authorizer's validated claims in
//!   `requestContext.authorizer.jwt` (without them every route answers 401).
//! - Environment: as every function (`DATABASE_URL` or `HOOKLEDGER_DB_SECRET_ARN`, the
//!   sources, the database settings of `shared::config`); `HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN`
//!   (the secret that keys the forms' CSRF tokens, shared by every execution environment);
//!   `HOOKLEDGER_CONSOLE_REDRIVE` (`true` allows re-drive; default read-only); the allow rule,
//!   at least one of `HOOKLEDGER_CONSOLE_REQUIRED_SCOPES`, `HOOKLEDGER_CONSOLE_ALLOWED_SUBJECTS`,
//!   `HOOKLEDGER_CONSOLE_ALLOWED_EMAIL_DOMAINS`, `HOOKLEDGER_CONSOLE_ALLOWED_GROUPS` (without
//!   one it refuses to start: `shared::config::ConsoleAllow`); `RUST_LOG`.
//! - Side effects: none when read-only; a confirmed re-drive moves dead events or outbox
//!   messages back (`shared::redrive`, as `hookledger redrive`). One `console request` log line
//!   per request (method, route template, status, duration).
//!
//! [`main`] is the function's whole life in its execution environment, for a binary to call.

use crate::handler::{function_handler, router};
use lambda_http::{service_fn, Error, Request};
use shared::config::ConsoleSettings;
use shared::secrets::Secrets;
use shared::App;
use shared::Settings;

/// Runs the `console` function: reads its settings from the environment (above),
/// builds its state once for the execution environment, and serves Lambda invocations until
/// the runtime stops it. A binary's `main` is this one call: `console_function::main(my_handlers::APP)`.
///
/// # Errors
///
/// A configuration that cannot work (a message naming the setting, never a value) or a
/// failure to start; Lambda then reports an init error and starts the environment again.
pub fn main(app: App) -> Result<(), Error> {
    shared::startup::drop_sequential_concurrency();
    // One invocation at a time (the Lambda runtime polls, handles, answers): a current-thread
    // runtime starts no worker threads and keeps one allocator arena (dev/bench/results/cold.md).
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(serve(app))
}

async fn serve(app: App) -> Result<(), Error> {
    shared::telemetry::init();
    // Messages, not the errors (their Debug): they name the problem (and never a value), with
    // what caused it where that quotes no value.
    // First: a console told nothing of who may use it stops here, before any secret is read.
    let console = ConsoleSettings::from_env().map_err(|e| shared::startup::config_failure(&e))?;
    let settings = Settings::from_env()
        .await
        .map_err(|e| shared::startup::config_failure(&e))?;
    let csrf_secret = Secrets::from_env()
        .await
        .secret_string(&console.csrf_secret_arn)
        .await
        .map_err(|e| shared::error_chain::error_chain(&e))?;
    let pool =
        shared::db::pool(&settings.database).map_err(|e| shared::error_chain::error_chain(&e))?;
    // The handlers (a re-drive calls the same code as the CLI's).
    let handlers = app.handlers(&settings.sources).map_err(|e| e.to_string())?;
    let router = router(settings, pool, handlers, &console, &csrf_secret)?;
    let router: &'static axum::Router = Box::leak(Box::new(router));
    let handler = service_fn(move |request: Request| function_handler(router, request));
    // The receiver's stack: lambda_http's adapter behind its two transport guards.
    lambda_runtime::run(receiver::stack::stack(handler)).await
}
