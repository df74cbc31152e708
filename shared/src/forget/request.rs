//! An erasure as it is asked for: which events ([`Target`]), who asks and why ([`Erasure`]),
//! the request of the replay function, the CLI and the console ([`ForgetRequest`]) and its
//! validation, and why one is refused ([`ForgetError`]).

use serde::{Deserialize, Serialize};

use crate::config::Sources;
use crate::ledger::LedgerError;
use crate::privacy::subject::HASH_LEN;

/// The longest [`Erasure`] `by`, in bytes.
pub const MAX_BY_LEN: usize = 200;

/// The longest [`Erasure`] `reason`, in bytes.
pub const MAX_REASON_LEN: usize = 1_000;

/// Which events to erase.
#[derive(Clone, PartialEq, Eq)]
pub enum Target {
    /// One event, by its ledger key.
    Event {
        /// The source.
        source: String,
        /// The provider's event id.
        event_id: String,
    },
    /// Every event of one data subject: those whose `subject_hash` is `hash`, the source's
    /// keyed hash of the subject's identifier (`crate::privacy::subject::Subject::hash`).
    Subject {
        /// The source.
        source: String,
        /// The keyed hash.
        hash: [u8; HASH_LEN],
    },
}

impl Target {
    /// The source.
    pub fn source(&self) -> &str {
        match self {
            Target::Event { source, .. } | Target::Subject { source, .. } => source,
        }
    }

    /// `event` or `subject`, for reports and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Event { .. } => "event",
            Target::Subject { .. } => "subject",
        }
    }
}

impl std::fmt::Debug for Target {
    /// The hash is not printed: with the source's key it tells who the subject is.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Event { source, event_id } => f
                .debug_struct("Event")
                .field("source", source)
                .field("event_id", event_id)
                .finish(),
            Target::Subject { source, .. } => f
                .debug_struct("Subject")
                .field("source", source)
                .field("hash", &"[redacted]")
                .finish(),
        }
    }
}

/// Who asked for an erasure, and why: recorded in each erased row's `history`. Never the
/// subject's identifier (the history would keep it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Erasure {
    by: String,
    reason: Option<String>,
}

impl Erasure {
    /// `by` (an operator's name, a ticket: trimmed, 1 to [`MAX_BY_LEN`] bytes) and `reason`
    /// (trimmed, at most [`MAX_REASON_LEN`] bytes; empty is none).
    ///
    /// # Errors
    /// [`ForgetError::Invalid`] for an empty or long `by`, a long `reason`, or a NUL in either
    /// (PostgreSQL's text cannot hold it).
    pub fn new(by: &str, reason: Option<&str>) -> Result<Self, ForgetError> {
        let invalid = |why: &str| Err(ForgetError::Invalid(why.to_owned()));
        let by = by.trim();
        let reason = reason.map(str::trim).filter(|r| !r.is_empty());
        if by.is_empty() {
            return invalid("by is empty: name who asks for the erasure (an operator, a ticket)");
        }
        if by.len() > MAX_BY_LEN {
            return invalid(&format!("by is longer than {MAX_BY_LEN} bytes"));
        }
        if reason.is_some_and(|r| r.len() > MAX_REASON_LEN) {
            return invalid(&format!("reason is longer than {MAX_REASON_LEN} bytes"));
        }
        if by.contains('\0') || reason.is_some_and(|r| r.contains('\0')) {
            return invalid("by or reason contains a NUL character");
        }
        Ok(Self {
            by: by.to_owned(),
            reason: reason.map(str::to_owned),
        })
    }

    /// Who asked.
    pub fn by(&self) -> &str {
        &self.by
    }

    /// Why, if said.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
}

/// An erasure as the replay function's `forget` input, the CLI's flags and the console's form
/// give it: `{"source", "event_id" | "subject", "by", "reason"?, "dry_run"?}`. `subject` is
/// the data subject's identifier as the payloads name it (a Stripe customer id): hashed with
/// the source's subject key, never stored or printed.
#[derive(Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ForgetRequest {
    /// The source.
    pub source: String,
    /// One event, by id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// Every event of the subject with this identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Who asks (see [`Erasure`]).
    pub by: String,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Count what would be erased, write nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

impl std::fmt::Debug for ForgetRequest {
    /// The subject's identifier is personal data: not printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForgetRequest")
            .field("source", &self.source)
            .field("event_id", &self.event_id)
            .field("subject", &self.subject.as_ref().map(|_| "[redacted]"))
            .field("by", &self.by)
            .field("reason", &self.reason)
            .field("dry_run", &self.dry_run)
            .finish()
    }
}

impl ForgetRequest {
    /// The target and erasure it names, the subject hashed with `sources`' subject key of its
    /// source. An event id needs no configured source: a source removed from the
    /// configuration keeps its events until they expire, and they can still be forgotten.
    ///
    /// # Errors
    /// [`ForgetError::UnknownSource`] for `subject` on a source not configured;
    /// [`ForgetError::NoSubject`] for `subject` on a source without one configured; [`ForgetError::Invalid`] for both or neither of `event_id` and
    /// `subject`, an empty or too long one, or a bad `by` or `reason` ([`Erasure::new`]).
    pub fn target(&self, sources: &Sources) -> Result<(Target, Erasure), ForgetError> {
        let invalid = |why: &str| Err(ForgetError::Invalid(why.to_owned()));
        let erasure = Erasure::new(&self.by, self.reason.as_deref())?;
        let target = match (&self.event_id, &self.subject) {
            (Some(_), Some(_)) => return invalid("give event_id or subject, not both"),
            (None, None) => return invalid("give event_id (one event) or subject (its events)"),
            (Some(id), None) => {
                if id.is_empty() || id.len() > 255 || id.contains('\0') {
                    return invalid("event_id is empty, longer than 255 bytes or holds a NUL");
                }
                Target::Event {
                    source: self.source.clone(),
                    event_id: id.clone(),
                }
            }
            (None, Some(identifier)) => {
                if identifier.is_empty() {
                    return invalid("subject is empty");
                }
                // The key is the source's: without its configuration, no subject can be found.
                let Some(config) = sources.get(&self.source) else {
                    return Err(ForgetError::UnknownSource(self.source.clone()));
                };
                let Some(subject) = &config.subject else {
                    return Err(ForgetError::NoSubject(self.source.clone()));
                };
                Target::Subject {
                    source: self.source.clone(),
                    hash: subject.hash(identifier),
                }
            }
        };
        Ok((target, erasure))
    }
}

/// Why an erasure was refused or stopped. A refusal (`Invalid`, `UnknownSource`, `NoSubject`)
/// is fatal to the request: fix it and ask again. A database failure is retryable: the same
/// request again continues (what was erased stays erased, nothing is erased twice).
#[derive(Debug, thiserror::Error)]
pub enum ForgetError {
    /// The request is malformed (the message says what to change).
    #[error("{0}")]
    Invalid(String),
    /// Erasure by subject on a source that is not configured (its subject key is unknown).
    #[error("source {0:?} is not configured: its subjects cannot be looked up")]
    UnknownSource(String),
    /// Erasure by subject on a source without `subject` in its configuration.
    #[error(
        "source {0:?} has no \"subject\" configured: its events can be forgotten by event id only"
    )]
    NoSubject(String),
    /// No database connection.
    #[error("no database connection")]
    Pool(#[from] crate::db::NoConnection),
    /// A ledger statement failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources() -> Sources {
        Sources::from_json(
            r#"[{"name": "with", "scheme": "stripe", "secrets": ["whsec_a"],
                 "subject": {"pointers": ["/data/object/customer"],
                             "key": "a-subject-key-of-some-length"}},
                {"name": "without", "scheme": "stripe", "secrets": ["whsec_b"]}]"#,
        )
        .expect("valid sources")
    }

    fn request(source: &str, event_id: Option<&str>, subject: Option<&str>) -> ForgetRequest {
        ForgetRequest {
            source: source.into(),
            event_id: event_id.map(Into::into),
            subject: subject.map(Into::into),
            by: "ops: ticket 42".into(),
            reason: Some("  gdpr art. 17 ".into()),
            dry_run: false,
        }
    }

    #[test]
    fn a_subject_is_hashed_with_its_sources_key_and_never_printed() {
        let sources = sources();
        let (target, erasure) = request("with", None, Some("cus_9"))
            .target(&sources)
            .expect("valid");
        let expected = sources
            .get("with")
            .and_then(|c| c.subject.as_ref())
            .map(|s| s.hash("cus_9"))
            .expect("a subject");
        assert_eq!(
            target,
            Target::Subject {
                source: "with".into(),
                hash: expected
            }
        );
        assert_eq!(erasure.reason(), Some("gdpr art. 17"));
        let printed = format!("{target:?} {:?}", request("with", None, Some("cus_9")));
        assert!(!printed.contains("cus_9"), "{printed}");
        assert!(!printed.contains(&format!("{:?}", expected)), "{printed}");
    }

    #[test]
    fn bad_requests_are_refused_by_name() {
        let sources = sources();
        let refused = |r: ForgetRequest| r.target(&sources).unwrap_err().to_string();
        assert!(refused(request("without", None, Some("cus_9"))).contains("no \"subject\""));
        assert!(refused(request("nowhere", None, Some("cus_9"))).contains("not configured"));
        assert!(refused(request("with", Some("evt_1"), Some("cus_9"))).contains("not both"));
        assert!(refused(request("with", None, None)).contains("give event_id"));
        assert!(refused(request("with", Some(""), None)).contains("event_id is empty"));
        let mut nobody = request("with", Some("evt_1"), None);
        nobody.by = "   ".into();
        assert!(refused(nobody).contains("by is empty"));
        let mut long = request("with", Some("evt_1"), None);
        long.reason = Some("x".repeat(MAX_REASON_LEN + 1));
        assert!(refused(long).contains("reason is longer"));
        // By event id, a source without a subject, or no longer configured, is fine.
        for source in ["without", "nowhere"] {
            assert!(request(source, Some("evt_1"), None)
                .target(&sources)
                .is_ok());
        }
    }

    #[test]
    fn the_request_reads_the_replay_functions_input_and_refuses_unknown_fields() {
        let parsed: ForgetRequest = serde_json::from_str(
            r#"{"source": "with", "subject": "cus_9", "by": "ops", "dry_run": true}"#,
        )
        .expect("parses");
        assert!(parsed.dry_run && parsed.reason.is_none());
        let unknown =
            serde_json::from_str::<ForgetRequest>(r#"{"source": "with", "by": "o", "who": 1}"#);
        assert!(unknown.unwrap_err().to_string().contains("who"));
    }
}
