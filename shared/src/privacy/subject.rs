//! The data subject of an event, for erasure by subject (`hookledger forget --subject`): a
//! source's `subject` names where in a payload the subject's identifier is (a Stripe customer
//! id, an e-mail address), and the claim stores a keyed hash of it in
//! `webhook_event.subject_hash`, so that erasing one subject's events is an index lookup and
//! the identifier itself is never stored beside the key.
//!
//! Hash: HMAC-SHA256 under the source's subject key, of the value's text (a JSON string's
//! characters, unescaped; a number as written). Without the key, the hash does not tell who
//! the subject is; with it, `forget` computes the same hash from the identifier an erasure
//! request names.

use hmac::{KeyInit, Mac};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The shortest subject key accepted, in bytes.
pub const MIN_KEY_LEN: usize = 16;

/// A source's `subject`, as written in the sources JSON:
/// `{"pointers": ["/data/object/customer"], "key": "a long random secret"}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubjectSpec {
    /// RFC 6901 pointers tried in order; the first that reaches a string or a number names
    /// the subject. An event where none does has no subject (and is erased by event id only).
    pub pointers: Vec<String>,
    /// The HMAC key, at least [`MIN_KEY_LEN`] bytes. Keep it with the signing secrets: a
    /// changed key makes earlier events unreachable by subject.
    pub key: String,
}

/// A checked [`SubjectSpec`].
pub struct Subject {
    pointers: Vec<String>,
    key: SecretString,
}

impl std::fmt::Debug for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subject")
            .field("pointers", &self.pointers)
            .field("key", &"[redacted]")
            .finish()
    }
}

/// A `subject` that cannot be used: refused at start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubjectError {
    /// No pointer.
    #[error("subject.pointers is empty")]
    NoPointer,
    /// A pointer that does not start with `/`.
    #[error("subject pointer {0:?} must start with '/' (RFC 6901)")]
    NotAPointer(String),
    /// A key shorter than [`MIN_KEY_LEN`].
    #[error("subject.key must be at least {MIN_KEY_LEN} bytes")]
    ShortKey,
}

/// The length of a subject hash, bytes.
pub const HASH_LEN: usize = 32;

impl Subject {
    /// Checks a [`SubjectSpec`].
    ///
    /// # Errors
    /// [`SubjectError`] for no pointer, a pointer without its leading `/`, or a short key.
    pub fn new(spec: SubjectSpec) -> Result<Self, SubjectError> {
        if spec.pointers.is_empty() {
            return Err(SubjectError::NoPointer);
        }
        if let Some(bad) = spec.pointers.iter().find(|p| !p.starts_with('/')) {
            return Err(SubjectError::NotAPointer(bad.clone()));
        }
        if spec.key.len() < MIN_KEY_LEN {
            return Err(SubjectError::ShortKey);
        }
        Ok(Self {
            pointers: spec.pointers,
            key: SecretString::from(spec.key),
        })
    }

    /// The subject hash of a document (the JSON the handlers read): the hash of the first
    /// pointer's string (its characters, escapes resolved) or number (as written: `123`, never
    /// re-rendered, so two long ids never share a hash), or `None` when the document is not
    /// JSON or no pointer reaches one.
    pub fn of_payload(&self, document: &[u8]) -> Option<[u8; HASH_LEN]> {
        let text = std::str::from_utf8(document).ok()?;
        let root: &RawValue = serde_json::from_str(text).ok()?;
        self.pointers
            .iter()
            .find_map(|pointer| identifier_at(root, pointer))
            .map(|identifier| self.hash(&identifier))
    }

    /// The subject hash of an identifier as an erasure request names it (`cus_123`).
    pub fn hash(&self, identifier: &str) -> [u8; HASH_LEN] {
        let Ok(mut mac) =
            hmac::Hmac::<sha2::Sha256>::new_from_slice(self.key.expose_secret().as_bytes())
        else {
            // HMAC takes a key of any length; unreachable.
            return [0; HASH_LEN];
        };
        mac.update(identifier.as_bytes());
        mac.finalize().into_bytes().into()
    }
}

/// The identifier `pointer` (RFC 6901) reaches in `root`: a string's characters or a number's
/// text as written; `None` for anything else or nothing there. Objects with a member twice
/// take the last, as the handlers' parser does.
fn identifier_at(root: &RawValue, pointer: &str) -> Option<String> {
    let mut at = root;
    for segment in pointer.strip_prefix('/')?.split('/') {
        let name = segment.replace("~1", "/").replace("~0", "~");
        at = match at.get().as_bytes().first()? {
            b'{' => {
                let members: std::collections::HashMap<String, &RawValue> =
                    serde_json::from_str(at.get()).ok()?;
                *members.get(&name)?
            }
            b'[' => {
                let elements: Vec<&RawValue> = serde_json::from_str(at.get()).ok()?;
                let index: usize = name.parse().ok()?;
                *elements.get(index)?
            }
            _ => return None,
        };
    }
    match at.get().as_bytes().first()? {
        b'"' => serde_json::from_str::<String>(at.get()).ok(),
        b'-' | b'0'..=b'9' => Some(at.get().to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject() -> Subject {
        Subject::new(SubjectSpec {
            pointers: vec!["/data/object/customer".into(), "/data/object/id".into()],
            key: "0123456789abcdef-subject-key".into(),
        })
        .expect("valid")
    }

    #[test]
    fn the_first_pointer_that_holds_a_value_names_the_subject() {
        let s = subject();
        let charge = br#"{"data": {"object": {"id": "ch_1", "customer": "cus_9"}}}"#;
        let customer = br#"{"data": {"object": {"id": "cus_9"}}}"#;
        assert_eq!(s.of_payload(charge), Some(s.hash("cus_9")));
        assert_eq!(s.of_payload(customer), Some(s.hash("cus_9")));
        assert_ne!(s.hash("cus_9"), s.hash("cus_8"));
    }

    #[test]
    fn no_value_or_no_json_is_no_subject() {
        let s = subject();
        assert_eq!(
            s.of_payload(br#"{"data": {"object": {"customer": null}}}"#),
            None
        );
        assert_eq!(s.of_payload(b"From=x"), None);
        assert_eq!(
            s.of_payload(br#"{"data": {"object": {"customer": 42}}}"#),
            Some(s.hash("42"))
        );
        // A long number as written, not as a float would render it.
        let long = br#"{"data": {"object": {"customer": 12345678901234567890123}}}"#;
        assert_eq!(s.of_payload(long), Some(s.hash("12345678901234567890123")));
        let next = br#"{"data": {"object": {"customer": 12345678901234567890124}}}"#;
        assert_ne!(s.of_payload(long), s.of_payload(next));
        // Escapes resolved.
        assert_eq!(
            s.of_payload(br#"{"data": {"object": {"customer": "cus_\u0039"}}}"#),
            Some(s.hash("cus_9"))
        );
    }

    #[test]
    fn another_key_gives_another_hash_and_the_key_is_never_printed() {
        let other = Subject::new(SubjectSpec {
            pointers: vec!["/a".into()],
            key: "another-key-of-16-bytes".into(),
        })
        .expect("valid");
        assert_ne!(other.hash("cus_9"), subject().hash("cus_9"));
        assert!(!format!("{other:?}").contains("another-key"));
    }

    #[test]
    fn bad_specs_are_refused() {
        let spec = |pointers: Vec<&str>, key: &str| SubjectSpec {
            pointers: pointers.into_iter().map(Into::into).collect(),
            key: key.into(),
        };
        assert_eq!(
            Subject::new(spec(vec![], "0123456789abcdef")).err(),
            Some(SubjectError::NoPointer)
        );
        assert_eq!(
            Subject::new(spec(vec!["customer"], "0123456789abcdef")).err(),
            Some(SubjectError::NotAPointer("customer".into()))
        );
        assert_eq!(
            Subject::new(spec(vec!["/a"], "short")).err(),
            Some(SubjectError::ShortKey)
        );
    }
}
