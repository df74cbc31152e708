//! A SQL handler's parameters read from an event: each [`Param`] (a JSON pointer into the
//! event's document, a field of a form body, or the event's id, type or source, with its
//! declared [`ParamType`]; configured in `crate::config::sql_handlers`) converted strictly to
//! a value PostgreSQL receives (the conversions are documented on [`ParamType`]).
//!
//! Pure: no I/O. A value that is missing or does not convert is a [`ParamError`], which names
//! the parameter's number and where it was read, never the value: the reason ends up in
//! `last_error` and the log.

use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio_postgres::types::{to_sql_checked, Format, IsNull, Json, ToSql, Type};

use crate::config::sql_handlers::{EventField, Origin, Param, ParamType};

/// Why a parameter has no value for an event: fatal for the event. Names the parameter and
/// where it was read, never the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parameter ${number} ({origin}) {problem}")]
pub struct ParamError {
    /// The parameter's number (`$n`).
    pub number: usize,
    /// Where it was read.
    pub origin: Origin,
    /// What is wrong (never the value).
    pub problem: String,
}

/// What an event offers its parameters: the document parsed once, the form fields of the
/// body, and the event's own fields.
#[derive(Debug)]
pub struct Input<'a> {
    /// The event's JSON document, or why it is not JSON (line and column, no value).
    pub document: Result<Value, String>,
    /// The raw body (read as a form by `form` parameters).
    pub body: &'a [u8],
    /// The body is the JSON document itself: no form, so `form` parameters find no field
    /// (read as a form, a string inside the JSON could supply one: `"hi&user_id=U_ADMIN"`).
    pub body_is_json: bool,
    /// The event's id.
    pub event_id: &'a str,
    /// The event's type.
    pub event_type: &'a str,
    /// The source's name.
    pub source: &'a str,
}

impl<'a> Input<'a> {
    /// The input of an event with raw body `body` and JSON document `document`.
    pub fn new(
        source: &'a str,
        event_id: &'a str,
        event_type: &'a str,
        body: &'a [u8],
        document: &[u8],
    ) -> Self {
        let same_bytes = body == document;
        let document = serde_json::from_slice::<Value>(document).map_err(|error| {
            format!(
                "the event's document is not JSON (line {}, column {})",
                error.line(),
                error.column()
            )
        });
        let body_is_json = same_bytes && document.is_ok();
        Self {
            document,
            body,
            body_is_json,
            event_id,
            event_type,
            source,
        }
    }
}

/// A value as read, before conversion.
enum Raw<'v> {
    Json(&'v Value),
    Text(String),
}

/// A `numeric` value checked in Rust and sent as text (PostgreSQL parses it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Numeric(String);

impl Numeric {
    /// The decimal as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl ToSql for Numeric {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut tokio_postgres::types::private::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }

    fn encode_format(&self, _ty: &Type) -> Format {
        Format::Text
    }

    to_sql_checked!();
}

/// Whether `text` is a decimal in the syntax PostgreSQL's `numeric` reads, without the special
/// values: `[+-]` digits with an optional fraction (or a fraction alone), then an optional
/// exponent `e[+-]digits`. At most 1000 characters.
pub fn is_decimal(text: &str) -> bool {
    if text.is_empty() || text.len() > 1000 {
        return false;
    }
    let b = text.as_bytes();
    let mut i = 0;
    if matches!(b[0], b'+' | b'-') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - frac_start;
    }
    if int_digits + frac_digits == 0 {
        return false;
    }
    if i < b.len() && matches!(b[i], b'e' | b'E') {
        i += 1;
        if i < b.len() && matches!(b[i], b'+' | b'-') {
            i += 1;
        }
        let exp_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == exp_start {
            return false;
        }
    }
    i == b.len()
}

/// A value PostgreSQL receives, boxed as [`crate::ledger::Tx::defer`] takes it.
pub type SqlValue = Box<dyn ToSql + Sync + Send>;

impl Param {
    /// The value of this parameter (number `number`) for `input`, converted to its type.
    ///
    /// # Errors
    /// [`ParamError`] when the value is missing (and the parameter is not `optional`), is
    /// `null` where it may not be, or does not convert (see [`ParamType`]): never the value.
    pub fn value(&self, number: usize, input: &Input<'_>) -> Result<SqlValue, ParamError> {
        let error = |problem: String| ParamError {
            number,
            origin: self.origin.clone(),
            problem,
        };
        let raw = match &self.origin {
            Origin::Event(field) => Raw::Text(
                match field {
                    EventField::Id => input.event_id,
                    EventField::Type => input.event_type,
                    EventField::Source => input.source,
                }
                .to_owned(),
            ),
            Origin::Path(pointer) => {
                let document = input.document.as_ref().map_err(|why| error(why.clone()))?;
                match document.pointer(pointer) {
                    Some(Value::Null) if self.optional => return Ok(null(self.ty)),
                    Some(Value::Null) if self.ty != ParamType::Jsonb => {
                        return Err(error("is null (declare it optional to store NULL)".into()))
                    }
                    Some(value) => Raw::Json(value),
                    None if self.optional => return Ok(null(self.ty)),
                    None => return Err(error("is missing from the event".into())),
                }
            }
            Origin::Form(field) => {
                let found = (!input.body_is_json)
                    .then(|| {
                        form_urlencoded::parse(input.body)
                            .filter(|(k, _)| k == field.as_str())
                            .last()
                            .map(|(_, v)| v.into_owned())
                    })
                    .flatten();
                match found {
                    Some(text) => Raw::Text(text),
                    None if self.optional => return Ok(null(self.ty)),
                    None if input.body_is_json => {
                        return Err(error(
                            "is missing: the event's body is JSON, not a form".into(),
                        ))
                    }
                    None => return Err(error("is missing from the form body".into())),
                }
            }
        };
        convert(self.ty, raw).map_err(|problem| error(problem.to_owned()))
    }
}

/// The value at `pointer` in `input`'s document as text: a string, or a number's JSON text
/// (for the ordering guard's entity id).
///
/// # Errors
/// What is wrong (not JSON, missing, another kind of value), never the value.
pub fn text_at(input: &Input<'_>, pointer: &str) -> Result<String, String> {
    let document = input.document.as_ref().map_err(Clone::clone)?;
    match document.pointer(pointer) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(other) => Err(format!("is {}, not a string or a number", kind(other))),
        None => Err("is missing from the event".to_owned()),
    }
}

/// The value at `pointer` in `input`'s document as a 64-bit integer: a JSON integer or a
/// string of one (for the ordering guard's version).
///
/// # Errors
/// What is wrong (not JSON, missing, not an integer), never the value.
pub fn integer_at(input: &Input<'_>, pointer: &str) -> Result<i64, String> {
    let document = input.document.as_ref().map_err(Clone::clone)?;
    match document.pointer(pointer) {
        Some(Value::Number(n)) => n
            .as_i64()
            .ok_or_else(|| "is a number that is not a 64-bit integer".to_owned()),
        Some(Value::String(s)) => parse_i64(s),
        Some(other) => Err(format!("is {}, not an integer", kind(other))),
        None => Err("is missing from the event".to_owned()),
    }
}

/// SQL `NULL` of type `ty`.
fn null(ty: ParamType) -> SqlValue {
    match ty {
        ParamType::Text => Box::new(None::<String>),
        ParamType::Bigint => Box::new(None::<i64>),
        ParamType::Numeric => Box::new(None::<Numeric>),
        ParamType::Boolean => Box::new(None::<bool>),
        ParamType::Timestamptz => Box::new(None::<SystemTime>),
        ParamType::Jsonb => Box::new(None::<Json<Value>>),
    }
}

/// The JSON kind of `value`, for an error (never the value).
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Converts `raw` to `ty` strictly; the error says what was expected and what kind of value
/// was found, never the value.
fn convert(ty: ParamType, raw: Raw<'_>) -> Result<SqlValue, String> {
    let refused = |expected: &str, found: &str| format!("is {found}, not {expected}");
    match (ty, raw) {
        (ParamType::Text, Raw::Text(text)) => Ok(Box::new(text)),
        (ParamType::Text, Raw::Json(value)) => match value {
            Value::String(s) => Ok(Box::new(s.clone())),
            Value::Number(n) => Ok(Box::new(n.to_string())),
            Value::Bool(b) => Ok(Box::new(b.to_string())),
            other => Err(format!(
                "is {}, not text (declare it jsonb to store JSON)",
                kind(other)
            )),
        },
        (ParamType::Bigint, raw) => {
            let parsed = match raw {
                Raw::Json(Value::Number(n)) => n.as_i64().ok_or_else(|| {
                    if n.is_f64() {
                        "is a number that is not an integer, not a bigint".to_owned()
                    } else {
                        "is an integer out of the bigint range".to_owned()
                    }
                })?,
                Raw::Json(Value::String(s)) => parse_i64(s)?,
                Raw::Text(s) => parse_i64(&s)?,
                Raw::Json(other) => return Err(refused("a bigint", kind(other))),
            };
            Ok(Box::new(parsed))
        }
        (ParamType::Numeric, raw) => {
            let text = match raw {
                Raw::Json(Value::Number(n)) => n.to_string(),
                Raw::Json(Value::String(s)) => s.clone(),
                Raw::Text(s) => s,
                Raw::Json(other) => return Err(refused("a numeric", kind(other))),
            };
            if !is_decimal(&text) {
                return Err(
                    "is not a decimal number (digits, an optional fraction and exponent)"
                        .to_owned(),
                );
            }
            Ok(Box::new(Numeric(text)))
        }
        (ParamType::Boolean, raw) => {
            let parsed = match raw {
                Raw::Json(Value::Bool(b)) => *b,
                Raw::Json(Value::String(s)) => parse_bool(s)?,
                Raw::Text(s) => parse_bool(&s)?,
                Raw::Json(other) => return Err(refused("a boolean", kind(other))),
            };
            Ok(Box::new(parsed))
        }
        (ParamType::Timestamptz, raw) => {
            let at = match raw {
                Raw::Json(Value::Number(n)) => {
                    let seconds = n.as_i64().ok_or_else(|| {
                        "is a number that is not integer unix seconds, not a timestamptz".to_owned()
                    })?;
                    from_unix(i128::from(seconds) * 1_000_000_000)?
                }
                Raw::Json(Value::String(s)) => parse_rfc3339(s)?,
                Raw::Text(s) => parse_rfc3339(&s)?,
                Raw::Json(other) => return Err(refused("a timestamptz", kind(other))),
            };
            Ok(Box::new(at))
        }
        (ParamType::Jsonb, Raw::Json(value)) => Ok(Box::new(Json(value.clone()))),
        (ParamType::Jsonb, Raw::Text(text)) => Ok(Box::new(Json(Value::String(text)))),
    }
}

fn parse_i64(text: &str) -> Result<i64, String> {
    text.parse::<i64>()
        .map_err(|_| "is a string that is not an integer in the bigint range".to_owned())
}

fn parse_bool(text: &str) -> Result<bool, String> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("is a string other than \"true\" or \"false\", not a boolean".to_owned()),
    }
}

fn parse_rfc3339(text: &str) -> Result<SystemTime, String> {
    let parsed = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map_err(|_| "is a string that is not an RFC 3339 timestamp".to_owned())?;
    from_unix(parsed.unix_timestamp_nanos())
}

/// The earliest and latest instants accepted, unix seconds: years 1 to 9999 (RFC 3339's range,
/// well inside PostgreSQL's `timestamptz`).
const UNIX_RANGE: std::ops::RangeInclusive<i128> = -62_135_596_800..=253_402_300_799;

/// The instant `nanos` nanoseconds after (or before) the Unix epoch.
fn from_unix(nanos: i128) -> Result<SystemTime, String> {
    let out_of_range = || "is a time outside the years 1 to 9999".to_owned();
    if !UNIX_RANGE.contains(&nanos.div_euclid(1_000_000_000)) {
        return Err(out_of_range());
    }
    let magnitude =
        u64::try_from(nanos.unsigned_abs() / 1_000_000_000).map_err(|_| out_of_range())?;
    let sub = (nanos.unsigned_abs() % 1_000_000_000) as u32;
    let offset = Duration::new(magnitude, sub);
    if nanos >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(offset)
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(offset)
    }
    .ok_or_else(out_of_range)
}

#[cfg(test)]
mod tests;
