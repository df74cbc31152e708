//! Verify and sign one generic delivery: read the configured headers, parse the signature
//! (prefix, encoding, length) and the timestamp, check the tolerance, compare the HMACs.

use std::borrow::Cow;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, STANDARD};
use base64::engine::{DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine as _;
use http::{HeaderMap, HeaderName};

use super::config::{Encoding, Prepared};
use super::template::payload;
use crate::header::{check_tolerance, parse_unix_seconds, single_value, Malformed};
use crate::key::{first_matching_key, Algorithm, SigningKey};
use crate::outcome::{Verified, VerifyError};
use crate::tag::{AnyTag, TAG512_LEN, TAG_LEN};

/// A parsed generic signature header value: the decoded digest, of the configured algorithm's
/// length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GenericSignature(pub(super) AnyTag);

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
pub(super) fn parse_signature(
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

/// The single value of the configured header `name` (see [`crate::header::single_value`]), errors
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
/// the configured algorithm (by [`crate::Verifier::new`]).
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
///   [`crate::MAX_HEADER_LEN`] bytes, not visible ASCII, a signature without the prefix or not
///   one digest in the encoding, a timestamp that is not unix seconds in ASCII digits;
/// - [`VerifyError::TimestampOutsideTolerance`]: `|now - timestamp| > tolerance_secs`;
/// - [`VerifyError::NoSignatureMatched`]: the digest matches no key.
pub(crate) fn verify(
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
pub(crate) fn sign(
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
