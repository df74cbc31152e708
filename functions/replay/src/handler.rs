//! Translates an invocation into one replay, re-drive or inspection, with the invocation's
//! deadline as the time budget.

use std::time::{Duration, SystemTime};

use lambda_runtime::{Error, LambdaEvent};
use serde::Deserialize;
use serde_json::Value;
use shared::db::Pool;
use shared::error_chain::error_chain;
use shared::forget::ForgetRequest;
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

/// An erasure: `{"forget": {"source", "event_id" | "subject", "by", "reason"?, "dry_run"?}}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgetInput {
    /// What to erase, and who asks.
    pub forget: ForgetRequest,
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
    /// Erase one event's, or a data subject's, payloads (`shared::forget`).
    Forget(ForgetInput),
}

/// Why an invocation's input is refused (fatal to the invocation: fix the input).
#[derive(Debug)]
pub enum InputError {
    /// Not a JSON object.
    NotAnObject,
    /// More than one of `redrive`, `inspect` and `forget`.
    Ambiguous,
    /// The object does not have the shape of its kind (`replay`, `redrive`, `inspect` or
    /// `forget`): the source names the missing or unknown field.
    Invalid {
        /// `replay`, `redrive`, `inspect` or `forget`.
        what: &'static str,
        /// serde's error (the operator's own input: no secret in it).
        source: serde_json::Error,
    },
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InputError::NotAnObject => f.write_str(
                "the input must be a JSON object: {\"source\", \"since\", ...}, \
                 {\"source\", \"redrive\": {...}}, {\"source\", \"inspect\": \"...\"} or \
                 {\"forget\": {...}}",
            ),
            InputError::Ambiguous => f.write_str("give one of redrive, inspect and forget"),
            // serde's message quotes the offending value, and a forget input's values are a
            // data subject's identifier: its shape instead (and nothing of serde's).
            InputError::Invalid {
                what: "forget",
                source,
            } => {
                f.write_str(
                    "invalid forget input: expected {\"forget\": {\"source\": \"...\", \
                     \"event_id\": \"...\" or \"subject\": \"...\" (strings), \"by\": \"...\", \
                     \"reason\": \"...\" (optional), \"dry_run\": true (optional)}}",
                )?;
                // Only serde's messages that name a field, never one that quotes a value.
                let message = source.to_string();
                if message.starts_with("unknown field") || message.starts_with("missing field") {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            InputError::Invalid { what, .. } => write!(f, "invalid {what} input"),
        }
    }
}

impl std::error::Error for InputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InputError::Invalid { what: "forget", .. } => None,
            InputError::Invalid { source, .. } => Some(source),
            InputError::NotAnObject | InputError::Ambiguous => None,
        }
    }
}

impl Input {
    /// Reads the input: an object with `redrive` is a re-drive, one with `inspect` an
    /// inspection, one with `forget` an erasure, anything else a replay.
    ///
    /// # Errors
    /// [`InputError`] naming the problem (not an object, more than one of `redrive`,
    /// `inspect` and `forget`, a missing or unknown field).
    pub fn parse(value: Value) -> Result<Self, InputError> {
        let Some(object) = value.as_object() else {
            return Err(InputError::NotAnObject);
        };
        let invalid = |what: &'static str| move |source| InputError::Invalid { what, source };
        match (
            object.contains_key("redrive"),
            object.contains_key("inspect"),
            object.contains_key("forget"),
        ) {
            (true, false, false) => serde_json::from_value(value)
                .map(Input::Redrive)
                .map_err(invalid("redrive")),
            (false, true, false) => serde_json::from_value(value)
                .map(Input::Inspect)
                .map_err(invalid("inspect")),
            (false, false, true) => serde_json::from_value(value)
                .map(Input::Forget)
                .map_err(invalid("forget")),
            (false, false, false) => serde_json::from_value(value)
                .map(Input::Replay)
                .map_err(invalid("replay")),
            _ => Err(InputError::Ambiguous),
        }
    }
}

/// Runs one invocation until its deadline; returns the report as JSON.
///
/// # Errors
/// An invalid input; a replay that failed (the message carries its partial report and
/// `next_cursor`); a re-drive refused or failed; an inspected key not in the ledger. Each is
/// the error with its causes as one message (`shared::error_chain::error_chain`): the runtime
/// reports an error's own text only.
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
    let input = Input::parse(input).map_err(|e| error_chain(&e))?;
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
                    "{}; report so far: {}",
                    error_chain(&error),
                    serde_json::to_string(&error.report)?
                )
                .into()),
            }
        }
        Input::Redrive(input) => {
            let selection = input.redrive.selection().map_err(|e| error_chain(&e))?;
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
            // The reason in words with its causes (Debug would print the enum).
            .map_err(|e| error_chain(&e))?;
            Ok(serde_json::to_value(report)?)
        }
        Input::Forget(input) => {
            let sources = receiver.sources.current();
            let report = shared::forget::run(&receiver.pool, &sources, &input.forget)
                .await
                .map_err(|e| error_chain(&e))?;
            Ok(serde_json::to_value(report)?)
        }
        Input::Inspect(input) => {
            match shared::redrive::inspect(&receiver.pool, &input.source, &input.inspect)
                .await
                .map_err(|e| error_chain(&e))?
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
    fn the_four_input_shapes_parse_and_others_are_refused_by_name() {
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
        let refused = |input: Value| error_chain(&Input::parse(input).unwrap_err());
        let e = refused(json!({"source": "s"}));
        assert!(e.contains("since"), "{e}");
        let e = refused(json!({"source": "s", "since": "x", "untill": "y"}));
        assert!(e.contains("untill"), "{e}");
        let e = refused(json!([1]));
        assert!(e.contains("JSON object"), "{e}");
        let e = refused(json!({"source": "s", "redrive": {}, "inspect": "x"}));
        assert!(e.contains("one of"), "{e}");
        let forget = Input::parse(json!({"forget": {"source": "s", "subject": "cus_1",
                                         "by": "ops", "reason": "ticket 7"}}))
        .unwrap();
        assert!(matches!(forget, Input::Forget(f) if f.forget.subject.is_some()));
        let e = refused(json!({"forget": {"source": "s", "by": "ops", "subjekt": "x"}}));
        assert!(e.contains("subjekt"), "{e}");
        let e = refused(json!({"source": "s", "forget": {}}));
        assert!(e.contains("source"), "{e}");
    }
}
