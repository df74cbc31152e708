//! A configurable HMAC scheme for providers without a dedicated module: the [`GenericHmac`]
//! configuration, its validation, the prepared form a [`super::Verifier`] holds, verify and sign.
//!
//! What can be configured covers the common shapes of HMAC webhooks (GitHub-, Shopify- and
//! Slack-like signatures can all be written as a [`GenericHmac`]):
//!
//! - one signature header, one signature per delivery (no list, no version entries);
//! - HMAC-SHA256 or HMAC-SHA512 ([`Algorithm`]), keyed with the secret's UTF-8 bytes;
//! - the digest in hex or base64 ([`Encoding`]), optionally after a fixed prefix (`sha256=`);
//! - optionally a timestamp header (unix seconds), signed through the `signed_payload`
//!   template and checked against the tolerance in both directions;
//! - where the event id and type are found (carried for the extraction module, validated here).
//!
//! A source with anything else (several signatures, a version list, an asymmetric signature)
//! gets its own module.

use std::borrow::Cow;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, STANDARD};
use base64::engine::{DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine as _;
use http::{HeaderMap, HeaderName};

use crate::header::{check_tolerance, parse_unix_seconds, single_value, Malformed};
pub use crate::key::Algorithm;
use crate::key::{first_matching_key, SigningKey};
use crate::outcome::{Verified, VerifyError};
use crate::tag::{AnyTag, TAG512_LEN, TAG_LEN};

/// What [`super::Scheme::signature_header`] returns for [`super::Scheme::GenericHmac`]: a
/// placeholder for logs, deliberately not a valid header name.
pub const CONFIGURED_HEADER: &str = "(configured per source)";

/// The signed-payload template used when `signed_payload` is absent: the raw body alone.
pub const DEFAULT_SIGNED_PAYLOAD: &str = "{body}";

/// The template placeholder for the raw body bytes (required, exactly once).
pub const BODY_PLACEHOLDER: &str = "{body}";

/// The template placeholder for the timestamp header's value, as received (at most once;
/// requires `timestamp_header`).
pub const TIMESTAMP_PLACEHOLDER: &str = "{timestamp}";

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
/// Build a [`super::Verifier`] with it ([`super::Verifier::new`] runs [`GenericHmac::validate`]).
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
    /// [`VerifyError::MalformedHeader`]. Non-empty visible ASCII (spaces allowed).
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
    /// as `~0` or `~1` (RFC 6901).
    ///
    /// # Errors
    ///
    /// The first rule broken, as a sentence naming the field (configuration values may be
    /// quoted; there is no secret in this struct).
    pub fn validate(&self) -> Result<(), String> {
        self.parse().map(|_| ())
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

/// One piece of a parsed `signed_payload` template, fed to the HMAC in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// Literal text, as UTF-8 bytes.
    Literal(String),
    /// The timestamp header's value, as received.
    Timestamp,
    /// The raw body.
    Body,
}

/// Parse a `signed_payload` template into segments (adjacent literal text merged).
///
/// # Errors
///
/// A sentence if a `{` is not closed, a `}` closes nothing, a placeholder is not `{body}` or
/// `{timestamp}`, `{body}` is absent or repeated, or `{timestamp}` is repeated.
fn parse_template(template: &str) -> Result<Vec<Segment>, String> {
    let mut segments = Vec::new();
    let mut literal = String::new();
    let mut rest = template;
    while let Some(open) = rest.find(['{', '}']) {
        literal.push_str(&rest[..open]);
        let after = &rest[open..];
        if after.starts_with('}') {
            return Err(format!(
                "signed_payload {template:?} has a '}}' that closes no placeholder"
            ));
        }
        let Some(close) = after.find('}') else {
            return Err(format!("signed_payload {template:?} has an unclosed '{{'"));
        };
        let placeholder = &after[..=close];
        let segment = match placeholder {
            BODY_PLACEHOLDER => Segment::Body,
            TIMESTAMP_PLACEHOLDER => Segment::Timestamp,
            _ => {
                return Err(format!(
                    "signed_payload {template:?} has an unknown placeholder {placeholder:?} \
                     (known: {BODY_PLACEHOLDER}, {TIMESTAMP_PLACEHOLDER})"
                ))
            }
        };
        if segments.contains(&segment) {
            return Err(format!(
                "signed_payload {template:?} uses {placeholder} more than once"
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
    if !segments.contains(&Segment::Body) {
        return Err(format!(
            "signed_payload {template:?} must contain {BODY_PLACEHOLDER}"
        ));
    }
    Ok(segments)
}

/// What [`GenericHmac::parse`] produces besides the configuration itself.
#[derive(Debug, Clone)]
struct Parsed {
    /// `signature_header`, lowercase.
    signature_header: HeaderName,
    /// `timestamp_header`, lowercase.
    timestamp_header: Option<HeaderName>,
    /// `signed_payload`, split into segments; contains [`Segment::Timestamp`] exactly when
    /// `timestamp_header` is set.
    template: Vec<Segment>,
}

/// A validated [`GenericHmac`], ready for every delivery: header names parsed, template split.
/// Built by [`super::Verifier::new`].
#[derive(Debug, Clone)]
pub(super) struct Prepared {
    /// The configuration as given (validated).
    config: GenericHmac,
    /// What was parsed from it.
    parsed: Parsed,
}

impl Prepared {
    /// Validate `config` and keep what was parsed.
    ///
    /// # Errors
    ///
    /// As [`GenericHmac::validate`].
    pub(super) fn new(config: GenericHmac) -> Result<Prepared, String> {
        let parsed = config.parse()?;
        Ok(Prepared { config, parsed })
    }

    /// The configuration as given.
    pub(super) fn config(&self) -> &GenericHmac {
        &self.config
    }

    /// The configured algorithm, for keying.
    pub(super) fn algorithm(&self) -> Algorithm {
        self.config.algorithm
    }

    /// Whether a timestamp header is configured (and so signed).
    pub(super) fn signs_timestamp(&self) -> bool {
        self.parsed.timestamp_header.is_some()
    }

    /// The signature header's name, lowercase.
    pub(super) fn signature_header(&self) -> &str {
        self.parsed.signature_header.as_str()
    }
}

/// A parsed generic signature header value: the decoded digest, of the configured algorithm's
/// length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GenericSignature(AnyTag);

/// Base64 engine for generic signatures: standard alphabet, padding optional, canonical
/// trailing bits (a digest has exactly one encoding per padding choice).
const SIGNATURE_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Parse a generic signature header value: strip `prefix` (if configured; case-sensitive), then
/// decode the rest as `encoding` into exactly `algorithm`'s digest length.
///
/// `None` (malformed) if the prefix is absent, or the rest is empty, has whitespace or
/// characters outside the encoding, or is not exactly one digest long (hex: 64 or 128 digits,
/// either case; base64: 43/44 or 86/88 characters).
fn parse_signature(
    value: &str,
    prefix: Option<&str>,
    algorithm: Algorithm,
    encoding: Encoding,
) -> Option<GenericSignature> {
    let digest = match prefix {
        Some(prefix) => value.strip_prefix(prefix)?,
        None => value,
    };
    let len = algorithm.digest_len();
    let mut buf = [0_u8; TAG512_LEN];
    match encoding {
        Encoding::Hex => {
            if digest.len() != 2 * len {
                return None;
            }
            hex::decode_to_slice(digest, &mut buf[..len]).ok()?;
        }
        Encoding::Base64 => {
            if digest.len() > len.div_ceil(3) * 4 {
                return None;
            }
            let decoded = SIGNATURE_BASE64.decode(digest).ok()?;
            if decoded.len() != len {
                return None;
            }
            buf[..len].copy_from_slice(&decoded);
        }
    }
    let tag = match algorithm {
        Algorithm::Sha256 => AnyTag::Sha256(buf[..TAG_LEN].try_into().ok()?),
        Algorithm::Sha512 => AnyTag::Sha512(buf),
    };
    Some(GenericSignature(tag))
}

/// The signed payload as parts fed to the HMAC in order: `template` with `{timestamp}` replaced
/// by `timestamp` and `{body}` by `body`.
fn payload<'a>(template: &'a [Segment], timestamp: &'a str, body: &'a [u8]) -> Vec<&'a [u8]> {
    template
        .iter()
        .map(|segment| match segment {
            Segment::Literal(text) => text.as_bytes(),
            Segment::Timestamp => timestamp.as_bytes(),
            Segment::Body => body,
        })
        .collect()
}

/// The single value of the configured header `name` (see [`super::single_header`]), errors
/// naming it.
fn configured_header<'h>(
    headers: &'h HeaderMap,
    name: &HeaderName,
) -> Result<&'h str, VerifyError> {
    single_value(headers, name)
        .map_err(|Malformed| malformed(name))?
        .ok_or_else(|| VerifyError::MissingHeader(Cow::Owned(name.as_str().to_owned())))
}

/// [`VerifyError::MalformedHeader`] naming the configured header `name`.
fn malformed(name: &HeaderName) -> VerifyError {
    VerifyError::MalformedHeader(Cow::Owned(name.as_str().to_owned()))
}

/// Verify a generic delivery: `body` is the exact raw bytes received; `keys` were prepared for
/// the configured algorithm (by [`super::Verifier::new`]).
///
/// Steps: read the signature header, then the timestamp header if configured (each exactly
/// once); parse the signature (prefix, encoding, length) and the timestamp (unix seconds, ASCII
/// digits); check the timestamp against `now` (unix seconds) within `tolerance_secs` seconds in
/// both directions, before any HMAC; then compare the HMAC of the signed payload (the template
/// with the timestamp as received and the body) of every key with the digest, in constant time.
///
/// # Errors
///
/// - [`VerifyError::NoKeys`]: `keys` is empty;
/// - [`VerifyError::MissingHeader`] with the configured (lowercase) name of the first absent
///   header, signature first;
/// - [`VerifyError::MalformedHeader`] with the header's configured name: repeated, over
///   [`super::MAX_HEADER_LEN`] bytes, not visible ASCII, a signature without the prefix or not
///   one digest in the encoding, a timestamp that is not unix seconds in ASCII digits;
/// - [`VerifyError::TimestampOutsideTolerance`]: `|now - timestamp| > tolerance_secs`;
/// - [`VerifyError::NoSignatureMatched`]: the digest matches no key.
pub(super) fn verify(
    prepared: &Prepared,
    keys: &[SigningKey],
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
    tolerance_secs: u64,
) -> Result<Verified, VerifyError> {
    if keys.is_empty() {
        return Err(VerifyError::NoKeys);
    }
    let config = &prepared.config;
    let parsed = &prepared.parsed;
    let signature = configured_header(headers, &parsed.signature_header)?;
    let timestamp = parsed
        .timestamp_header
        .as_ref()
        .map(|name| configured_header(headers, name).map(|value| (name, value)))
        .transpose()?;
    let GenericSignature(digest) = parse_signature(
        signature,
        config.prefix.as_deref(),
        config.algorithm,
        config.encoding,
    )
    .ok_or_else(|| malformed(&parsed.signature_header))?;
    let timestamp = match timestamp {
        Some((name, text)) => {
            let seconds = parse_unix_seconds(text).ok_or_else(|| malformed(name))?;
            check_tolerance(seconds, now, tolerance_secs)?;
            text
        }
        None => "",
    };
    first_matching_key(keys, &payload(&parsed.template, timestamp, body), &[digest])
}

/// Sign `body` as a provider configured so would, at `timestamp` (unix seconds, non-negative to
/// verify; ignored without a timestamp header).
///
/// Returns the timestamp header (if configured) then the signature header (prefix, then the
/// digest: lowercase hex or padded base64), as `(lowercase name, value)` pairs.
pub(super) fn sign(
    prepared: &Prepared,
    key: &SigningKey,
    timestamp: i64,
    body: &[u8],
) -> Vec<(String, String)> {
    let config = &prepared.config;
    let parsed = &prepared.parsed;
    let t = timestamp.to_string();
    let tag = key.tag(&payload(&parsed.template, &t, body));
    let digest = match config.encoding {
        Encoding::Hex => hex::encode(tag),
        Encoding::Base64 => STANDARD.encode(tag),
    };
    let mut headers = Vec::with_capacity(2);
    if let Some(name) = &parsed.timestamp_header {
        headers.push((name.as_str().to_owned(), t));
    }
    headers.push((
        parsed.signature_header.as_str().to_owned(),
        format!("{}{digest}", config.prefix.as_deref().unwrap_or_default()),
    ));
    headers
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{header_map, owned_map};
    use super::super::{KeyError, Scheme, Verifier, VerifierError, MAX_HEADER_LEN};
    use super::*;
    use proptest::prelude::*;

    const SECRET: &str = "It's a Secret to Everybody";
    const BODY: &[u8] = b"Hello, World!";
    // HMAC of BODY under SECRET: the GitHub docs vector (SHA-256), derived with Python's hmac
    // for SHA-512.
    const SHA256_HEX: &str = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    const SHA256_BASE64: &str = "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc=";
    const SHA512_HEX: &str = "11ed355a617e98134e842012a7944ccf59c10256cb182357bd7e3a42013ff07c\
                              376f8c14cf5cc1923da20b51d64256b2fb8ebbf100aa67a61326f61fea8111bc";
    const SHA512_BASE64: &str = "Ee01WmF+mBNOhCASp5RMz1nBAlbLGCNXvX46QgE/8Hw3b4wUz1zBkj2iC1HWQlay\
                                 +4678QCqZ6YTJvYf6oERvA==";

    // `{timestamp}.{body}` at T under TS_SECRET, derived with Python's hmac.
    const TS_SECRET: &str = "generic secret";
    const T: i64 = 1_700_000_000;
    const TS_BODY: &[u8] = br#"{"id":"evt_1"}"#;
    const TS_SHA512_BASE64: &str =
        "M0bmHx8nf8LrOdqF4kpe3jh2agvJG1Er67Q82j3xyJZ8TaSI/00O1LWycZdsN9AEm\
                                    poMa+VyuM8BoJkzwqpN6w==";
    const TS_SHA256_HEX: &str = "8fe597c672bab8dd6b61fb348491c5929858b0c027230332c4a8b46a85b6815b";

    /// The smallest valid configuration: `X-Signature` with hex HMAC-SHA256 of the body.
    fn minimal() -> GenericHmac {
        GenericHmac {
            signature_header: "X-Signature".to_owned(),
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
            prefix: None,
            timestamp_header: None,
            signed_payload: None,
            event_id_header: None,
            event_id_pointer: Some("/id".to_owned()),
            event_type_header: None,
            event_type_pointer: None,
        }
    }

    /// `X-Timestamp` signed as `{timestamp}.{body}`, base64 HMAC-SHA512 after `v1=`.
    fn timestamped() -> GenericHmac {
        GenericHmac {
            algorithm: Algorithm::Sha512,
            encoding: Encoding::Base64,
            prefix: Some("v1=".to_owned()),
            timestamp_header: Some("X-Timestamp".to_owned()),
            signed_payload: Some("{timestamp}.{body}".to_owned()),
            ..minimal()
        }
    }

    fn verifier(config: GenericHmac, secrets: &[&str]) -> Verifier {
        Verifier::new(Scheme::GenericHmac, secrets, 300, Some(config)).unwrap()
    }

    fn with(algorithm: Algorithm, encoding: Encoding) -> GenericHmac {
        GenericHmac {
            algorithm,
            encoding,
            ..minimal()
        }
    }

    fn timestamped_headers(t: &str, signature: &str) -> HeaderMap {
        header_map(&[("x-timestamp", t), ("x-signature", signature)])
    }

    fn check_timestamped(
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<Verified, VerifyError> {
        verifier(timestamped(), &[TS_SECRET]).verify(headers, body, now)
    }

    fn vector() -> HeaderMap {
        timestamped_headers("1700000000", &format!("v1={TS_SHA512_BASE64}"))
    }

    fn malformed_sig() -> Result<Verified, VerifyError> {
        Err(VerifyError::MalformedHeader("x-signature".into()))
    }

    const COMBINATIONS: [(Algorithm, Encoding, &str); 4] = [
        (Algorithm::Sha256, Encoding::Hex, SHA256_HEX),
        (Algorithm::Sha256, Encoding::Base64, SHA256_BASE64),
        (Algorithm::Sha512, Encoding::Hex, SHA512_HEX),
        (Algorithm::Sha512, Encoding::Base64, SHA512_BASE64),
    ];

    // Configuration.

    #[test]
    fn a_minimal_json_configuration_takes_the_defaults() {
        let config: GenericHmac =
            serde_json::from_str(r#"{"signature_header":"X-Signature","event_id_pointer":"/id"}"#)
                .unwrap();
        assert_eq!(config, minimal());
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn a_full_json_configuration_parses() {
        let config: GenericHmac = serde_json::from_str(
            r#"{
                "signature_header": "X-Signature",
                "algorithm": "sha512",
                "encoding": "base64",
                "prefix": "v1=",
                "timestamp_header": "X-Timestamp",
                "signed_payload": "{timestamp}.{body}",
                "event_id_pointer": "/id",
                "event_type_header": "X-Event-Type"
            }"#,
        )
        .unwrap();
        assert_eq!(
            config,
            GenericHmac {
                event_type_header: Some("X-Event-Type".to_owned()),
                ..timestamped()
            }
        );
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn unknown_fields_algorithms_and_encodings_do_not_parse() {
        for json in [
            r#"{"signature_header":"X-S","event_id_pointer":"/id","secret":"x"}"#,
            r#"{"signature_header":"X-S","event_id_pointer":"/id","algorithm":"sha1"}"#,
            r#"{"signature_header":"X-S","event_id_pointer":"/id","algorithm":"SHA256"}"#,
            r#"{"signature_header":"X-S","event_id_pointer":"/id","encoding":"base64url"}"#,
            r#"{"event_id_pointer":"/id"}"#,
        ] {
            assert!(serde_json::from_str::<GenericHmac>(json).is_err(), "{json}");
        }
    }

    #[test]
    fn algorithm_and_encoding_names_are_lowercase() {
        for (value, name) in [
            (serde_json::to_string(&Algorithm::Sha256), "\"sha256\""),
            (serde_json::to_string(&Algorithm::Sha512), "\"sha512\""),
            (serde_json::to_string(&Encoding::Hex), "\"hex\""),
            (serde_json::to_string(&Encoding::Base64), "\"base64\""),
        ] {
            assert_eq!(value.unwrap(), name);
        }
    }

    /// Assert that `config` is invalid with a message containing `needle`.
    fn assert_invalid(config: &GenericHmac, needle: &str) {
        let error = config.validate().unwrap_err();
        assert!(
            error.contains(needle),
            "{error:?} should mention {needle:?}"
        );
    }

    #[test]
    fn header_names_must_be_valid() {
        for bad in ["", "X Signature", "X-Signature:", "X-Sïgnature", "X-Sig\n"] {
            assert_invalid(
                &GenericHmac {
                    signature_header: bad.to_owned(),
                    ..minimal()
                },
                "signature_header",
            );
            assert_invalid(
                &GenericHmac {
                    timestamp_header: Some(bad.to_owned()),
                    signed_payload: Some("{timestamp}.{body}".to_owned()),
                    ..minimal()
                },
                "timestamp_header",
            );
            assert_invalid(
                &GenericHmac {
                    event_id_header: Some(bad.to_owned()),
                    event_id_pointer: None,
                    ..minimal()
                },
                "event_id_header",
            );
            assert_invalid(
                &GenericHmac {
                    event_type_header: Some(bad.to_owned()),
                    ..minimal()
                },
                "event_type_header",
            );
        }
    }

    #[test]
    fn the_timestamp_header_must_differ_from_the_signature_header() {
        assert_invalid(
            &GenericHmac {
                timestamp_header: Some("x-SIGNATURE".to_owned()),
                signed_payload: Some("{timestamp}.{body}".to_owned()),
                ..minimal()
            },
            "differ",
        );
    }

    #[test]
    fn a_prefix_must_be_non_empty_visible_ascii() {
        for bad in ["", "sha256=\n", "é=", "\t"] {
            assert_invalid(
                &GenericHmac {
                    prefix: Some(bad.to_owned()),
                    ..minimal()
                },
                "prefix",
            );
        }
        for good in ["sha256=", "v1,", "Bearer "] {
            let config = GenericHmac {
                prefix: Some(good.to_owned()),
                ..minimal()
            };
            assert_eq!(config.validate(), Ok(()), "{good:?}");
        }
    }

    #[test]
    fn exactly_one_event_id_location_is_required() {
        assert_invalid(
            &GenericHmac {
                event_id_pointer: None,
                ..minimal()
            },
            "required",
        );
        assert_invalid(
            &GenericHmac {
                event_id_header: Some("X-Event-Id".to_owned()),
                ..minimal()
            },
            "not both",
        );
        let by_header = GenericHmac {
            event_id_header: Some("X-Event-Id".to_owned()),
            event_id_pointer: None,
            ..minimal()
        };
        assert_eq!(by_header.validate(), Ok(()));
    }

    #[test]
    fn at_most_one_event_type_location_is_allowed() {
        assert_invalid(
            &GenericHmac {
                event_type_header: Some("X-Event-Type".to_owned()),
                event_type_pointer: Some("/type".to_owned()),
                ..minimal()
            },
            "at most one",
        );
        for config in [
            GenericHmac {
                event_type_header: Some("X-Event-Type".to_owned()),
                ..minimal()
            },
            GenericHmac {
                event_type_pointer: Some("/type".to_owned()),
                ..minimal()
            },
        ] {
            assert_eq!(config.validate(), Ok(()));
        }
    }

    #[test]
    fn pointers_must_be_rfc_6901_pointers_into_the_body() {
        for bad in ["", "id", "#/id", "/a~2b", "/a~", "/~/x"] {
            assert_invalid(
                &GenericHmac {
                    event_id_pointer: Some(bad.to_owned()),
                    ..minimal()
                },
                "event_id_pointer",
            );
            assert_invalid(
                &GenericHmac {
                    event_type_pointer: Some(bad.to_owned()),
                    ..minimal()
                },
                "event_type_pointer",
            );
        }
        for good in ["/", "/id", "/data/object/id", "/a~0b/c~1d", "/items/0"] {
            let config = GenericHmac {
                event_id_pointer: Some(good.to_owned()),
                ..minimal()
            };
            assert_eq!(config.validate(), Ok(()), "{good:?}");
        }
    }

    #[test]
    fn templates_use_only_known_placeholders_and_contain_the_body_once() {
        for (bad, needle) in [
            ("", "must contain {body}"),
            ("static", "must contain {body}"),
            ("{timestamp}", "must contain {body}"),
            ("{body}{body}", "more than once"),
            ("{body}.{id}", "unknown placeholder"),
            ("{Body}", "unknown placeholder"),
            ("{ body }", "unknown placeholder"),
            ("{{body}}", "unknown placeholder"),
            ("{body", "unclosed"),
            ("body}", "closes no placeholder"),
            ("{body}}", "closes no placeholder"),
            ("{}{body}", "unknown placeholder"),
        ] {
            assert_invalid(
                &GenericHmac {
                    signed_payload: Some(bad.to_owned()),
                    ..minimal()
                },
                needle,
            );
        }
    }

    #[test]
    fn the_timestamp_placeholder_and_header_come_together() {
        assert_invalid(
            &GenericHmac {
                signed_payload: Some("{timestamp}.{body}".to_owned()),
                ..minimal()
            },
            "no timestamp_header",
        );
        assert_invalid(
            &GenericHmac {
                timestamp_header: Some("X-Timestamp".to_owned()),
                ..minimal()
            },
            "unsigned timestamp",
        );
        assert_invalid(
            &GenericHmac {
                signed_payload: Some("{timestamp}{timestamp}{body}".to_owned()),
                ..timestamped()
            },
            "more than once",
        );
    }

    #[test]
    fn templates_split_into_literals_and_placeholders() {
        assert_eq!(parse_template("{body}"), Ok(vec![Segment::Body]));
        assert_eq!(
            parse_template("v0:{timestamp}:{body}"),
            Ok(vec![
                Segment::Literal("v0:".to_owned()),
                Segment::Timestamp,
                Segment::Literal(":".to_owned()),
                Segment::Body,
            ])
        );
        assert_eq!(
            parse_template("{body}\n"),
            Ok(vec![Segment::Body, Segment::Literal("\n".to_owned())])
        );
    }

    #[test]
    fn a_verifier_refuses_an_invalid_configuration_with_the_validation_message() {
        let config = GenericHmac {
            signed_payload: Some("{nope}".to_owned()),
            ..minimal()
        };
        let expected = config.validate().unwrap_err();
        assert_eq!(
            Verifier::new(Scheme::GenericHmac, &["s"], 300, Some(config)).unwrap_err(),
            VerifierError::Generic(expected)
        );
    }

    #[test]
    fn a_verifier_refuses_an_empty_secret() {
        assert_eq!(
            Verifier::new(Scheme::GenericHmac, &[""], 300, Some(minimal())).unwrap_err(),
            VerifierError::Key {
                index: 0,
                error: KeyError::Empty
            }
        );
    }

    // Verification.

    #[test]
    fn every_algorithm_and_encoding_verifies_its_known_digest() {
        for (algorithm, encoding, digest) in COMBINATIONS {
            let v = verifier(with(algorithm, encoding), &[SECRET]);
            let headers = header_map(&[("X-Signature", digest)]);
            assert_eq!(
                v.verify(&headers, BODY, 0),
                Ok(Verified { key_index: 0 }),
                "{algorithm:?} {encoding:?}"
            );
            assert_eq!(
                v.sign(0, "", 0, BODY),
                vec![("x-signature".to_owned(), digest.to_owned())],
                "{algorithm:?} {encoding:?}"
            );
        }
    }

    #[test]
    fn every_algorithm_and_encoding_round_trips_and_detects_tampering() {
        for (algorithm, encoding, _) in COMBINATIONS {
            let v = verifier(with(algorithm, encoding), &["another secret"]);
            let headers = owned_map(&v.sign(0, "", T, b"{\"id\":1}"));
            assert_eq!(
                v.verify(&headers, b"{\"id\":1}", T),
                Ok(Verified { key_index: 0 }),
                "{algorithm:?} {encoding:?}"
            );
            assert_eq!(
                v.verify(&headers, b"{\"id\":2}", T),
                Err(VerifyError::NoSignatureMatched),
                "{algorithm:?} {encoding:?}"
            );
        }
    }

    #[test]
    fn a_digest_of_the_other_algorithm_or_encoding_is_malformed() {
        for (algorithm, encoding, _) in COMBINATIONS {
            let v = verifier(with(algorithm, encoding), &[SECRET]);
            for (other_algorithm, other_encoding, digest) in COMBINATIONS {
                if (other_algorithm, other_encoding) == (algorithm, encoding) {
                    continue;
                }
                let headers = header_map(&[("X-Signature", digest)]);
                let result = v.verify(&headers, BODY, 0);
                // 64 hex digits happen to be valid base64 of 48 bytes: still not one digest.
                assert_eq!(
                    result,
                    malformed_sig(),
                    "{algorithm:?} {encoding:?} given {other_algorithm:?} {other_encoding:?}"
                );
            }
        }
    }

    #[test]
    fn hex_digests_are_accepted_in_either_case() {
        let v = verifier(minimal(), &[SECRET]);
        let headers = header_map(&[("X-Signature", &SHA256_HEX.to_ascii_uppercase())]);
        assert_eq!(v.verify(&headers, BODY, 0), Ok(Verified { key_index: 0 }));
    }

    #[test]
    fn base64_digests_are_accepted_with_or_without_padding() {
        for (algorithm, digest) in [
            (Algorithm::Sha256, SHA256_BASE64),
            (Algorithm::Sha512, SHA512_BASE64),
        ] {
            let v = verifier(with(algorithm, Encoding::Base64), &[SECRET]);
            let headers = header_map(&[("X-Signature", digest.trim_end_matches('='))]);
            assert_eq!(v.verify(&headers, BODY, 0), Ok(Verified { key_index: 0 }));
        }
    }

    #[test]
    fn malformed_digests_are_malformed_header() {
        let hex = verifier(minimal(), &[SECRET]);
        for value in [
            String::new(),
            SHA256_HEX[..62].to_owned(),
            format!("{SHA256_HEX}00"),
            SHA256_HEX.replace('e', "g"),
            format!(" {SHA256_HEX}"),
            format!("{SHA256_HEX} "),
            format!("sha256={SHA256_HEX}"),
            format!("{SHA256_HEX},{SHA256_HEX}"),
            "a".repeat(MAX_HEADER_LEN + 1),
        ] {
            let headers = header_map(&[("X-Signature", &value)]);
            assert_eq!(hex.verify(&headers, BODY, 0), malformed_sig(), "{value:?}");
        }
        let base64 = verifier(with(Algorithm::Sha256, Encoding::Base64), &[SECRET]);
        for value in [
            String::new(),
            "=".to_owned(),
            SHA256_BASE64.replace('/', "_"),
            SHA256_BASE64.replace('/', "!"),
            format!("{SHA256_BASE64}="),
            format!("{SHA256_BASE64}AAAA"),
            SHA256_BASE64[..40].to_owned(),
            format!(" {SHA256_BASE64}"),
            "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhd=".to_owned(),
            "A".repeat(MAX_HEADER_LEN),
        ] {
            let headers = header_map(&[("X-Signature", &value)]);
            assert_eq!(
                base64.verify(&headers, BODY, 0),
                malformed_sig(),
                "{value:?}"
            );
        }
    }

    #[test]
    fn a_configured_prefix_is_required_and_stripped() {
        let config = GenericHmac {
            prefix: Some("sha256=".to_owned()),
            ..minimal()
        };
        let v = verifier(config, &[SECRET]);
        let check = |value: &str| v.verify(&header_map(&[("X-Signature", value)]), BODY, 0);
        assert_eq!(
            check(&format!("sha256={SHA256_HEX}")),
            Ok(Verified { key_index: 0 })
        );
        for value in [
            SHA256_HEX.to_owned(),
            format!("SHA256={SHA256_HEX}"),
            format!("sha512={SHA256_HEX}"),
            format!(" sha256={SHA256_HEX}"),
            format!("sha256= {SHA256_HEX}"),
            "sha256=".to_owned(),
            "sha256".to_owned(),
            String::new(),
        ] {
            assert_eq!(check(&value), malformed_sig(), "{value:?}");
        }
        assert_eq!(
            v.sign(0, "", 0, BODY),
            vec![("x-signature".to_owned(), format!("sha256={SHA256_HEX}"))]
        );
    }

    #[test]
    fn a_generic_configuration_reproduces_the_github_and_shopify_vectors() {
        let github = GenericHmac {
            signature_header: "X-Hub-Signature-256".to_owned(),
            prefix: Some("sha256=".to_owned()),
            ..minimal()
        };
        let headers = header_map(&[("X-Hub-Signature-256", &format!("sha256={SHA256_HEX}"))]);
        assert!(verifier(github, &[SECRET])
            .verify(&headers, BODY, 0)
            .is_ok());
        let shopify = GenericHmac {
            signature_header: "X-Shopify-Hmac-Sha256".to_owned(),
            encoding: Encoding::Base64,
            ..minimal()
        };
        let headers = header_map(&[("X-Shopify-Hmac-Sha256", SHA256_BASE64)]);
        assert!(verifier(shopify, &[SECRET])
            .verify(&headers, BODY, 0)
            .is_ok());
    }

    #[test]
    fn a_generic_configuration_reproduces_the_slack_vector() {
        // the published Slack vector, through a template.
        let slack = GenericHmac {
            signature_header: "X-Slack-Signature".to_owned(),
            prefix: Some("v0=".to_owned()),
            timestamp_header: Some("X-Slack-Request-Timestamp".to_owned()),
            signed_payload: Some("v0:{timestamp}:{body}".to_owned()),
            ..minimal()
        };
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let headers = header_map(&[
            ("X-Slack-Request-Timestamp", "1531420618"),
            (
                "X-Slack-Signature",
                "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
            ),
        ]);
        let v = verifier(slack, &["8f742231b10e8888abcd99yyyzzz85a5"]);
        assert_eq!(
            v.verify(&headers, body, 1_531_420_618),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn a_timestamp_template_verifies_its_known_digest() {
        assert_eq!(
            check_timestamped(&vector(), TS_BODY, T),
            Ok(Verified { key_index: 0 })
        );
        let sha256 = GenericHmac {
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
            prefix: None,
            ..timestamped()
        };
        let headers = timestamped_headers("1700000000", TS_SHA256_HEX);
        assert_eq!(
            verifier(sha256, &[TS_SECRET]).verify(&headers, TS_BODY, T),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn sign_sets_the_timestamp_header_then_the_signature_header() {
        assert_eq!(
            verifier(timestamped(), &[TS_SECRET]).sign(0, "ignored", T, TS_BODY),
            vec![
                ("x-timestamp".to_owned(), "1700000000".to_owned()),
                ("x-signature".to_owned(), format!("v1={TS_SHA512_BASE64}")),
            ]
        );
    }

    #[test]
    fn a_timestamp_changed_after_signing_is_no_signature_matched() {
        let headers = timestamped_headers("1700000001", &format!("v1={TS_SHA512_BASE64}"));
        assert_eq!(
            check_timestamped(&headers, TS_BODY, T),
            Err(VerifyError::NoSignatureMatched)
        );
        let headers = timestamped_headers("01700000000", &format!("v1={TS_SHA512_BASE64}"));
        assert_eq!(
            check_timestamped(&headers, TS_BODY, T),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn tampering_one_body_byte_is_no_signature_matched() {
        let mut body = TS_BODY.to_vec();
        body[8] ^= 1;
        assert_eq!(
            check_timestamped(&vector(), &body, T),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn exactly_tolerance_away_is_accepted_in_both_directions() {
        assert!(check_timestamped(&vector(), TS_BODY, T + 300).is_ok());
        assert!(check_timestamped(&vector(), TS_BODY, T - 300).is_ok());
    }

    #[test]
    fn one_second_beyond_tolerance_is_rejected_in_both_directions() {
        for now in [T + 301, T - 301] {
            assert_eq!(
                check_timestamped(&vector(), TS_BODY, now),
                Err(VerifyError::TimestampOutsideTolerance)
            );
        }
    }

    #[test]
    fn the_timestamp_is_checked_before_the_signature() {
        let headers = timestamped_headers("1700000000", &format!("v1={SHA512_BASE64}"));
        assert_eq!(
            check_timestamped(&headers, TS_BODY, T + 10_000),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn without_a_timestamp_header_time_plays_no_part() {
        let v = Verifier::new(Scheme::GenericHmac, &[SECRET], 0, Some(minimal())).unwrap();
        let headers = header_map(&[("X-Signature", SHA256_HEX), ("X-Timestamp", "garbage")]);
        for now in [i64::MIN, 0, i64::MAX] {
            assert_eq!(v.verify(&headers, BODY, now), Ok(Verified { key_index: 0 }));
        }
    }

    #[test]
    fn each_missing_header_is_reported_by_its_configured_lowercase_name() {
        assert_eq!(
            check_timestamped(&header_map(&[("x-timestamp", "1700000000")]), TS_BODY, T),
            Err(VerifyError::MissingHeader("x-signature".into()))
        );
        assert_eq!(
            check_timestamped(
                &header_map(&[("x-signature", &format!("v1={TS_SHA512_BASE64}"))]),
                TS_BODY,
                T
            ),
            Err(VerifyError::MissingHeader("x-timestamp".into()))
        );
        assert_eq!(
            check_timestamped(&HeaderMap::new(), TS_BODY, T),
            Err(VerifyError::MissingHeader("x-signature".into()))
        );
    }

    #[test]
    fn configured_header_names_match_in_any_case() {
        let config = GenericHmac {
            signature_header: "x-SIGNATURE".to_owned(),
            ..minimal()
        };
        let v = verifier(config, &[SECRET]);
        for name in ["X-Signature", "x-signature", "X-SIGNATURE"] {
            let headers = header_map(&[(name, SHA256_HEX)]);
            assert!(v.verify(&headers, BODY, 0).is_ok(), "{name}");
        }
        assert_eq!(v.signature_header(), "x-signature");
    }

    #[test]
    fn a_duplicated_header_is_malformed_even_if_both_are_valid() {
        let signature = format!("v1={TS_SHA512_BASE64}");
        for (name, value) in [
            ("x-signature", signature.as_str()),
            ("x-timestamp", "1700000000"),
        ] {
            let mut headers = vector();
            headers.append(name, http::HeaderValue::from_str(value).unwrap());
            assert_eq!(
                check_timestamped(&headers, TS_BODY, T),
                Err(VerifyError::MalformedHeader(name.into()))
            );
        }
    }

    #[test]
    fn malformed_timestamps_are_malformed_header() {
        for t in [
            "",
            "abc",
            "-1700000000",
            "+1700000000",
            " 1700000000",
            "1700000000.0",
            "2023-11-14T22:13:20Z",
            "99999999999999999999",
        ] {
            let headers = timestamped_headers(t, &format!("v1={TS_SHA512_BASE64}"));
            assert_eq!(
                check_timestamped(&headers, TS_BODY, T),
                Err(VerifyError::MalformedHeader("x-timestamp".into())),
                "{t:?}"
            );
        }
    }

    #[test]
    fn a_malformed_signature_is_reported_before_a_malformed_timestamp() {
        let headers = timestamped_headers("abc", "v1=!!");
        assert_eq!(check_timestamped(&headers, TS_BODY, T), malformed_sig());
    }

    #[test]
    fn rotation_reports_the_index_of_the_key_that_matched() {
        for (algorithm, encoding, digest) in COMBINATIONS {
            let v = verifier(with(algorithm, encoding), &["the new secret", SECRET]);
            let headers = header_map(&[("X-Signature", digest)]);
            assert_eq!(
                v.verify(&headers, BODY, 0),
                Ok(Verified { key_index: 1 }),
                "{algorithm:?} {encoding:?}"
            );
        }
    }

    #[test]
    fn no_keys_is_no_keys() {
        let prepared = Prepared::new(minimal()).unwrap();
        let headers = header_map(&[("X-Signature", SHA256_HEX)]);
        assert_eq!(
            verify(&prepared, &[], &headers, BODY, 0, 300),
            Err(VerifyError::NoKeys)
        );
    }

    #[test]
    fn parse_decodes_a_digest_of_the_configured_length() {
        assert_eq!(
            parse_signature(SHA512_HEX, None, Algorithm::Sha512, Encoding::Hex)
                .map(|GenericSignature(tag)| hex::encode(tag)),
            Some(SHA512_HEX.to_owned())
        );
        assert_eq!(
            parse_signature(SHA512_HEX, None, Algorithm::Sha256, Encoding::Hex),
            None
        );
        assert_eq!(
            parse_signature(
                &format!("p{SHA256_BASE64}"),
                Some("p"),
                Algorithm::Sha256,
                Encoding::Base64
            )
            .map(|GenericSignature(tag)| hex::encode(tag)),
            Some(SHA256_HEX.to_owned())
        );
    }

    /// Strategy for an optional short string drawn from `pattern`.
    fn optional(pattern: &'static str) -> impl Strategy<Value = Option<String>> {
        proptest::option::of(proptest::string::string_regex(pattern).unwrap())
    }

    proptest! {
        #[test]
        fn the_signature_parser_never_panics(
            value in any::<String>(),
            prefix in proptest::option::of(any::<String>()),
            sha512 in any::<bool>(),
            base64 in any::<bool>(),
        ) {
            let algorithm = if sha512 { Algorithm::Sha512 } else { Algorithm::Sha256 };
            let encoding = if base64 { Encoding::Base64 } else { Encoding::Hex };
            let _ = parse_signature(&value, prefix.as_deref(), algorithm, encoding);
        }

        #[test]
        fn the_signature_parser_never_panics_on_digest_like_strings(
            value in "(v1=)?[A-Za-z0-9+/=_-]{0,130}",
            sha512 in any::<bool>(),
            base64 in any::<bool>(),
        ) {
            let algorithm = if sha512 { Algorithm::Sha512 } else { Algorithm::Sha256 };
            let encoding = if base64 { Encoding::Base64 } else { Encoding::Hex };
            let _ = parse_signature(&value, Some("v1="), algorithm, encoding);
        }

        #[test]
        fn the_template_parser_never_panics(template in any::<String>()) {
            let _ = parse_template(&template);
        }

        #[test]
        fn the_template_parser_never_panics_on_brace_heavy_strings(
            template in "[{}a-z.:]{0,40}"
        ) {
            let _ = parse_template(&template);
        }

        #[test]
        fn validate_never_panics(
            signature_header in any::<String>(),
            prefix in proptest::option::of(any::<String>()),
            timestamp_header in optional("[A-Za-z -]{0,12}"),
            signed_payload in optional("[{}a-z.]{0,24}"),
            event_id_header in optional("[A-Za-z -]{0,12}"),
            event_id_pointer in optional("[/~01a-z]{0,12}"),
            event_type_header in optional("[A-Za-z -]{0,12}"),
            event_type_pointer in optional("[/~01a-z]{0,12}"),
        ) {
            let config = GenericHmac {
                signature_header,
                algorithm: Algorithm::Sha256,
                encoding: Encoding::Hex,
                prefix,
                timestamp_header,
                signed_payload,
                event_id_header,
                event_id_pointer,
                event_type_header,
                event_type_pointer,
            };
            let _ = config.validate();
        }

        #[test]
        fn verify_never_panics_on_arbitrary_headers_and_bodies(
            signature in proptest::collection::vec(any::<u8>(), 0..300),
            timestamp in proptest::collection::vec(any::<u8>(), 0..30),
            body in proptest::collection::vec(any::<u8>(), 0..300),
            now in any::<i64>(),
            tolerance in any::<u64>(),
            sha512 in any::<bool>(),
            base64 in any::<bool>(),
        ) {
            let mut headers = HeaderMap::new();
            for (name, value) in [("x-signature", signature), ("x-timestamp", timestamp)] {
                if let Ok(value) = http::HeaderValue::from_bytes(&value) {
                    headers.insert(name, value);
                }
            }
            let config = GenericHmac {
                algorithm: if sha512 { Algorithm::Sha512 } else { Algorithm::Sha256 },
                encoding: if base64 { Encoding::Base64 } else { Encoding::Hex },
                ..timestamped()
            };
            for config in [config, minimal()] {
                let v = Verifier::new(Scheme::GenericHmac, &[SECRET], tolerance, Some(config))
                    .unwrap();
                let _ = v.verify(&headers, &body, now);
            }
        }

        #[test]
        fn sign_then_verify_round_trips_any_body_and_timestamp(
            body in proptest::collection::vec(any::<u8>(), 0..300),
            timestamp in 0..i64::MAX,
            sha512 in any::<bool>(),
            base64 in any::<bool>(),
        ) {
            let config = GenericHmac {
                algorithm: if sha512 { Algorithm::Sha512 } else { Algorithm::Sha256 },
                encoding: if base64 { Encoding::Base64 } else { Encoding::Hex },
                ..timestamped()
            };
            let v = Verifier::new(Scheme::GenericHmac, &[SECRET], 0, Some(config)).unwrap();
            let headers = owned_map(&v.sign(0, "", timestamp, &body));
            prop_assert_eq!(v.verify(&headers, &body, timestamp), Ok(Verified { key_index: 0 }));
        }
    }
}
