//! The model's templates: `signed_payload` (what is signed) and the event id / type rules
//! (where they are read), their parser (run once, at start-up) and what they give for one
//! delivery.
//!
//! Placeholders:
//!
//! | placeholder | stands for | in |
//! |---|---|---|
//! | `{body}` | the raw body bytes | `signed_payload` |
//! | `{timestamp}` | the timestamp as received (header, body field or signature entry) | `signed_payload` |
//! | `{url}` | the request URL as the provider saw it (scheme, host, path, query) | `signed_payload` |
//! | `{method}` | the request method, uppercase | `signed_payload` |
//! | `{form}` | the form fields sorted by name, each name then value, nothing between (Twilio) | `signed_payload` |
//! | `{header:Name}` | that header's value | both |
//! | `{field:/pointer}` | the JSON body's value at an RFC 6901 pointer (a string as is, a number as written) | both |
//! | `{form:name}` | that form field's value; `{form:A\|B}` the first of A and B present | event id / type only |
//! | `{digest}` | hex SHA-256 of the event's bytes (the body, or a batch item) | event id / type only |
//!
//! Everything else is literal text; `{{` and `}}` are not escapes (no literal braces).

use http::HeaderName;

/// The signed-payload template used when `signed_payload` is absent: the raw body alone.
pub const DEFAULT_SIGNED_PAYLOAD: &str = "{body}";

/// The template placeholder for the raw body bytes (at most once).
pub const BODY_PLACEHOLDER: &str = "{body}";

/// The template placeholder for the timestamp, as received (at most once; requires a
/// timestamp location).
pub const TIMESTAMP_PLACEHOLDER: &str = "{timestamp}";

/// One piece of a parsed template, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    /// Literal text, as UTF-8 bytes.
    Literal(String),
    /// The timestamp's text, as received.
    Timestamp,
    /// The raw body.
    Body,
    /// The request URL.
    Url,
    /// The request method.
    Method,
    /// The sorted form fields, concatenated.
    Form,
    /// A header's value (lowercase name).
    Header(HeaderName),
    /// A JSON body value (an RFC 6901 pointer).
    Field(String),
    /// A form field's value: the first of these names present (`{form:A|B}`).
    FormField(Vec<String>),
    /// The lowercase hex SHA-256 of the event's bytes (a batch item's, or the body), for a
    /// provider whose events carry no id (Meta).
    Digest,
}

/// Which placeholders a template may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Use {
    /// `signed_payload`.
    Signed,
    /// An event id or type rule.
    Naming,
}

/// Parse `template` (configuration field `field`) into segments, adjacent literal text merged.
///
/// # Errors
/// A sentence naming the field if a `{` is not closed, a `}` closes nothing, a placeholder is
/// unknown or not allowed in this kind of template, a header name or pointer is invalid, or
/// `{body}`, `{timestamp}` or `{form}` is repeated.
pub(crate) fn parse_template(
    field: &str,
    template: &str,
    kind: Use,
) -> Result<Vec<Segment>, String> {
    let mut segments = Vec::new();
    let mut literal = String::new();
    let mut rest = template;
    while let Some(open) = rest.find(['{', '}']) {
        literal.push_str(&rest[..open]);
        let after = &rest[open..];
        if after.starts_with('}') {
            return Err(format!(
                "{field} {template:?} has a '}}' that closes no placeholder"
            ));
        }
        let Some(close) = after.find('}') else {
            return Err(format!("{field} {template:?} has an unclosed '{{'"));
        };
        let placeholder = &after[..=close];
        let segment = placeholder_segment(field, template, &after[1..close], kind)?;
        if matches!(segment, Segment::Body | Segment::Timestamp | Segment::Form)
            && segments.contains(&segment)
        {
            return Err(format!(
                "{field} {template:?} uses {placeholder} more than once"
            ));
        }
        if !literal.is_empty() {
            segments.push(Segment::Literal(std::mem::take(&mut literal)));
        }
        segments.push(segment);
        rest = &after[close + 1..];
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        segments.push(Segment::Literal(literal));
    }
    Ok(segments)
}

fn placeholder_segment(
    field: &str,
    template: &str,
    inner: &str,
    kind: Use,
) -> Result<Segment, String> {
    let signed_only = |segment: Segment| match kind {
        Use::Signed => Ok(segment),
        Use::Naming => Err(format!(
            "{field} {template:?}: {{{inner}}} is only for signed_payload (an event id or type \
             reads {{header:Name}}, {{field:/pointer}} or {{form:name}})"
        )),
    };
    match inner.split_once(':') {
        None => match inner {
            "body" => signed_only(Segment::Body),
            "timestamp" => signed_only(Segment::Timestamp),
            "url" => signed_only(Segment::Url),
            "method" => signed_only(Segment::Method),
            "form" => signed_only(Segment::Form),
            "digest" if kind == Use::Naming => Ok(Segment::Digest),
            _ => Err(unknown(field, template, inner)),
        },
        Some(("header", name)) => HeaderName::from_bytes(name.as_bytes())
            .map(Segment::Header)
            .map_err(|_| format!("{field} {template:?}: {name:?} is not a valid HTTP header name")),
        Some(("field", pointer)) => {
            json_pointer(field, pointer)?;
            Ok(Segment::Field(pointer.to_owned()))
        }
        Some(("form", names))
            if kind == Use::Naming && names.split('|').all(|name| !name.is_empty()) =>
        {
            Ok(Segment::FormField(
                names.split('|').map(str::to_owned).collect(),
            ))
        }
        _ => Err(unknown(field, template, inner)),
    }
}

fn unknown(field: &str, template: &str, inner: &str) -> String {
    format!(
        "{field} {template:?} has an unknown placeholder {{{inner}}} (known: {{body}}, \
         {{timestamp}}, {{url}}, {{method}}, {{form}}, {{header:Name}}, {{field:/pointer}}, and \
         {{form:name}} and {{digest}} in an event id or type)"
    )
}

/// Check that `pointer` (configuration field `field`) is an RFC 6901 JSON pointer into the body:
/// it starts with `/` (the whole document, `""`, is no value) and every `~` is followed by `0`
/// or `1`.
///
/// # Errors
/// A sentence naming the field otherwise.
pub(crate) fn json_pointer(field: &str, pointer: &str) -> Result<(), String> {
    if !pointer.starts_with('/') {
        return Err(format!(
            "{field} {pointer:?} must be a JSON pointer starting with '/', e.g. \"/id\""
        ));
    }
    let mut bytes = pointer.bytes();
    while let Some(b) = bytes.next() {
        if b == b'~' && !matches!(bytes.next(), Some(b'0' | b'1')) {
            return Err(format!(
                "{field} {pointer:?} has a '~' not followed by 0 or 1 (RFC 6901 escapes)"
            ));
        }
    }
    Ok(())
}

/// The text of a JSON value used in a template: a string as is, a number or boolean as written
/// by serde_json; `None` for null, an array or an object.
pub(crate) fn value_text(value: &serde_json::Value) -> Option<std::borrow::Cow<'_, str>> {
    match value {
        serde_json::Value::String(text) => Some(text.as_str().into()),
        serde_json::Value::Number(number) => Some(number.to_string().into()),
        serde_json::Value::Bool(flag) => Some(flag.to_string().into()),
        _ => None,
    }
}

/// Twilio's concatenation of form fields: sorted by name (then value, for a repeated name),
/// each name immediately followed by its value (Twilio docs, "Webhooks security": "sort the
/// list of POST variables by the parameter name ... append each POST variable, name and value,
/// to the string with no delimiters").
pub(crate) fn sorted_form(body: &[u8]) -> String {
    let mut fields: Vec<(String, String)> = form_urlencoded::parse(body)
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect();
    // twilio-python sorts `set()`s of names and of each name's values: a repeated identical
    // pair counts once.
    fields.sort();
    fields.dedup();
    let mut out = String::with_capacity(body.len());
    for (name, value) in fields {
        out.push_str(&name);
        out.push_str(&value);
    }
    out
}
