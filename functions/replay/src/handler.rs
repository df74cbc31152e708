//! Translates an invocation into one replay, re-drive or inspection, with the invocation's
//! deadline as the time budget.

use std::time::{Duration, SystemTime};

use lambda_runtime::{Error, LambdaEvent};
use serde::Deserialize;
use serde_json::Value;
use shared::db::Pool;
use shared::handler::Registry;
use shared::invocation::{deadline, remaining};
use shared::redrive::RedriveSpec;
use shared::replay::{ReplayError, ReplayOptions, ReplayRequest, Replayer};
use shared::{Receiver, Settings};

/// Built once per execution environment.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The claim path (sources, pool, handlers, doorbell), exactly as the receiver's.
    pub receiver: Receiver,
    /// The provider APIs' client and limits.
    pub replayer: Replayer,
}

impl AppState {
    /// State for `settings` over `pool`, running `handlers` (`handlers::registry`: replayed
    /// events go through the claim path and its handlers; a re-drive of ignored events checks
    /// that a handler exists), with the default replay limits.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(settings: &Settings, pool: Pool, handlers: Registry) -> Result<Self, ReplayError> {
        Ok(Self {
            receiver: Receiver::new(settings, pool, handlers),
            replayer: Replayer::new(ReplayOptions::default())?,
        })
    }
}

/// A re-drive: `{"source", "redrive": {...}, "dry_run"?}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedriveInput {
    /// The source.
    pub source: String,
    /// What to re-drive.
    pub redrive: RedriveSpec,
    /// Count, write nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// An inspection: `{"source", "inspect": "<event_id>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InspectInput {
    /// The source.
    pub source: String,
    /// The event id.
    pub inspect: String,
}

/// One invocation's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Replay a window from the provider's API.
    Replay(ReplayRequest),
    /// Re-drive dead letters or re-run ignored events.
    Redrive(RedriveInput),
    /// Read one event in full.
    Inspect(InspectInput),
}

impl Input {
    /// Reads the input: an object with `redrive` is a re-drive, one with `inspect` an
    /// inspection, anything else a replay.
    ///
    /// # Errors
    /// A message naming the problem (not an object, both `redrive` and `inspect`, a missing or
    /// unknown field).
    pub fn parse(value: Value) -> Result<Self, String> {
        let Some(object) = value.as_object() else {
            return Err(
                "the input must be a JSON object: {\"source\", \"since\", ...}, \
                        {\"source\", \"redrive\": {...}} or {\"source\", \"inspect\": \"...\"}"
                    .to_owned(),
            );
        };
        let invalid = |what: &str, e: serde_json::Error| format!("invalid {what} input: {e}");
        match (
            object.contains_key("redrive"),
            object.contains_key("inspect"),
        ) {
            (true, true) => Err("give redrive or inspect, not both".to_owned()),
            (true, false) => serde_json::from_value(value)
                .map(Input::Redrive)
                .map_err(|e| invalid("redrive", e)),
            (false, true) => serde_json::from_value(value)
                .map(Input::Inspect)
                .map_err(|e| invalid("inspect", e)),
            (false, false) => serde_json::from_value(value)
                .map(Input::Replay)
                .map_err(|e| invalid("replay", e)),
        }
    }
}

/// Runs one invocation until its deadline; returns the report as JSON.
///
/// # Errors
/// An invalid input; a replay that failed (the message carries its partial report and
/// `next_cursor`); a re-drive refused or failed; an inspected key not in the ledger.
pub async fn function_handler(state: &AppState, event: LambdaEvent<Value>) -> Result<Value, Error> {
    let deadline = deadline(event.context.deadline, SystemTime::now());
    handle(state, event.payload, move || remaining(deadline)).await
}

/// [`function_handler`] with the time left given by `remaining` (tests inject it).
///
/// # Errors
/// As [`function_handler`].
pub async fn handle(
    state: &AppState,
    input: Value,
    remaining: impl Fn() -> Duration + Send + Sync,
) -> Result<Value, Error> {
    let input = Input::parse(input)?;
    let receiver = &state.receiver;
    receiver.sources.refresh("replay").await;
    match input {
        Input::Replay(request) => {
            match state
                .replayer
                .run(receiver, &request, remaining, |_| {})
                .await
            {
                Ok(report) => Ok(serde_json::to_value(report)?),
                Err(error) => Err(format!(
                    "{error}; report so far: {}",
                    serde_json::to_string(&error.report)?
                )
                .into()),
            }
        }
        Input::Redrive(input) => {
            let selection = input.redrive.selection().map_err(|e| e.to_string())?;
            let sources = receiver.sources.current();
            let report = shared::redrive::run(
                &receiver.pool,
                &sources,
                &receiver.handlers,
                &receiver.doorbell,
                &input.source,
                &selection,
                input.dry_run,
                remaining,
                |_| {},
            )
            .await
            // Display: the reason in words (Debug would print the enum).
            .map_err(|e| e.to_string())?;
            Ok(serde_json::to_value(report)?)
        }
        Input::Inspect(input) => {
            match shared::redrive::inspect(&receiver.pool, &input.source, &input.inspect)
                .await
                .map_err(|e| e.to_string())?
            {
                Some(detail) => Ok(detail.to_json()),
                None => Err(format!(
                    "source {:?} has no event {:?} in the ledger",
                    input.source, input.inspect
                )
                .into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_three_input_shapes_parse_and_others_are_refused_by_name() {
        let replay = Input::parse(json!({"source": "stripe", "since": "2026-12-01T00:00:00Z",
                                         "dry_run": true}))
        .unwrap();
        assert!(matches!(replay, Input::Replay(r) if r.dry_run && r.until.is_none()));
        let redrive = Input::parse(json!({"source": "s", "redrive": {"status": "dead",
                                          "event_ids": ["e"]}}))
        .unwrap();
        assert!(matches!(redrive, Input::Redrive(r) if !r.dry_run));
        let inspect = Input::parse(json!({"source": "s", "inspect": "evt_1"})).unwrap();
        assert!(matches!(inspect, Input::Inspect(i) if i.inspect == "evt_1"));
        let e = Input::parse(json!({"source": "s"})).unwrap_err();
        assert!(e.contains("since"), "{e}");
        let e = Input::parse(json!({"source": "s", "since": "x", "untill": "y"})).unwrap_err();
        assert!(e.contains("untill"), "{e}");
        let e = Input::parse(json!([1])).unwrap_err();
        assert!(e.contains("JSON object"), "{e}");
        let e = Input::parse(json!({"source": "s", "redrive": {}, "inspect": "x"})).unwrap_err();
        assert!(e.contains("not both"), "{e}");
    }
}
