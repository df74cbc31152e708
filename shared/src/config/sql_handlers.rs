//! A source's SQL handlers as written in the sources JSON (`"handlers"`, [`SqlHandlerSpec`])
//! and as checked while the sources are read ([`SqlHandlerConfig`]): patterns, `when`,
//! statements and their parameters, the ordering guard and the response. Every problem is a
//! [`SqlHandlerError`] naming the handler, its event type patterns and the statement. Running
//! them (and the checks that need the SQL lexer or the database) is `crate::sql_handler`'s.

use serde::Deserialize;
use serde_json::Value;
use tokio_postgres::types::Type;

use super::targets::EventTypes;
use crate::expression::Filter;

mod params;

pub use params::{is_json_pointer, EventField, Origin, Param, ParamType};

/// One SQL handler as written in a source's `"handlers"` list (docs/reference/sources.md,
/// "handlers"):
///
/// ```json
/// {"event_types": ["charge.refunded"],
///  "when": "body.data.object.amount_refunded > `0`",
///  "sql": [{"statement": "INSERT INTO refunds (charge_id, event_id) VALUES ($1, $2)",
///           "params": [{"path": "/data/object/id", "type": "text"}, {"event": "id"}]}],
///  "order": {"entity_type": "charge", "entity": "/data/object/id", "version": "/created"},
///  "response": {"status": 200, "body": {"refund": "recorded"}}}
/// ```
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlHandlerSpec {
    /// Event types it applies to: each exact or a prefix ending in `*`.
    pub event_types: Vec<String>,
    /// A JMESPath filter over the event's envelope (`crate::expression`); the handler applies
    /// only when it holds. Always, when absent.
    #[serde(default)]
    pub when: Option<String>,
    /// The statements, run in order in the event's transaction; at least one.
    pub sql: Vec<StatementSpec>,
    /// The ordering guard to pass first (`crate::ordering::advance`). None when absent.
    #[serde(default)]
    pub order: Option<OrderSpec>,
    /// The response; `200 {"status": "applied"}` when absent.
    #[serde(default)]
    pub response: Option<ResponseSpec>,
}

/// One statement and its parameters (`$1` is the first of `params`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatementSpec {
    /// The SQL text, with `$1..$n` placeholders.
    pub statement: String,
    /// One entry per placeholder, in order.
    #[serde(default)]
    pub params: Vec<ParamSpec>,
}

/// One parameter as written: exactly one of `path`, `form` and `event`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamSpec {
    /// An RFC 6901 JSON pointer into the event's document.
    #[serde(default)]
    pub path: Option<String>,
    /// A field of a form-encoded body.
    #[serde(default)]
    pub form: Option<String>,
    /// `id`, `type` or `source` of the event (text).
    #[serde(default)]
    pub event: Option<EventField>,
    /// The type: required with `path` and `form`; `text` (or absent) with `event`.
    #[serde(default, rename = "type")]
    pub ty: Option<ParamType>,
    /// A missing value or JSON `null` is SQL `NULL` instead of an error. `false` when absent.
    #[serde(default)]
    pub optional: Option<bool>,
}

/// The ordering guard's entity and version, read from the event's document.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderSpec {
    /// The kind of entity, e.g. `charge`.
    pub entity_type: String,
    /// JSON pointer to the entity's id (a string or a number).
    pub entity: String,
    /// JSON pointer to the version (an integer, or a string of one), e.g. `/created`.
    pub version: String,
}

/// The response as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseSpec {
    /// 200, 201 or 202; 200 when absent.
    #[serde(default)]
    pub status: Option<u16>,
    /// A fixed JSON body; `{"status": "applied"}` when absent.
    #[serde(default)]
    pub body: Option<Value>,
    /// The 1-based number of the statement whose first `RETURNING` row (as a JSON object) is
    /// the body; `body` when it returned no row.
    #[serde(default)]
    pub returning: Option<usize>,
}

/// Why a SQL handler's configuration is refused: which handler (1-based, in configuration
/// order), its event type patterns, the statement (1-based) when one is at fault, and what is
/// wrong. Never a value of an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SQL handler #{handler} ({patterns}){}: {problem}", statement.map(|n| format!(", statement {n}")).unwrap_or_default())]
pub struct SqlHandlerError {
    /// The handler's number in the source's `"handlers"`, from 1.
    pub handler: usize,
    /// Its event type patterns, as written (`event_types "a", "b.*"`).
    pub patterns: String,
    /// The statement's number in its `"sql"`, from 1, when one is at fault.
    pub statement: Option<usize>,
    /// What is wrong.
    pub problem: String,
}

/// The default response body.
pub fn default_body() -> Value {
    serde_json::json!({ "status": "applied" })
}

/// One statement, checked: its text and parameters (`$1` first).
#[derive(Debug, Clone)]
pub struct StatementConfig {
    /// Its number in the handler's `"sql"`, from 1.
    pub number: usize,
    /// The SQL text as written.
    pub text: String,
    /// The parameters, `$1` first.
    pub params: Vec<Param>,
}

impl StatementConfig {
    /// The parameters' declared PostgreSQL types, `$1` first.
    pub fn types(&self) -> Vec<Type> {
        self.params.iter().map(|p| p.ty.pg_type()).collect()
    }
}

/// The ordering guard of a handler.
#[derive(Debug, Clone)]
pub struct Order {
    /// The kind of entity.
    pub entity_type: String,
    /// JSON pointer to the entity's id.
    pub entity: String,
    /// JSON pointer to the version.
    pub version: String,
}

/// The response of a handler, checked.
#[derive(Debug, Clone)]
pub struct ResponseConfig {
    /// 200, 201 or 202.
    pub status: u16,
    /// The fixed body (and the body when the `returning` statement returned no row).
    pub body: Value,
    /// The number of the statement whose first `RETURNING` row is the body.
    pub returning: Option<usize>,
}

/// One SQL handler, checked.
#[derive(Debug, Clone)]
pub struct SqlHandlerConfig {
    /// Its number in the source's `"handlers"`, from 1.
    pub number: usize,
    /// The event types it applies to.
    pub event_types: EventTypes,
    /// The condition, if any.
    pub when: Option<Filter>,
    /// The statements, in order.
    pub statements: Vec<StatementConfig>,
    /// The ordering guard, if any.
    pub order: Option<Order>,
    /// The response.
    pub response: ResponseConfig,
}

impl SqlHandlerConfig {
    /// The patterns as the errors and the coverage name them: `event_types "a", "b.*"`.
    pub fn patterns(&self) -> String {
        quoted(self.event_types.patterns())
    }

    /// A [`SqlHandlerError`] of this handler (and statement `statement`, when one is at fault).
    pub fn error(&self, statement: Option<usize>, problem: String) -> SqlHandlerError {
        SqlHandlerError {
            handler: self.number,
            patterns: self.patterns(),
            statement,
            problem,
        }
    }

    /// Checks `spec`, the `number`th handler of its source (what needs no SQL lexer and no
    /// database; `crate::sql_handler` checks the rest when the functions start).
    ///
    /// # Errors
    /// [`SqlHandlerError`] for no or a bad event type pattern, a `when` that does not compile,
    /// no statements, an empty statement, a parameter that is not exactly one of
    /// `path`/`form`/`event`, a bad JSON pointer, a missing type, a bad `order`, a status
    /// other than 200/201/202, a `returning` that names no statement, or a body that is the
    /// recorded no-op's.
    pub fn from_spec(number: usize, spec: SqlHandlerSpec) -> Result<Self, SqlHandlerError> {
        let patterns = quoted(&spec.event_types);
        let error = |statement: Option<usize>, problem: String| SqlHandlerError {
            handler: number,
            patterns: patterns.clone(),
            statement,
            problem,
        };
        let event_types = EventTypes::parse(spec.event_types.clone()).map_err(|bad| {
            error(
                None,
                match bad {
                    None => "event_types is empty".to_owned(),
                    Some(bad) => format!(
                        "event type pattern {bad:?} must be an exact type or a prefix ending in *"
                    ),
                },
            )
        })?;
        let when = spec
            .when
            .as_deref()
            .map(Filter::compile)
            .transpose()
            .map_err(|e| error(None, format!("when: {e}")))?;
        if spec.sql.is_empty() {
            return Err(error(None, "sql has no statement".to_owned()));
        }
        let mut statements = Vec::with_capacity(spec.sql.len());
        for (at, statement) in spec.sql.into_iter().enumerate() {
            let n = at + 1;
            if statement.statement.trim().is_empty() {
                return Err(error(Some(n), "statement is empty".to_owned()));
            }
            let mut params = Vec::with_capacity(statement.params.len());
            for (at, param) in statement.params.into_iter().enumerate() {
                params.push(
                    param_of(param)
                        .map_err(|p| error(Some(n), format!("parameter ${}: {p}", at + 1)))?,
                );
            }
            statements.push(StatementConfig {
                number: n,
                text: statement.statement,
                params,
            });
        }
        let order = match spec.order {
            None => None,
            Some(order) => {
                if order.entity_type.trim().is_empty() {
                    return Err(error(None, "order.entity_type is empty".to_owned()));
                }
                for (field, pointer) in [("entity", &order.entity), ("version", &order.version)] {
                    if pointer.is_empty() || !is_json_pointer(pointer) {
                        return Err(error(
                            None,
                            format!(
                                "order.{field} {pointer:?} is not a JSON pointer (RFC 6901, \"/a/b\")"
                            ),
                        ));
                    }
                }
                Some(Order {
                    entity_type: order.entity_type,
                    entity: order.entity,
                    version: order.version,
                })
            }
        };
        let response = spec.response.unwrap_or(ResponseSpec {
            status: None,
            body: None,
            returning: None,
        });
        let status = response.status.unwrap_or(200);
        if !matches!(status, 200..=202) {
            return Err(error(
                None,
                format!("response.status {status} is not 200, 201 or 202"),
            ));
        }
        if let Some(n) = response.returning {
            if n == 0 || n > statements.len() {
                return Err(error(
                    None,
                    format!(
                        "response.returning {n} names no statement (1 to {})",
                        statements.len()
                    ),
                ));
            }
        }
        let body = response.body.unwrap_or_else(default_body);
        if is_the_recorded_no_op(&body) {
            return Err(error(
                None,
                "response.body is the recorded no-op's ({\"status\": \"ignored\", \"event_type\": \
                 ...}): the ledger would read the event as ignored, and `hookledger redrive \
                 --ignored` would run the handler again"
                    .to_owned(),
            ));
        }
        Ok(Self {
            number,
            event_types,
            when,
            statements,
            order,
            response: ResponseConfig {
                status,
                body,
                returning: response.returning,
            },
        })
    }
}

/// Whether `body` has the shape of the recorded no-op (`crate::apply::ignored_effect`:
/// exactly `{"status": "ignored", "event_type": <a string>}`), which the ledger reads as "no
/// handler ran".
fn is_the_recorded_no_op(body: &Value) -> bool {
    body.as_object().is_some_and(|o| {
        o.len() == 2
            && o.get("status") == Some(&Value::String("ignored".to_owned()))
            && o.get("event_type").is_some_and(Value::is_string)
    })
}

/// `event_types "a", "b.*"`.
fn quoted(patterns: &[String]) -> String {
    let quoted: Vec<String> = patterns.iter().map(|p| format!("{p:?}")).collect();
    format!("event_types {}", quoted.join(", "))
}

/// Checks one parameter.
fn param_of(spec: ParamSpec) -> Result<Param, String> {
    let optional = spec.optional.unwrap_or(false);
    let origin = match (spec.path, spec.form, spec.event) {
        (Some(pointer), None, None) => {
            if !is_json_pointer(&pointer) {
                return Err(format!(
                    "path {pointer:?} is not a JSON pointer (RFC 6901: \"\" or \"/a/b\", ~0 and ~1 escapes)"
                ));
            }
            Origin::Path(pointer)
        }
        (None, Some(field), None) => {
            if field.is_empty() {
                return Err("form names no field".to_owned());
            }
            Origin::Form(field)
        }
        (None, None, Some(field)) => {
            if !matches!(spec.ty, None | Some(ParamType::Text)) {
                return Err("an event field is text".to_owned());
            }
            if optional {
                return Err("an event field is never missing: drop optional".to_owned());
            }
            return Ok(Param {
                origin: Origin::Event(field),
                ty: ParamType::Text,
                optional: false,
            });
        }
        _ => return Err("give exactly one of path, form and event".to_owned()),
    };
    let ty = spec.ty.ok_or_else(|| {
        "type is required (text, bigint, numeric, boolean, timestamptz or jsonb)".to_owned()
    })?;
    Ok(Param {
        origin,
        ty,
        optional,
    })
}

#[cfg(test)]
mod tests;
