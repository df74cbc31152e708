//! Webhook signature verification: pure functions over the raw body bytes and the headers.
//!
//! This module owns the [`Scheme`] dispatch, the prepared [`SigningKey`], the outcome
//! [`Verified`] and the errors [`KeyError`] and [`VerifyError`]. Each scheme's header format and
//! signed content live in its own file: [`stripe`], [`github`], [`standard_webhooks`].
//!
//! Rules shared by every scheme:
//!
//! - the body is the exact raw bytes received; nothing is re-serialised;
//! - every key of a source is tried (secret rotation) and [`Verified::key_index`] says which one
//!   matched first, in configuration order;
//! - MACs are compared in constant time ([`subtle::ConstantTimeEq`] on the 32-byte HMAC-SHA256
//!   output), after decoding the provided hex or base64 once;
//! - a header value longer than [`MAX_HEADER_LEN`] bytes, not visible ASCII, or present more than
//!   once is [`VerifyError::MalformedHeader`]; at most [`MAX_SIGNATURES`] signatures of one
//!   header are considered, so a hostile header cannot cause unbounded work;
//! - where the scheme signs a timestamp, it is checked against the injected clock in both
//!   directions before any HMAC is computed.
//!
//! No I/O, no clock, no logging: the caller passes `now` and logs the outcome.

use std::fmt;

use base64::alphabet;
use base64::engine::general_purpose::GeneralPurpose;
use base64::engine::{DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use http::HeaderMap;
use sha2::Sha256;
use subtle::{Choice, ConstantTimeEq};

pub mod github;
pub mod standard_webhooks;
pub mod stripe;

/// Longest signature-related header value accepted, in bytes (8 KiB).
///
/// Longer values are [`VerifyError::MalformedHeader`]. Real values are far shorter: Stripe sends
/// one `t` and a few `v1` entries (~80 bytes each), GitHub ~71 bytes, Standard Webhooks ~47
/// bytes per signature.
pub const MAX_HEADER_LEN: usize = 8 * 1024;

/// Most signatures of one header that are considered; later ones are ignored.
///
/// Providers send one signature per active secret (two during a rotation), so 16 is generous;
/// the cap bounds the comparisons a hostile header can cause.
pub const MAX_SIGNATURES: usize = 16;

/// Default timestamp tolerance, in seconds, for the schemes that sign a timestamp (300 s).
///
/// Source: Stripe's libraries (`DEFAULT_TOLERANCE = 300`) and the Standard Webhooks
/// specification ("five minutes").
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;

/// Length of an HMAC-SHA256 output in bytes.
const TAG_LEN: usize = 32;

/// An HMAC-SHA256 output: computed by us or decoded from a header.
type Tag = [u8; TAG_LEN];

/// Which signing scheme a source uses.
///
/// In configuration (serde) the names are `"stripe"`, `"github"` and `"standard-webhooks"`.
/// Svix signs with Standard Webhooks (its `svix-*` header names are accepted too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    /// Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, see [`stripe`].
    Stripe,
    /// GitHub: `X-Hub-Signature-256: sha256=<hex>`, see [`github`].
    Github,
    /// Standard Webhooks (and Svix): `webhook-id`, `webhook-timestamp` and
    /// `webhook-signature: v1,<base64> ...`, see [`standard_webhooks`].
    StandardWebhooks,
}

impl Scheme {
    /// Whether the scheme signs a timestamp, so that the tolerance applies.
    ///
    /// Stripe (`t=`) and Standard Webhooks (`webhook-timestamp`) do; GitHub does not (a GitHub
    /// delivery can be replayed by whoever captured it; the ledger's idempotency absorbs it).
    #[must_use]
    pub fn signs_timestamp(self) -> bool {
        match self {
            Self::Stripe | Self::StandardWebhooks => true,
            Self::Github => false,
        }
    }

    /// Name of the header that carries the signature, lowercase, for logs and docs:
    /// `"stripe-signature"`, `"x-hub-signature-256"` or `"webhook-signature"`.
    #[must_use]
    pub fn signature_header(self) -> &'static str {
        match self {
            Self::Stripe => stripe::SIGNATURE_HEADER,
            Self::Github => github::SIGNATURE_HEADER,
            Self::StandardWebhooks => standard_webhooks::SIGNATURE_HEADER,
        }
    }
}

/// One secret, prepared for a scheme: the keyed HMAC-SHA256 state, computed once at start-up
/// and cloned per verification.
///
/// The raw secret is not kept. `Debug` prints `SigningKey([redacted])`.
#[derive(Clone)]
pub struct SigningKey {
    /// HMAC-SHA256 keyed with the scheme's key bytes, never updated: cloned for each MAC.
    mac: Hmac<Sha256>,
}

/// Base64 engine for Standard Webhooks secrets: standard alphabet; padding optional (full,
/// partial or none); non-zero trailing bits tolerated (as Python's `base64.b64decode` does).
/// Leniency here only concerns our own configuration, never what a sender controls.
const SECRET_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

impl SigningKey {
    /// Prepare `secret` (the string as configured, used verbatim: no trimming) for `scheme`.
    ///
    /// The key bytes are:
    ///
    /// - Stripe: the secret string *including* its `whsec_` prefix, as UTF-8 bytes (Stripe's
    ///   libraries key the HMAC with the whole endpoint secret);
    /// - GitHub: the secret string's UTF-8 bytes (GitHub docs, "Validating webhook deliveries");
    /// - Standard Webhooks: the secret without an optional `whsec_` prefix, base64-decoded
    ///   (standard alphabet; missing or partial padding accepted, as the Python and JS libraries
    ///   do; no whitespace).
    ///
    /// # Errors
    ///
    /// [`KeyError::Empty`] if the secret is empty (for Standard Webhooks: nothing after the
    /// prefix, or it decodes to no bytes); [`KeyError::NotBase64`] if a Standard Webhooks secret
    /// does not decode. Neither error carries the secret.
    pub fn new(scheme: Scheme, secret: &str) -> Result<SigningKey, KeyError> {
        if secret.is_empty() {
            return Err(KeyError::Empty);
        }
        let mac = match scheme {
            Scheme::Stripe | Scheme::Github => Self::mac_from(secret.as_bytes()),
            Scheme::StandardWebhooks => {
                let encoded = secret
                    .strip_prefix(standard_webhooks::SECRET_PREFIX)
                    .unwrap_or(secret);
                if encoded.is_empty() {
                    return Err(KeyError::Empty);
                }
                let key = SECRET_BASE64
                    .decode(encoded)
                    .map_err(|_| KeyError::NotBase64)?;
                if key.is_empty() {
                    return Err(KeyError::Empty);
                }
                Self::mac_from(&key)
            }
        };
        Ok(SigningKey { mac })
    }

    /// HMAC-SHA256 keyed with `key` (HMAC accepts keys of any length).
    fn mac_from(key: &[u8]) -> Hmac<Sha256> {
        <Hmac<Sha256> as KeyInit>::new_from_slice(key)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"))
    }

    /// HMAC-SHA256 of the concatenation of `parts` (fed in order, nothing copied).
    fn tag(&self, parts: &[&[u8]]) -> Tag {
        let mut mac = self.mac.clone();
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey([redacted])")
    }
}

/// Why a configured secret cannot be prepared as a [`SigningKey`]. A configuration error: not
/// retryable; the messages never include the secret.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// The secret is empty (or, for Standard Webhooks, empty after the `whsec_` prefix).
    #[error("signing secret is empty")]
    Empty,
    /// A Standard Webhooks secret is not base64 (standard alphabet) after the `whsec_` prefix.
    #[error("signing secret is not base64 (standard-webhooks secrets are whsec_<base64>)")]
    NotBase64,
}

/// What a successful verification tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// Which of the source's secrets matched: 0-based index into the `keys` slice (config
    /// order), the first that matched. Logged during a rotation to see when the old secret
    /// stops being used.
    pub key_index: usize,
}

/// Why a delivery failed verification.
///
/// Every variant is answered with 401 and [`VerifyError::reason`] as the body; the `Display`
/// text (which may name a header) is for our log. None is retryable by us: the provider retries
/// on its own schedule.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    /// A required header is absent. Carries the header's lowercase name (for Standard Webhooks
    /// the `webhook-*` name, even though `svix-*` is accepted too).
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    /// A header is present but cannot be parsed: duplicated, longer than [`MAX_HEADER_LEN`], not
    /// visible ASCII, empty, missing a separator, a non-numeric timestamp, a value that is not
    /// the expected hex... Carries the lowercase name of the header as received.
    #[error("malformed header {0}")]
    MalformedHeader(&'static str),
    /// The signed timestamp is more than the tolerance away from `now`, in either direction
    /// (too old, or too far in the future).
    #[error("timestamp outside tolerance")]
    TimestampOutsideTolerance,
    /// The headers are well-formed, but no signature matched any key (also: no signature of the
    /// expected version was present).
    #[error("no signature matched any key")]
    NoSignatureMatched,
    /// The keys slice is empty. A configuration bug (configuration fails closed at start-up),
    /// answered like a mismatch.
    #[error("no signing keys configured for this source")]
    NoKeys,
}

impl VerifyError {
    /// Short fixed reason, safe to send to the provider in the 401 body: `"missing signature
    /// header"`, `"malformed signature header"`, `"timestamp outside tolerance"` or
    /// `"signature mismatch"` ([`VerifyError::NoKeys`] too, so the response does not reveal our
    /// configuration).
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingHeader(_) => "missing signature header",
            Self::MalformedHeader(_) => "malformed signature header",
            Self::TimestampOutsideTolerance => "timestamp outside tolerance",
            Self::NoSignatureMatched | Self::NoKeys => "signature mismatch",
        }
    }
}

/// Verify `body` (the exact raw bytes received) against every key, for `scheme`.
///
/// `now` is the current time in unix seconds (injected clock). `tolerance_secs` (seconds)
/// applies where the scheme signs a timestamp ([`Scheme::signs_timestamp`]), in both directions:
/// `|now - t| <= tolerance_secs` is accepted, one second more is rejected. Header lookup is
/// case-insensitive ([`http::HeaderMap`]). The rules of each scheme are documented on
/// [`stripe::verify`], [`github::verify`] and [`standard_webhooks::verify`].
///
/// # Errors
///
/// [`VerifyError::NoKeys`] if `keys` is empty; otherwise [`VerifyError::MissingHeader`],
/// [`VerifyError::MalformedHeader`], [`VerifyError::TimestampOutsideTolerance`] (checked before
/// any HMAC is computed) or [`VerifyError::NoSignatureMatched`].
pub fn verify(
    scheme: Scheme,
    keys: &[SigningKey],
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
    tolerance_secs: u64,
) -> Result<Verified, VerifyError> {
    match scheme {
        Scheme::Stripe => stripe::verify(keys, headers, body, now, tolerance_secs),
        Scheme::Github => github::verify(keys, headers, body, now, tolerance_secs),
        Scheme::StandardWebhooks => {
            standard_webhooks::verify(keys, headers, body, now, tolerance_secs)
        }
    }
}

/// Sign `body` as the provider would (tests, the local dev tool, replay).
///
/// Returns the headers to set, as `(lowercase name, value)` pairs, in a fixed order. `msg_id` is
/// used by Standard Webhooks (`webhook-id`, part of the signed content) and ignored by the
/// others; it must be a valid header value (visible ASCII) and non-empty to verify. `timestamp`
/// is unix seconds, ignored by GitHub; it must be non-negative to verify. `key` must have been
/// prepared for the same `scheme`.
#[must_use]
pub fn sign(
    scheme: Scheme,
    key: &SigningKey,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    match scheme {
        Scheme::Stripe => stripe::sign(key, timestamp, body),
        Scheme::Github => github::sign(key, body),
        Scheme::StandardWebhooks => standard_webhooks::sign(key, msg_id, timestamp, body),
    }
}

/// The single value of header `name`, as a string.
///
/// `Ok(None)` if absent. A header present more than once is ambiguous (which one did the
/// provider sign?), so it is [`VerifyError::MalformedHeader`], as is a value longer than
/// [`MAX_HEADER_LEN`] or not visible ASCII ([`http::HeaderValue::to_str`]).
fn single_header<'h>(
    headers: &'h HeaderMap,
    name: &'static str,
) -> Result<Option<&'h str>, VerifyError> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() || value.len() > MAX_HEADER_LEN {
        return Err(VerifyError::MalformedHeader(name));
    }
    value
        .to_str()
        .map(Some)
        .map_err(|_| VerifyError::MalformedHeader(name))
}

/// Parse unix seconds written as ASCII decimal digits only (no sign, no spaces, no fraction):
/// what Stripe's `t=` and Standard Webhooks' `webhook-timestamp` carry. `None` if not digits or
/// beyond `i64`.
fn parse_unix_seconds(value: &str) -> Option<i64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// Accept `timestamp` if `|now - timestamp| <= tolerance_secs` (seconds, both directions).
///
/// # Errors
///
/// [`VerifyError::TimestampOutsideTolerance`] otherwise.
fn check_tolerance(timestamp: i64, now: i64, tolerance_secs: u64) -> Result<(), VerifyError> {
    if now.abs_diff(timestamp) > tolerance_secs {
        return Err(VerifyError::TimestampOutsideTolerance);
    }
    Ok(())
}

/// Decode exactly 64 lowercase hex digits (the form Stripe and GitHub send) into a tag.
/// `None` for any other length, uppercase or non-hex digits.
fn decode_lower_hex(value: &str) -> Option<Tag> {
    if value.len() != 2 * TAG_LEN
        || !value
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    let mut tag = [0_u8; TAG_LEN];
    hex::decode_to_slice(value, &mut tag).ok()?;
    Some(tag)
}

/// Compute each key's MAC over the concatenation of `parts` and compare it, in constant time,
/// with every candidate. Every key is tried (no early exit); the first matching index wins.
///
/// # Errors
///
/// [`VerifyError::NoKeys`] if `keys` is empty; [`VerifyError::NoSignatureMatched`] if no
/// candidate matches any key (including when there are no candidates).
fn first_matching_key(
    keys: &[SigningKey],
    parts: &[&[u8]],
    candidates: &[Tag],
) -> Result<Verified, VerifyError> {
    if keys.is_empty() {
        return Err(VerifyError::NoKeys);
    }
    let mut matched = None;
    for (key_index, key) in keys.iter().enumerate() {
        let expected = key.tag(parts);
        let hit = candidates.iter().fold(Choice::from(0), |acc, candidate| {
            acc | expected.ct_eq(candidate)
        });
        if bool::from(hit) && matched.is_none() {
            matched = Some(Verified { key_index });
        }
    }
    matched.ok_or(VerifyError::NoSignatureMatched)
}

/// Helpers shared by the scheme files' tests.
#[cfg(test)]
mod test_support {
    use http::header::{HeaderName, HeaderValue};
    use http::HeaderMap;

    /// A header map from `(name, value)` pairs; names in any case; repeated names are appended.
    pub(super) fn header_map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    /// A header map from the pairs [`crate::verify::sign`] returns.
    pub(super) fn signed_map(pairs: &[(&'static str, String)]) -> HeaderMap {
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(n, v)| (*n, v.as_str())).collect();
        header_map(&pairs)
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{header_map, signed_map};
    use super::*;
    use proptest::prelude::*;

    const STRIPE_SECRET: &str = "whsec_test_secret";
    const GITHUB_SECRET: &str = "It's a Secret to Everybody";
    const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn key(scheme: Scheme) -> SigningKey {
        let secret = match scheme {
            Scheme::Stripe => STRIPE_SECRET,
            Scheme::Github => GITHUB_SECRET,
            Scheme::StandardWebhooks => STANDARD_SECRET,
        };
        SigningKey::new(scheme, secret).unwrap()
    }

    const ALL: [Scheme; 3] = [Scheme::Stripe, Scheme::Github, Scheme::StandardWebhooks];

    #[test]
    fn scheme_names_in_config_are_kebab_case() {
        for (scheme, name) in [
            (Scheme::Stripe, "\"stripe\""),
            (Scheme::Github, "\"github\""),
            (Scheme::StandardWebhooks, "\"standard-webhooks\""),
        ] {
            assert_eq!(serde_json::to_string(&scheme).unwrap(), name);
            assert_eq!(serde_json::from_str::<Scheme>(name).unwrap(), scheme);
        }
        assert!(serde_json::from_str::<Scheme>("\"svix\"").is_err());
    }

    #[test]
    fn only_github_does_not_sign_a_timestamp() {
        assert!(Scheme::Stripe.signs_timestamp());
        assert!(!Scheme::Github.signs_timestamp());
        assert!(Scheme::StandardWebhooks.signs_timestamp());
    }

    #[test]
    fn signature_header_names_are_lowercase_and_are_what_sign_sets() {
        for scheme in ALL {
            let name = scheme.signature_header();
            assert_eq!(name, name.to_ascii_lowercase());
            let signed = sign(scheme, &key(scheme), "msg_1", 1_700_000_000, b"{}");
            assert!(signed.iter().any(|(n, _)| *n == name), "{scheme:?}");
        }
    }

    #[test]
    fn dispatch_round_trips_every_scheme() {
        for scheme in ALL {
            let keys = [key(scheme)];
            let headers = signed_map(&sign(scheme, &keys[0], "msg_1", 1_700_000_000, b"{}"));
            assert_eq!(
                verify(scheme, &keys, &headers, b"{}", 1_700_000_000, 300),
                Ok(Verified { key_index: 0 }),
                "{scheme:?}"
            );
        }
    }

    #[test]
    fn a_signature_of_one_scheme_does_not_verify_under_another() {
        let signed = signed_map(&sign(
            Scheme::Stripe,
            &key(Scheme::Stripe),
            "msg_1",
            1_700_000_000,
            b"{}",
        ));
        let keys = [key(Scheme::Github)];
        assert_eq!(
            verify(Scheme::Github, &keys, &signed, b"{}", 1_700_000_000, 300),
            Err(VerifyError::MissingHeader("x-hub-signature-256"))
        );
    }

    #[test]
    fn empty_keys_are_no_keys_for_every_scheme_even_without_headers() {
        for scheme in ALL {
            assert_eq!(
                verify(scheme, &[], &HeaderMap::new(), b"{}", 0, 300),
                Err(VerifyError::NoKeys)
            );
        }
    }

    #[test]
    fn an_empty_secret_is_an_error_for_every_scheme() {
        for scheme in ALL {
            assert_eq!(SigningKey::new(scheme, "").unwrap_err(), KeyError::Empty);
        }
    }

    #[test]
    fn signing_key_debug_does_not_contain_the_secret() {
        for scheme in ALL {
            let printed = format!("{:?}", key(scheme));
            assert_eq!(printed, "SigningKey([redacted])");
            assert!(!printed.contains("secret") && !printed.contains("MfKQ"));
        }
    }

    #[test]
    fn key_error_messages_do_not_contain_the_secret() {
        let secret = "whsec_not*base64!";
        let error = SigningKey::new(Scheme::StandardWebhooks, secret).unwrap_err();
        assert_eq!(error, KeyError::NotBase64);
        assert!(!error.to_string().contains("not*base64"));
    }

    #[test]
    fn reasons_are_the_fixed_strings_sent_to_providers() {
        assert_eq!(
            VerifyError::MissingHeader("stripe-signature").reason(),
            "missing signature header"
        );
        assert_eq!(
            VerifyError::MalformedHeader("stripe-signature").reason(),
            "malformed signature header"
        );
        assert_eq!(
            VerifyError::TimestampOutsideTolerance.reason(),
            "timestamp outside tolerance"
        );
        assert_eq!(
            VerifyError::NoSignatureMatched.reason(),
            "signature mismatch"
        );
        assert_eq!(VerifyError::NoKeys.reason(), "signature mismatch");
    }

    #[test]
    fn tolerance_is_inclusive_in_both_directions() {
        assert_eq!(check_tolerance(1000, 1300, 300), Ok(()));
        assert_eq!(check_tolerance(1000, 700, 300), Ok(()));
        assert_eq!(
            check_tolerance(1000, 1301, 300),
            Err(VerifyError::TimestampOutsideTolerance)
        );
        assert_eq!(
            check_tolerance(1000, 699, 300),
            Err(VerifyError::TimestampOutsideTolerance)
        );
        assert_eq!(check_tolerance(0, i64::MAX, u64::MAX), Ok(()));
        assert_eq!(
            check_tolerance(i64::MAX, i64::MIN, 0),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn unix_seconds_are_digits_only() {
        assert_eq!(parse_unix_seconds("1614265330"), Some(1_614_265_330));
        assert_eq!(parse_unix_seconds("0"), Some(0));
        for bad in [
            "",
            "-1",
            "+1",
            " 1",
            "1 ",
            "1.5",
            "1e9",
            "0x10",
            "9223372036854775808",
        ] {
            assert_eq!(parse_unix_seconds(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn hex_tags_are_exactly_64_lowercase_hex_digits() {
        let good = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(decode_lower_hex(good).is_some());
        assert!(decode_lower_hex(&good.to_ascii_uppercase()).is_none());
        assert!(decode_lower_hex(&good[..62]).is_none());
        assert!(decode_lower_hex(&format!("{good}00")).is_none());
        assert!(decode_lower_hex(&good.replace('e', "g")).is_none());
        assert!(decode_lower_hex("").is_none());
    }

    #[test]
    fn a_duplicated_header_is_malformed() {
        let headers = header_map(&[("x-a", "1"), ("X-A", "2")]);
        assert_eq!(
            single_header(&headers, "x-a"),
            Err(VerifyError::MalformedHeader("x-a"))
        );
    }

    #[test]
    fn a_header_of_exactly_the_maximum_length_is_read_and_one_more_byte_is_malformed() {
        let at_max = "a".repeat(MAX_HEADER_LEN);
        let headers = header_map(&[("x-a", &at_max)]);
        assert_eq!(single_header(&headers, "x-a"), Ok(Some(at_max.as_str())));
        let over = "a".repeat(MAX_HEADER_LEN + 1);
        let headers = header_map(&[("x-a", &over)]);
        assert_eq!(
            single_header(&headers, "x-a"),
            Err(VerifyError::MalformedHeader("x-a"))
        );
    }

    #[test]
    fn a_non_ascii_header_value_is_malformed() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-a",
            http::HeaderValue::from_bytes("t=é".as_bytes()).unwrap(),
        );
        assert_eq!(
            single_header(&headers, "x-a"),
            Err(VerifyError::MalformedHeader("x-a"))
        );
    }

    #[test]
    fn an_absent_header_is_none() {
        assert_eq!(single_header(&HeaderMap::new(), "x-a"), Ok(None));
    }

    #[test]
    fn every_key_is_tried_and_the_first_match_is_reported() {
        let a = SigningKey::new(Scheme::Github, "a").unwrap();
        let b = SigningKey::new(Scheme::Github, "b").unwrap();
        let parts: &[&[u8]] = &[b"hello"];
        let tag_b = b.tag(parts);
        assert_eq!(
            first_matching_key(&[a.clone(), b.clone()], parts, &[tag_b]),
            Ok(Verified { key_index: 1 })
        );
        assert_eq!(
            first_matching_key(&[b.clone(), b.clone()], parts, &[tag_b]),
            Ok(Verified { key_index: 0 })
        );
        assert_eq!(
            first_matching_key(&[a], parts, &[]),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn parts_are_macd_as_their_concatenation() {
        let k = key(Scheme::Github);
        assert_eq!(k.tag(&[b"ab", b"", b"c"]), k.tag(&[b"abc"]));
    }

    proptest! {
        #[test]
        fn unix_seconds_parser_never_panics(value in any::<String>()) {
            let _ = parse_unix_seconds(&value);
        }

        #[test]
        fn hex_decoder_never_panics(value in any::<String>()) {
            let _ = decode_lower_hex(&value);
        }

        #[test]
        fn signing_key_new_never_panics(secret in any::<String>()) {
            for scheme in ALL {
                let _ = SigningKey::new(scheme, &secret);
            }
        }

        #[test]
        fn tolerance_check_never_panics(t in any::<i64>(), now in any::<i64>(), tol in any::<u64>()) {
            let _ = check_tolerance(t, now, tol);
        }
    }
}
