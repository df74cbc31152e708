//! The generic scheme's configuration: [`GenericHmac`] as a source configures it, the digest
//! [`Encoding`], the validation run once at start-up, and the [`Prepared`] form a
//! [`crate::Verifier`] holds.

use http::HeaderName;

use super::template::{parse_template, Segment, DEFAULT_SIGNED_PAYLOAD};
pub use crate::key::Algorithm;

/// What [`crate::Scheme::signature_header`] returns for [`crate::Scheme::GenericHmac`]: a
/// placeholder for logs, deliberately not a valid header name.
pub const CONFIGURED_HEADER: &str = "(configured per source)";

/// How a generic source writes the digest in its header. Configuration names: `"hex"` (the
/// default), `"base64"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// Hex digits, lowercase or uppercase (the digest is the same; providers differ), exactly
    /// twice the digest length. We sign lowercase.
    #[default]
    Hex,
    /// Standard base64 (`+/` alphabet), with or without `=` padding. We sign padded. The
    /// URL-safe alphabet (`-_`) is not accepted.
    Base64,
}

/// A generic source's signing rules and event-id location, as configured (JSON, field names as
/// below; unknown fields are refused).
///
/// Example: `{"signature_header": "X-Signature", "prefix": "sha256=", "event_id_pointer":
/// "/id"}` verifies `X-Signature: sha256=<hex of HMAC-SHA256(secret, body)>`.
///
/// Build a [`crate::Verifier`] with it ([`crate::Verifier::new`] runs [`GenericHmac::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenericHmac {
    /// Name of the header that carries the signature, e.g. `"X-Signature"` (any case; looked up
    /// case-insensitively).
    pub signature_header: String,
    /// HMAC hash function; `sha256` when absent.
    #[serde(default)]
    pub algorithm: Algorithm,
    /// How the digest is written; `hex` when absent.
    #[serde(default)]
    pub encoding: Encoding,
    /// Text that precedes the digest in the header value and is stripped before decoding, e.g.
    /// `"sha256="` (case-sensitive). When set, a value without it is
    /// [`crate::VerifyError::MalformedHeader`]. Non-empty visible ASCII (spaces allowed).
    #[serde(default)]
    pub prefix: Option<String>,
    /// Name of a header that carries the signing time in unix seconds (ASCII digits). When set,
    /// the header is required, must be signed through `{timestamp}` in `signed_payload`, and is
    /// checked against the tolerance in both directions before any HMAC.
    #[serde(default)]
    pub timestamp_header: Option<String>,
    /// What is signed: a template where `{body}` stands for the raw body bytes (exactly once)
    /// and `{timestamp}` for the timestamp header's value as received (at most once, only with
    /// `timestamp_header`); everything else is literal text. No other `{` or `}` is allowed.
    /// [`DEFAULT_SIGNED_PAYLOAD`] (`"{body}"`) when absent. Example: `"{timestamp}.{body}"`.
    #[serde(default)]
    pub signed_payload: Option<String>,
    /// Header that carries the event id (for the extraction module). Exactly one of this and
    /// `event_id_pointer` is set.
    #[serde(default)]
    pub event_id_header: Option<String>,
    /// RFC 6901 JSON pointer to the event id in the body, e.g. `"/id"` or `"/data/id"` (for the
    /// extraction module). Exactly one of this and `event_id_header` is set.
    #[serde(default)]
    pub event_id_pointer: Option<String>,
    /// Header that carries the event type. At most one of this and `event_type_pointer`.
    #[serde(default)]
    pub event_type_header: Option<String>,
    /// RFC 6901 JSON pointer to the event type in the body, e.g. `"/type"`. At most one of this
    /// and `event_type_header`.
    #[serde(default)]
    pub event_type_pointer: Option<String>,
}

impl GenericHmac {
    /// Check the configuration as a whole, once, at start-up.
    ///
    /// Rules: every header name parses as an HTTP header name ([`http::HeaderName`]);
    /// `timestamp_header` differs from `signature_header`; `prefix`, if set, is non-empty
    /// visible ASCII; `signed_payload` uses only `{body}` (exactly once) and `{timestamp}` (at
    /// most once), with no stray `{` or `}`; `{timestamp}` is used if and only if
    /// `timestamp_header` is set (an unsigned timestamp would give no replay protection);
    /// exactly one of `event_id_header` / `event_id_pointer`; at most one of
    /// `event_type_header` / `event_type_pointer`; pointers start with `/` and escape `~` only
    /// as `~0` or `~1` (RFC 6901); `event_id_header` and `event_type_header` only with a
    /// signed timestamp (a header is never signed, so without one a captured body could be
    /// sent again under a fresh id or type for ever: docs/guide/providers.md, "What the signature covers").
    ///
    /// # Errors
    ///
    /// The first rule broken, as a sentence naming the field (configuration values may be
    /// quoted; there is no secret in this struct).
    pub fn validate(&self) -> Result<(), String> {
        self.parse().map(|_| ())
    }

    /// Whether the event id and the event type this source reads are covered by its
    /// signature: `false` when either comes from a header (`event_id_header`,
    /// `event_type_header`), which the signed content never includes.
    #[must_use]
    pub fn signs_id_and_type(&self) -> bool {
        self.event_id_header.is_none() && self.event_type_header.is_none()
    }

    /// [`GenericHmac::validate`], keeping what was parsed.
    fn parse(&self) -> Result<Parsed, String> {
        let signature_header = header_name("signature_header", &self.signature_header)?;
        let timestamp_header = self
            .timestamp_header
            .as_deref()
            .map(|name| header_name("timestamp_header", name))
            .transpose()?;
        if timestamp_header.as_ref() == Some(&signature_header) {
            return Err("timestamp_header must differ from signature_header".to_owned());
        }
        if let Some(prefix) = &self.prefix {
            if prefix.is_empty() {
                return Err("prefix must not be empty (omit it instead)".to_owned());
            }
            if !prefix.bytes().all(|b| matches!(b, b' '..=b'~')) {
                return Err(format!(
                    "prefix {prefix:?} must be visible ASCII, as header values are"
                ));
            }
        }
        let template = parse_template(
            self.signed_payload
                .as_deref()
                .unwrap_or(DEFAULT_SIGNED_PAYLOAD),
        )?;
        let signs_timestamp = template.contains(&Segment::Timestamp);
        match (signs_timestamp, timestamp_header.is_some()) {
            (true, false) => {
                return Err(
                    "signed_payload uses {timestamp} but no timestamp_header is set".to_owned(),
                )
            }
            (false, true) => {
                return Err("timestamp_header is set but signed_payload does not use \
                            {timestamp}: an unsigned timestamp gives no replay protection"
                    .to_owned())
            }
            _ => {}
        }
        match (&self.event_id_header, &self.event_id_pointer) {
            (Some(name), None) => {
                header_name("event_id_header", name)?;
            }
            (None, Some(pointer)) => json_pointer("event_id_pointer", pointer)?,
            (Some(_), Some(_)) => {
                return Err(
                    "set only one of event_id_header and event_id_pointer, not both".to_owned(),
                )
            }
            (None, None) => {
                return Err("one of event_id_header or event_id_pointer is required".to_owned())
            }
        }
        match (&self.event_type_header, &self.event_type_pointer) {
            (Some(name), None) => {
                header_name("event_type_header", name)?;
            }
            (None, Some(pointer)) => json_pointer("event_type_pointer", pointer)?,
            (Some(_), Some(_)) => {
                return Err(
                    "set at most one of event_type_header and event_type_pointer".to_owned(),
                )
            }
            (None, None) => {}
        }
        // A header is never part of the signed content (the template signs the body and the
        // timestamp only): an id or type read from one could be changed on a captured delivery
        // and the signature would still hold. The ledger keeps one event per body for such a
        // source (hookledger's replay guard), but only within its retention; without a signed
        // timestamp the same body would be accepted again, under a fresh id, once swept.
        if !signs_timestamp {
            for (field, name) in [
                ("event_id_header", &self.event_id_header),
                ("event_type_header", &self.event_type_header),
            ] {
                if name.is_some() {
                    let pointer = field.replace("_header", "_pointer");
                    return Err(format!(
                        "{field} is not covered by the signature and no timestamp is signed: \
                         anyone who saw one delivery could send its body again under a new \
                         event id or type, forever; read it from the signed body with {pointer}, \
                         or sign a timestamp (timestamp_header and {{timestamp}} in \
                         signed_payload)"
                    ));
                }
            }
        }
        Ok(Parsed {
            signature_header,
            timestamp_header,
            template,
        })
    }
}

/// Parse `value` (configuration field `field`) as an HTTP header name, normalised to lowercase.
///
/// # Errors
///
/// A sentence naming the field if it is empty or has characters a header name cannot have.
fn header_name(field: &str, value: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(value.as_bytes())
        .map_err(|_| format!("{field} {value:?} is not a valid HTTP header name"))
}

/// Check that `pointer` (configuration field `field`) is an RFC 6901 JSON pointer into the body:
/// it starts with `/` (the whole document, `""`, is not an event id) and every `~` is followed
/// by `0` or `1`.
///
/// # Errors
///
/// A sentence naming the field otherwise.
fn json_pointer(field: &str, pointer: &str) -> Result<(), String> {
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

/// What [`GenericHmac::parse`] produces besides the configuration itself.
#[derive(Debug, Clone)]
pub(super) struct Parsed {
    /// `signature_header`, lowercase.
    pub(super) signature_header: HeaderName,
    /// `timestamp_header`, lowercase.
    pub(super) timestamp_header: Option<HeaderName>,
    /// `signed_payload`, split into segments; contains [`Segment::Timestamp`] exactly when
    /// `timestamp_header` is set.
    pub(super) template: Vec<Segment>,
}

/// A validated [`GenericHmac`], ready for every delivery: header names parsed, template split.
/// Built by [`crate::Verifier::new`].
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    /// The configuration as given (validated).
    pub(super) config: GenericHmac,
    /// What was parsed from it.
    pub(super) parsed: Parsed,
}

impl Prepared {
    /// Validate `config` and keep what was parsed.
    ///
    /// # Errors
    ///
    /// As [`GenericHmac::validate`].
    pub(crate) fn new(config: GenericHmac) -> Result<Prepared, String> {
        let parsed = config.parse()?;
        Ok(Prepared { config, parsed })
    }

    /// The configuration as given.
    pub(crate) fn config(&self) -> &GenericHmac {
        &self.config
    }

    /// The configured algorithm, for keying.
    pub(crate) fn algorithm(&self) -> Algorithm {
        self.config.algorithm
    }

    /// Whether a timestamp header is configured (and so signed).
    pub(crate) fn signs_timestamp(&self) -> bool {
        self.parsed.timestamp_header.is_some()
    }

    /// The signature header's name, lowercase.
    pub(crate) fn signature_header(&self) -> &str {
        self.parsed.signature_header.as_str()
    }
}
