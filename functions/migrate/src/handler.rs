//! Translates an invocation into one answer to CloudFormation ([`crate::resource`]),
//! with the invocation's deadline as the time budget.

use std::time::SystemTime;

use lambda_runtime::{Error, LambdaEvent};
use serde_json::Value;
use shared::invocation::deadline;

use crate::resource::SchemaResource;

/// Built once per execution environment.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The admin settings, the secrets client, the migration sets, the HTTP client.
    pub resource: SchemaResource,
}

/// Answers the custom resource request in `event` (SUCCESS or FAILED, always `PUT` to its
/// `ResponseURL`) and returns the answer sent, as JSON.
///
/// # Errors
/// When the event carries no `ResponseURL` or the answer could not be delivered after its
/// retries (the invocation fails; CloudFormation then times out on the resource).
pub async fn function_handler(state: &AppState, event: LambdaEvent<Value>) -> Result<Value, Error> {
    let deadline = deadline(event.context.deadline, SystemTime::now());
    // The runtime reports an error's own text only: the message carries its causes.
    let response = state
        .resource
        .handle(&event.payload, deadline)
        .await
        .map_err(|e| shared::error_chain::error_chain(&e))?;
    Ok(serde_json::to_value(&response)?)
}
