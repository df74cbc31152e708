//! A JSON document checked the way `serde_json::Value` would read it, without building it.
//!
//! Skipping the fields a scheme does not name (`serde::de::IgnoredAny`) checks the syntax only:
//! serde_json skips strings without validating their UTF-8 or their `\u` escapes, and skips
//! nesting without its recursion limit. Such a body (Latin-1 bytes, a lone surrogate `\ud800`,
//! 10,000 nested arrays) would be claimed, yet no handler could read it: handlers and the worker
//! parse the document with serde_json (RFC 8259 section 8.1: JSON text is UTF-8; serde_json's
//! recursion limit is 128 levels). [`WellFormed`] visits every value as `Value` does, so the same
//! documents pass and fail, and allocates nothing.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Deserializes from any JSON document that `serde_json::Value` accepts, and from no other.
pub(crate) struct WellFormed;

impl<'de> Deserialize<'de> for WellFormed {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(WellFormedVisitor)
    }
}

struct WellFormedVisitor;

impl<'de> Visitor<'de> for WellFormedVisitor {
    type Value = WellFormed;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<WellFormed, E> {
        Ok(WellFormed)
    }
    fn visit_i64<E>(self, _: i64) -> Result<WellFormed, E> {
        Ok(WellFormed)
    }
    fn visit_u64<E>(self, _: u64) -> Result<WellFormed, E> {
        Ok(WellFormed)
    }
    fn visit_f64<E>(self, _: f64) -> Result<WellFormed, E> {
        Ok(WellFormed)
    }
    // Reached only once serde_json has decoded the string: valid UTF-8, escapes paired.
    fn visit_str<E>(self, _: &str) -> Result<WellFormed, E> {
        Ok(WellFormed)
    }
    fn visit_unit<E>(self) -> Result<WellFormed, E> {
        Ok(WellFormed)
    }
    fn visit_none<E>(self) -> Result<WellFormed, E> {
        Ok(WellFormed)
    }
    // serde_json counts each array and object against its recursion limit.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<WellFormed, A::Error> {
        while seq.next_element::<WellFormed>()?.is_some() {}
        Ok(WellFormed)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WellFormed, A::Error> {
        while map.next_entry::<WellFormed, WellFormed>()?.is_some() {}
        Ok(WellFormed)
    }
}
