//! Whether a JSON document repeats a member name in any object. serde_json keeps the last of
//! repeated members, other parsers the first: a source whose signature covers chosen fields
//! rather than the whole body (Adyen, Mailgun, a `{field:...}` template) must not accept a
//! body where the field we verified and the field a consumer reads can differ.

use std::collections::HashSet;
use std::fmt;

use serde::de::{Deserialize, Deserializer, Error, MapAccess, SeqAccess, Visitor};

/// A JSON value checked for repeated member names, at every depth (serde_json's recursion
/// limit bounds the depth).
struct Unique;

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueVisitor)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Unique;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: Error>(self, _: bool) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_i64<E: Error>(self, _: i64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_u64<E: Error>(self, _: u64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_f64<E: Error>(self, _: f64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_str<E: Error>(self, _: &str) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_unit<E: Error>(self) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
        while seq.next_element::<Unique>()?.is_some() {}
        Ok(Unique)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key) {
                return Err(A::Error::custom("repeated member name"));
            }
            map.next_value::<Unique>()?;
        }
        Ok(Unique)
    }
}

/// Whether `document` is JSON whose objects never repeat a member name.
pub(crate) fn unique_keys(document: &[u8]) -> bool {
    serde_json::from_slice::<Unique>(document).is_ok()
}

#[cfg(test)]
mod tests {
    use super::unique_keys;

    #[test]
    fn a_repeated_member_at_any_depth_is_found() {
        assert!(unique_keys(br#"{"a":1,"b":{"c":[{"d":1},{"d":2}]}}"#));
        assert!(!unique_keys(br#"{"a":1,"a":2}"#));
        assert!(!unique_keys(br#"{"x":[{"amount":1,"amount":2}]}"#));
        assert!(!unique_keys(br#"{"s":"\u0061","\u0073":1}"#));
        assert!(!unique_keys(b"{"));
    }
}
