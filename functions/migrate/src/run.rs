//! `migrate`: the CloudFormation custom resource `Schema` (`Custom::HookledgerSchema`,
//! `MigrateFunction` in template.yaml) that brings the database up to date on every deploy.
//!
//! - Trigger: CloudFormation, on Create, Update (a changed `Version`, `Logins` or
//!   `ConnectionBudget`, and on a rollback with the old properties) and Delete of the resource.
//! - Input: a custom resource request; `ResourceProperties` as in `migrate::schema`.
//! - Output: the answer `PUT` to the request's `ResponseURL` (SUCCESS with `Data`, or FAILED
//!   with a short `Reason`, which makes CloudFormation roll back), also returned.
//! - Environment: the database variables (`HOOKLEDGER_DB_SECRET_ARN` = the admin (owner)
//!   secret, `HOOKLEDGER_DB_HOST`, ..., `HOOKLEDGER_DB_CA_FILE`, or `DATABASE_URL`). The sources
//!   variables are ignored, never read.
//! - Side effects: applies the ledger's migrations then the handlers' (without the examples),
//!   creates or alters the functions' login roles from their secrets. Delete changes nothing.
//!
//! [`main`] is the function's whole life in its execution environment, for a binary to call.

use crate::handler::{function_handler, AppState};
use crate::resource::{database_settings_from_env, SchemaResource};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use shared::App;

/// Runs the `migrate` function: reads its settings from the environment (above),
/// builds its state once for the execution environment, and serves Lambda invocations until
/// the runtime stops it. A binary's `main` is this one call: `migrate::main(my_handlers::APP)`.
///
/// # Errors
///
/// A configuration that cannot work (a message naming the setting, never a value) or a
/// failure to start; Lambda then reports an init error and starts the environment again.
pub fn main(app: App) -> Result<(), Error> {
    shared::startup::drop_sequential_concurrency();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(serve(app))
}

async fn serve(app: App) -> Result<(), Error> {
    shared::telemetry::init();
    // A message, not the error (its Debug): it names the problem ("set only one of ..."), and
    // what caused it where that quotes no value. A failure is kept, not returned: an
    // environment that never starts would never answer CloudFormation (the deploy would wait
    // for the resource's ServiceTimeout); with it kept, every request is answered (FAILED with
    // this reason; Delete SUCCESS, so a rollback completes).
    let database = database_settings_from_env()
        .await
        .map_err(|e| shared::startup::config_failure(&e));
    if let Err(reason) = &database {
        tracing::error!(%reason, "cannot read the database settings; every Create and Update will answer FAILED");
    }
    let secrets = shared::secrets::Secrets::from_env().await;
    let resource = SchemaResource::new(database, Some(secrets), (app.migrations)())
        .map_err(|e| shared::error_chain::error_chain(&e))?;
    let state: &'static AppState = Box::leak(Box::new(AppState { resource }));
    run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        function_handler(state, event)
    }))
    .await
}
