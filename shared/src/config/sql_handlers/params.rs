//! A SQL handler's parameter as configured: where its value is read ([`Origin`]) and its
//! declared type ([`ParamType`], whose docs state each conversion; reading and converting is
//! `crate::sql_handler::params`').

use tokio_postgres::types::Type;

/// A parameter's declared type: the PostgreSQL type the statement is prepared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    /// `text`: a JSON string as it is; a number or a boolean as its JSON text; an object or an
    /// array is refused (use `jsonb`).
    Text,
    /// `int8`: a JSON integer in the 64-bit range, or a string holding one (`"42"`).
    Bigint,
    /// `numeric`: a JSON number, or a string in decimal syntax (`"12.50"`, `"-1e3"`; no
    /// `NaN`, no `Infinity`), sent to PostgreSQL as text. A JSON number is read as serde_json
    /// reads it: integers exactly, others as a double (15 to 17 significant digits); send
    /// decimal strings where more precision matters.
    Numeric,
    /// `bool`: `true`/`false`, or the strings `"true"`/`"false"`.
    Boolean,
    /// `timestamptz`: a JSON integer (unix seconds) or an RFC 3339 string
    /// (`2026-12-03T10:00:00Z`), in the years 1 to 9999.
    Timestamptz,
    /// `jsonb`: any JSON value (a form field: its string). `null` is the JSON value `null`
    /// unless the parameter is `optional` (then SQL `NULL`).
    Jsonb,
}

impl ParamType {
    /// The PostgreSQL type the statement declares for it.
    pub fn pg_type(self) -> Type {
        match self {
            ParamType::Text => Type::TEXT,
            ParamType::Bigint => Type::INT8,
            ParamType::Numeric => Type::NUMERIC,
            ParamType::Boolean => Type::BOOL,
            ParamType::Timestamptz => Type::TIMESTAMPTZ,
            ParamType::Jsonb => Type::JSONB,
        }
    }

    /// Its name as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::Text => "text",
            ParamType::Bigint => "bigint",
            ParamType::Numeric => "numeric",
            ParamType::Boolean => "boolean",
            ParamType::Timestamptz => "timestamptz",
            ParamType::Jsonb => "jsonb",
        }
    }
}

/// A field of the event itself (always `text`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventField {
    /// The provider's event id (the ledger's key).
    Id,
    /// The event type.
    Type,
    /// The source's configured name.
    Source,
}

impl EventField {
    /// Its name as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            EventField::Id => "id",
            EventField::Type => "type",
            EventField::Source => "source",
        }
    }
}

/// Where a parameter's value is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// An RFC 6901 JSON pointer into the event's JSON document (`""`: the whole document).
    Path(String),
    /// A field of a form-encoded body (`application/x-www-form-urlencoded`; the last value
    /// when the field is repeated).
    Form(String),
    /// The event's id, type or source.
    Event(EventField),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Path(pointer) => write!(f, "path {pointer:?}"),
            Origin::Form(field) => write!(f, "form field {field:?}"),
            Origin::Event(field) => write!(f, "event {}", field.as_str()),
        }
    }
}

/// One parameter of a statement, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// Where the value is read.
    pub origin: Origin,
    /// The declared type (`text` for an event field).
    pub ty: ParamType,
    /// A missing value or a JSON `null` is SQL `NULL` (otherwise an error).
    pub optional: bool,
}

/// Whether `pointer` is an RFC 6901 JSON pointer: empty, or `/`-separated tokens in which
/// `~` is followed by `0` or `1` only.
pub fn is_json_pointer(pointer: &str) -> bool {
    if pointer.is_empty() {
        return true;
    }
    if !pointer.starts_with('/') {
        return false;
    }
    let bytes = pointer.as_bytes();
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'~')
        .all(|(at, _)| matches!(bytes.get(at + 1), Some(b'0' | b'1')))
}
