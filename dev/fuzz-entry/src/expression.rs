//! Targets `filter` and `transform`: a built-in target's JMESPath filter and transform
//! (`shared::expression`) over an event's envelope. The input's first line is the expression,
//! the rest the event's body: a JSON document, or bytes read as the receiver reads a body that
//! is not JSON (a form's fields, else `null`).

use serde_json::Value;
use shared::expression::{body_value, envelope, ExpressionError, Filter, Transform};

/// The expression (the first line, lossily UTF-8) and the envelope of the body (the rest).
fn split(data: &[u8]) -> (String, Value) {
    let (expression, body) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let expression = String::from_utf8_lossy(expression).into_owned();
    let body = body_value(body, body);
    (expression, envelope("fuzz", "evt_fuzz", "fuzz.event", body))
}

/// Target `filter`: compiles the first line as a filter and, when it compiles, evaluates it on
/// the envelope of the rest. A refusal is [`ExpressionError::Invalid`], a failure
/// [`ExpressionError::Failed`]; neither panics.
pub fn filter(data: &[u8]) {
    let (expression, envelope) = split(data);
    match Filter::compile(&expression) {
        Ok(filter) => {
            if let Err(error) = filter.matches(&envelope) {
                assert!(
                    matches!(error, ExpressionError::Failed { .. }),
                    "a filter's evaluation fails only as Failed: {error:?}"
                );
            }
        }
        Err(error) => assert!(
            matches!(error, ExpressionError::Invalid { .. }),
            "a refusal is Invalid: {error:?}"
        ),
    }
}

/// Target `transform`: compiles the first line as a transform and, when it compiles, applies
/// it to the envelope of the rest; a body it returns is JSON and never `null`.
pub fn transform(data: &[u8]) {
    let (expression, envelope) = split(data);
    let Ok(transform) = Transform::compile(&expression) else {
        return;
    };
    match transform.apply(&envelope) {
        Ok(body) => {
            let value: Value = serde_json::from_slice(&body)
                .unwrap_or_else(|e| panic!("a transform's body is JSON: {e}"));
            assert!(!value.is_null(), "a transform's body is never null");
        }
        Err(error) => assert!(
            !matches!(error, ExpressionError::Invalid { .. }),
            "a compiled transform is not refused at apply: {error:?}"
        ),
    }
}
