//! Target `sql_params`: a SQL handler's parameters (`shared::sql_handler::params`) checked from
//! configuration and read from an event, asserting that every refusal names the parameter and
//! never quotes a value of the event.
//!
//! Input: a JSON array of parameter specs (`[{"path": "/a", "type": "bigint"}, ...]`), a blank
//! line, then the event's body (read as the JSON document and as a form).

use serde_json::Value;
use shared::config::sql_handlers::Origin;
use shared::config::Sources;
use shared::sql_handler::params::{integer_at, text_at, Input};

/// The most parameters one input configures (keeps an execution short).
const MAX_PARAMS: usize = 16;

/// Splits the input into its parameter specs and the event's body.
fn split(data: &[u8]) -> Option<(Vec<Value>, &[u8])> {
    let at = data.windows(2).position(|w| w == b"\n\n")?;
    let specs: Vec<Value> = serde_json::from_slice(&data[..at]).ok()?;
    (specs.len() <= MAX_PARAMS).then_some((specs, &data[at + 2..]))
}

/// Every string of `value` at least `min` characters long (the values an error must not quote).
fn strings(value: &Value, min: usize, out: &mut Vec<String>) {
    match value {
        Value::String(s) if s.chars().count() >= min => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, min, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, min, out)),
        _ => {}
    }
}

/// The target's entry function (see the module docs).
pub fn sql_params(data: &[u8]) {
    let Some((specs, body)) = split(data) else {
        return;
    };
    let placeholders: Vec<String> = (1..=specs.len()).map(|n| format!("${n}")).collect();
    let statement = if specs.is_empty() {
        "SELECT 1".to_owned()
    } else {
        format!("SELECT {}", placeholders.join(", "))
    };
    let sources = serde_json::json!([{"name": "fuzz", "scheme": "github", "secrets": ["x"],
        "handlers": [{"event_types": ["*"],
                      "sql": [{"statement": statement, "params": specs}]}]}]);
    let Ok(sources) = Sources::from_json(&sources.to_string()) else {
        return;
    };
    let Some(config) = sources.get("fuzz").and_then(|s| s.sql_handlers.first()) else {
        return;
    };
    // The statement `SELECT $1, ..., $n` always builds.
    let Ok(handler) = shared::sql_handler::SqlHandler::build(config) else {
        panic!("SELECT with one placeholder per parameter was refused");
    };
    let config = serde_json::to_string(&specs).unwrap_or_default();
    // Values of the event an error could quote (its JSON strings, or its form values), but
    // the configuration does not spell.
    let mut secrets = Vec::new();
    strings(
        &shared::expression::body_value(body, body),
        12,
        &mut secrets,
    );
    secrets
        .retain(|s| !config.contains(s.as_str()) && !"the event's document".contains(s.as_str()));
    let input = Input::new("fuzz", "evt_fuzz", "fuzz.type", body, body);
    for statement in &handler.statements {
        assert_eq!(statement.params.len(), statement.sql.types.len());
        for (at, param) in statement.params.iter().enumerate() {
            let number = at + 1;
            let mut problems: Vec<String> = match param.value(number, &input) {
                Ok(_) => Vec::new(),
                Err(error) => {
                    let text = error.to_string();
                    assert!(text.contains(&format!("${number} ")), "{text}");
                    vec![text]
                }
            };
            if let Origin::Path(pointer) = &param.origin {
                problems.extend(text_at(&input, pointer).err());
                problems.extend(integer_at(&input, pointer).err());
            }
            for problem in &problems {
                for secret in &secrets {
                    assert!(
                        !problem.contains(secret.as_str()),
                        "an error quotes a value of the event: {problem}"
                    );
                }
            }
        }
    }
}
