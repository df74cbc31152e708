//! Field redaction at rest: a source's `redact` list of JSON pointers, whose values are
//! replaced by [`REDACTED`] in the copy of a payload the ledger stores. Handlers and forward
//! targets see the body as received; the copy in `webhook_event.payload` (and so the console,
//! and what re-drive or the worker read of a completed event) has the values replaced.
//!
//! Pointers are RFC 6901 (`/data/object/customer_details/email`, `~1` for `/` and `~0` for
//! `~` inside a name), with one addition: a segment `*` matches every member of an object or
//! element of an array (`/data/object/items/*/description`). The pointers name places in the
//! document the handlers read (`hookledger_verify::extract::document_of`): a form-encoded body
//! with a `payload` field (GitHub's form deliveries, Slack interactivity) carries its JSON
//! document in that field, which is redacted there; any other form body (Twilio, Slack
//! commands) is read as one flat object of its fields, so `/Body` redacts the field `Body`.
//!
//! A JSON body keeps its bytes outside the replaced values (member order, spacing, numbers as
//! written); a form body is re-encoded field by field.

use std::borrow::Cow;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

/// What a redacted value becomes: the JSON string `"[redacted]"` (the form value `[redacted]`).
pub const REDACTED: &str = "[redacted]";

/// The most pointers one source may list.
pub const MAX_POINTERS: usize = 64;

/// One segment of a pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// A member name, or an array index written in decimal.
    Name(String),
    /// `*`: every member or element.
    Any,
}

impl Segment {
    fn matches_member(&self, name: &str) -> bool {
        match self {
            Segment::Name(wanted) => wanted == name,
            Segment::Any => true,
        }
    }

    fn matches_index(&self, index: usize) -> bool {
        match self {
            // RFC 6901: an index is decimal digits without a leading zero.
            Segment::Name(wanted) => {
                wanted.parse::<usize>().ok() == Some(index)
                    && (wanted == "0" || !wanted.starts_with('0'))
            }
            Segment::Any => true,
        }
    }
}

/// A source's checked redaction list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    pointers: Vec<Vec<Segment>>,
}

/// A redaction list that cannot be used: refused at start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedactionError {
    /// A pointer does not start with `/` (the whole document, `""`, is not a field: use
    /// `store_payload: false` to keep digests only).
    #[error("redact pointer {0:?} must start with '/' (RFC 6901)")]
    NotAPointer(String),
    /// A `~` not followed by `0` or `1`.
    #[error("redact pointer {0:?} has a '~' that is not '~0' or '~1'")]
    BadEscape(String),
    /// More than [`MAX_POINTERS`].
    #[error("redact lists {0} pointers; at most {MAX_POINTERS}")]
    TooMany(usize),
    /// An empty list.
    #[error("redact is empty: leave it out instead")]
    Empty,
}

/// Why a payload could not be redacted. The caller then stores no payload at all (never an
/// unredacted one): the event keeps its key and digests, like a source with
/// `store_payload: false`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unredactable {
    /// The body starts like JSON (`{` or `[`) but is not valid JSON.
    #[error("the body is not valid JSON, so its fields cannot be redacted")]
    Json,
    /// The body is not UTF-8.
    #[error("the body is not UTF-8, so its fields cannot be redacted")]
    NotUtf8,
}

impl Redaction {
    /// Checks a source's `redact` list.
    ///
    /// # Errors
    /// [`RedactionError`] naming the first pointer that cannot be used (its text is
    /// configuration, not payload, so the message may quote it).
    pub fn new(pointers: &[String]) -> Result<Self, RedactionError> {
        if pointers.is_empty() {
            return Err(RedactionError::Empty);
        }
        if pointers.len() > MAX_POINTERS {
            return Err(RedactionError::TooMany(pointers.len()));
        }
        let parsed = pointers
            .iter()
            .map(|pointer| parse_pointer(pointer))
            .collect::<Result<_, _>>()?;
        Ok(Self { pointers: parsed })
    }

    /// The copy of `body` to store: the values at the pointers replaced by [`REDACTED`]
    /// (borrowed when nothing matched). JSON when the body's first non-blank byte is `{` or
    /// `[`, a form otherwise.
    ///
    /// # Errors
    /// [`Unredactable`] when the body cannot be read as either.
    pub fn apply<'b>(&self, body: &'b [u8]) -> Result<Cow<'b, [u8]>, Unredactable> {
        let text = std::str::from_utf8(body).map_err(|_| Unredactable::NotUtf8)?;
        let all: Vec<&[Segment]> = self.pointers.iter().map(Vec::as_slice).collect();
        match text.trim_start().as_bytes().first() {
            Some(b'{' | b'[') => {
                let raw: &RawValue = serde_json::from_str(text).map_err(|_| Unredactable::Json)?;
                let mut out = String::with_capacity(text.len());
                let changed = rewrite(raw, &all, &mut out).map_err(|_| Unredactable::Json)?;
                Ok(if changed {
                    Cow::Owned(out.into_bytes())
                } else {
                    Cow::Borrowed(body)
                })
            }
            _ => redact_form(body, &all),
        }
    }
}

fn parse_pointer(pointer: &str) -> Result<Vec<Segment>, RedactionError> {
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(RedactionError::NotAPointer(pointer.to_owned()));
    };
    rest.split('/')
        .map(|segment| {
            if segment == "*" {
                return Ok(Segment::Any);
            }
            let mut name = String::with_capacity(segment.len());
            let mut chars = segment.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => name.push('~'),
                        Some('1') => name.push('/'),
                        _ => return Err(RedactionError::BadEscape(pointer.to_owned())),
                    }
                } else {
                    name.push(c);
                }
            }
            Ok(Segment::Name(name))
        })
        .collect()
}

/// Writes `raw` into `out` with the values the `pointers` (what is left of each at this
/// depth) reach replaced; returns whether anything was.
fn rewrite(
    raw: &RawValue,
    pointers: &[&[Segment]],
    out: &mut String,
) -> Result<bool, serde_json::Error> {
    if pointers.iter().any(|rest| rest.is_empty()) {
        out.push('"');
        out.push_str(REDACTED);
        out.push('"');
        return Ok(true);
    }
    let text = raw.get();
    if pointers.is_empty() {
        out.push_str(text);
        return Ok(false);
    }
    let mut changed = false;
    match text.as_bytes().first() {
        Some(b'{') => {
            let Members(members) = serde_json::from_str(text)?;
            out.push('{');
            for (at, (name, value)) in members.iter().enumerate() {
                if at > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(name.as_ref())?);
                out.push(':');
                let deeper: Vec<&[Segment]> = pointers
                    .iter()
                    .filter(|rest| rest[0].matches_member(name))
                    .map(|rest| &rest[1..])
                    .collect();
                changed |= rewrite(value, &deeper, out)?;
            }
            out.push('}');
        }
        Some(b'[') => {
            let elements: Vec<&RawValue> = serde_json::from_str(text)?;
            out.push('[');
            for (at, value) in elements.iter().enumerate() {
                if at > 0 {
                    out.push(',');
                }
                let deeper: Vec<&[Segment]> = pointers
                    .iter()
                    .filter(|rest| rest[0].matches_index(at))
                    .map(|rest| &rest[1..])
                    .collect();
                changed |= rewrite(value, &deeper, out)?;
            }
            out.push(']');
        }
        // A scalar the pointer would go below: nothing there to redact.
        _ => out.push_str(text),
    }
    Ok(changed)
}

fn redact_form<'b>(body: &'b [u8], pointers: &[&[Segment]]) -> Result<Cow<'b, [u8]>, Unredactable> {
    let pairs: Vec<(Cow<'_, str>, Cow<'_, str>)> = form_urlencoded::parse(body).collect();
    // GitHub's form deliveries and Slack interactivity: the document is the JSON in the
    // `payload` field (as `hookledger_verify::extract::document_of` reads it), so the pointers
    // apply inside it.
    if let Some(at) = pairs.iter().position(|(name, _)| name == "payload") {
        let inner = pairs[at].1.as_ref();
        if !matches!(inner.trim_start().as_bytes().first(), Some(b'{' | b'[')) {
            return Err(Unredactable::Json);
        }
        let raw: &RawValue = serde_json::from_str(inner).map_err(|_| Unredactable::Json)?;
        let mut redacted = String::with_capacity(inner.len());
        if !rewrite(raw, pointers, &mut redacted).map_err(|_| Unredactable::Json)? {
            return Ok(Cow::Borrowed(body));
        }
        let mut out = form_urlencoded::Serializer::new(String::with_capacity(body.len()));
        for (index, (name, value)) in pairs.iter().enumerate() {
            out.append_pair(name, if index == at { &redacted } else { value });
        }
        return Ok(Cow::Owned(out.finish().into_bytes()));
    }
    let fields: Vec<&Segment> = pointers
        .iter()
        .filter(|rest| rest.len() == 1)
        .map(|rest| &rest[0])
        .collect();
    if !pairs
        .iter()
        .any(|(name, _)| fields.iter().any(|field| field.matches_member(name)))
    {
        return Ok(Cow::Borrowed(body));
    }
    let mut out = form_urlencoded::Serializer::new(String::with_capacity(body.len()));
    for (name, value) in &pairs {
        if fields.iter().any(|field| field.matches_member(name)) {
            out.append_pair(name, REDACTED);
        } else {
            out.append_pair(name, value);
        }
    }
    Ok(Cow::Owned(out.finish().into_bytes()))
}

/// An object's members in their order, values as raw JSON (`serde_json::Map` would sort them).
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(member) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    members.push((member.0 .0, member.1));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(InOrder)
    }
}

/// A member name, borrowed unless it had escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl<'de> Visitor<'de> for Name {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(Name)
    }
}

#[cfg(test)]
mod tests;
