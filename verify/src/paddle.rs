//! Paddle Billing's signing scheme: the `Paddle-Signature` header, its parser, verify and sign.
//!
//! Source: Paddle docs, "Verify webhook signatures"
//! (developer.paddle.com/webhooks/signature-verification), and the reference implementation in
//! paddle-python-sdk `paddle_billing/Notifications/PaddleSignature.py` and `Verifier.py`:
//!
//! - header `Paddle-Signature: ts=<unix seconds>;h1=<hex>[;h1=<hex>...]`, `;`-separated
//!   `key=value` entries; Paddle sends one `h1` per active secret while a secret is rotated;
//! - signed payload: the bytes `{ts}:{body}`, `ts` exactly as received;
//! - signature: lowercase hex of HMAC-SHA256 keyed with the notification destination's secret
//!   key, the whole string including its `pdl_ntfset_` prefix (UTF-8 bytes);
//! - tolerance: the SDKs reject only the past, by default after 5 s (`maximum_variance = 5`);
//!   we check both directions with [`crate::DEFAULT_TOLERANCE_SECS`] (300 s), see there.
//!
//! Classic Paddle (public-key `p_signature` in the body) is a different scheme, not handled.

use http::HeaderMap;

use crate::header::{check_tolerance, parse_unix_seconds, single_header};
use crate::key::{first_matching_key, SigningKey};
use crate::limits::MAX_SIGNATURES;
use crate::outcome::{Verified, VerifyError};
use crate::tag::{decode_lower_hex, Tag};

/// Name of Paddle's signature header, lowercase (`Paddle-Signature`).
pub const SIGNATURE_HEADER: &str = "paddle-signature";

/// The timestamp entry's key.
const TIMESTAMP_KEY: &str = "ts";

/// The only signature scheme Paddle defines (HMAC-SHA256, hex).
const EXPECTED_SCHEME: &str = "h1";

/// A parsed `Paddle-Signature` value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PaddleSignature<'h> {
    /// The `ts` entry: unix seconds, for the tolerance check.
    timestamp: i64,
    /// The `ts` entry as received (ASCII digits), for the signed payload.
    timestamp_text: &'h str,
    /// The decodable `h1` entries (64 lowercase hex digits), in header order, at most
    /// [`MAX_SIGNATURES`] of the first `h1` entries considered. An `h1` entry that is not 64
    /// lowercase hex digits is dropped: it could never match.
    h1: Vec<Tag>,
}

/// Parse a `Paddle-Signature` value.
///
/// Entries are separated by `;` and split at their first `=`; no whitespace is trimmed (Paddle
/// sends none). Unknown keys are ignored, so a future `h2` does not break verification (the
/// Python SDK raises on them instead). `None` (malformed) if the value is empty, an entry is
/// empty, has no `=` or an empty key, or if `ts` is missing, repeated, or not unix seconds in
/// ASCII digits.
fn parse_signature(value: &str) -> Option<PaddleSignature<'_>> {
    let mut timestamp = None;
    let mut h1 = Vec::new();
    let mut h1_seen = 0_usize;
    for entry in value.split(';') {
        let (key, entry_value) = entry.split_once('=')?;
        match key {
            "" => return None,
            TIMESTAMP_KEY => {
                if timestamp.is_some() {
                    return None;
                }
                timestamp = Some((parse_unix_seconds(entry_value)?, entry_value));
            }
            EXPECTED_SCHEME => {
                h1_seen = h1_seen.saturating_add(1);
                if h1_seen <= MAX_SIGNATURES {
                    h1.extend(decode_lower_hex(entry_value));
                }
            }
            _ => {}
        }
    }
    let (timestamp, timestamp_text) = timestamp?;
    Some(PaddleSignature {
        timestamp,
        timestamp_text,
        h1,
    })
}

/// Verify a Paddle Billing delivery: `body` is the exact raw bytes received.
///
/// Steps: read `Paddle-Signature` (exactly once); parse it; check `ts` against `now` (unix
/// seconds) within `tolerance_secs` seconds in both directions, before any HMAC; then compare
/// HMAC-SHA256(key, `{ts}:{body}`) of every key with every `h1` entry, in constant time.
///
/// # Errors
///
/// - [`VerifyError::NoKeys`]: `keys` is empty;
/// - [`VerifyError::MissingHeader`]`("paddle-signature")`: header absent;
/// - [`VerifyError::MalformedHeader`]`("paddle-signature")`: repeated, over
///   [`super::MAX_HEADER_LEN`] bytes, not visible ASCII, or not parseable (no `ts`, an entry
///   without `=`, an empty entry, a non-numeric `ts`...);
/// - [`VerifyError::TimestampOutsideTolerance`]: `|now - ts| > tolerance_secs`;
/// - [`VerifyError::NoSignatureMatched`]: no `h1` entry, or none matched any key.
pub fn verify(
    keys: &[SigningKey],
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
    tolerance_secs: u64,
) -> Result<Verified, VerifyError> {
    if keys.is_empty() {
        return Err(VerifyError::NoKeys);
    }
    let value = single_header(headers, SIGNATURE_HEADER)?
        .ok_or(VerifyError::MissingHeader(SIGNATURE_HEADER.into()))?;
    let signature =
        parse_signature(value).ok_or(VerifyError::MalformedHeader(SIGNATURE_HEADER.into()))?;
    check_tolerance(signature.timestamp, now, tolerance_secs)?;
    first_matching_key(
        keys,
        &[signature.timestamp_text.as_bytes(), b":", body],
        &signature.h1,
    )
}

/// Sign `body` as Paddle does at `timestamp` (unix seconds, non-negative to verify).
///
/// Returns one pair: `("paddle-signature", "ts=<timestamp>;h1=<64 lowercase hex>")`.
#[must_use]
pub fn sign(key: &SigningKey, timestamp: i64, body: &[u8]) -> Vec<(&'static str, String)> {
    let t = timestamp.to_string();
    let tag = key.tag(&[t.as_bytes(), b":", body]);
    vec![(
        SIGNATURE_HEADER,
        format!("{TIMESTAMP_KEY}={t};{EXPECTED_SCHEME}={}", hex::encode(tag)),
    )]
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{header_map, signed_map};
    use super::super::{KeyError, Scheme, MAX_HEADER_LEN};
    use super::*;
    use proptest::prelude::*;

    // Vector: the published paddle vectors, copied here (derived with the algorithm of
    // paddle-python-sdk).
    const SECRET: &str = "pdl_ntfset_test_secret";
    const BODY: &[u8] = br#"{"event_id":"evt_test"}"#;
    const T: i64 = 1_671_552_777;
    const H1: &str = "0b394d18edcab21e92f2ba4e975b64b0e2a90a6b401db2ac809a95f4c5ffd1d0";

    const JUNK: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    fn key(secret: &str) -> SigningKey {
        SigningKey::new(Scheme::Paddle, secret).unwrap()
    }

    fn check(value: &str, body: &[u8], now: i64) -> Result<Verified, VerifyError> {
        let headers = header_map(&[("Paddle-Signature", value)]);
        verify(
            &[key(SECRET)],
            &headers,
            body,
            now,
            crate::DEFAULT_TOLERANCE_SECS,
        )
    }

    /// A header for `BODY` at `T` with the given h1 entries.
    fn header_with(h1: &[&str]) -> String {
        let mut value = format!("ts={T}");
        for sig in h1 {
            value.push_str(";h1=");
            value.push_str(sig);
        }
        value
    }

    fn malformed() -> Result<Verified, VerifyError> {
        Err(VerifyError::MalformedHeader("paddle-signature".into()))
    }

    #[test]
    fn paddle_derived_vector_verifies() {
        assert_eq!(
            check(&format!("ts=1671552777;h1={H1}"), BODY, 1_671_552_777),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn sign_reproduces_the_vector() {
        assert_eq!(
            sign(&key(SECRET), T, BODY),
            vec![("paddle-signature", format!("ts={T};h1={H1}"))]
        );
    }

    #[test]
    fn the_pdl_ntfset_prefix_is_part_of_the_key() {
        let without_prefix = [key("test_secret")];
        let headers = header_map(&[("paddle-signature", &header_with(&[H1]))]);
        assert_eq!(
            verify(&without_prefix, &headers, BODY, T, 300),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn sign_then_verify_round_trips() {
        let k = key("pdl_ntfset_01h_other");
        let headers = signed_map(&sign(&k, 1_700_000_000, b"{}"));
        assert_eq!(
            verify(&[k], &headers, b"{}", 1_700_000_000, 300),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn tampering_one_body_byte_is_no_signature_matched() {
        let mut body = BODY.to_vec();
        body[2] ^= 1;
        assert_eq!(
            check(&header_with(&[H1]), &body, T),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn a_timestamp_changed_after_signing_is_no_signature_matched() {
        assert_eq!(
            check(&format!("ts={};h1={H1}", T + 1), BODY, T),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn the_timestamp_is_signed_as_received() {
        let value = format!("ts=0{T};h1={H1}");
        assert_eq!(check(&value, BODY, T), Err(VerifyError::NoSignatureMatched));
        let tag = key(SECRET).tag(&[format!("0{T}").as_bytes(), b":", BODY]);
        let value = format!("ts=0{T};h1={}", hex::encode(tag));
        assert_eq!(check(&value, BODY, T), Ok(Verified { key_index: 0 }));
    }

    #[test]
    fn exactly_tolerance_away_is_accepted_in_both_directions() {
        let value = header_with(&[H1]);
        assert!(check(&value, BODY, T + 300).is_ok());
        assert!(check(&value, BODY, T - 300).is_ok());
    }

    #[test]
    fn one_second_beyond_tolerance_is_rejected_in_both_directions() {
        let value = header_with(&[H1]);
        for now in [T + 301, T - 301] {
            assert_eq!(
                check(&value, BODY, now),
                Err(VerifyError::TimestampOutsideTolerance)
            );
        }
    }

    #[test]
    fn the_sdk_default_of_five_seconds_is_respected_when_configured() {
        let headers = header_map(&[("paddle-signature", &header_with(&[H1]))]);
        assert!(verify(&[key(SECRET)], &headers, BODY, T + 5, 5).is_ok());
        assert_eq!(
            verify(&[key(SECRET)], &headers, BODY, T + 6, 5),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn the_timestamp_is_checked_before_the_signature() {
        assert_eq!(
            check(&header_with(&[JUNK]), BODY, T - 10_000),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn a_missing_header_is_missing_paddle_signature() {
        let headers = header_map(&[("stripe-signature", &format!("t={T},v1={H1}"))]);
        assert_eq!(
            verify(&[key(SECRET)], &headers, BODY, T, 300),
            Err(VerifyError::MissingHeader("paddle-signature".into()))
        );
    }

    #[test]
    fn a_duplicated_header_is_malformed_even_if_both_are_valid() {
        let value = header_with(&[H1]);
        let headers = header_map(&[("paddle-signature", &value), ("Paddle-Signature", &value)]);
        assert_eq!(verify(&[key(SECRET)], &headers, BODY, T, 300), malformed());
    }

    #[test]
    fn malformed_values_are_malformed_header() {
        for value in [
            String::new(),
            ";".to_owned(),
            format!("h1={H1}"),
            format!("ts={T};;h1={H1}"),
            format!("ts={T};h1={H1};"),
            format!(";ts={T};h1={H1}"),
            format!("ts={T},h1={H1}"),
            format!("ts={T};h1{H1}"),
            format!("ts={T};={H1}"),
            format!("ts=;h1={H1}"),
            format!("ts=abc;h1={H1}"),
            format!("ts=-{T};h1={H1}"),
            format!("ts=+{T};h1={H1}"),
            format!("ts= {T};h1={H1}"),
            format!("ts={T} ;h1={H1}"),
            format!("ts={T}.5;h1={H1}"),
            format!("ts=99999999999999999999;h1={H1}"),
            format!("ts={T};ts={T};h1={H1}"),
            format!("TS={T};h1={H1}"),
        ] {
            assert_eq!(check(&value, BODY, T), malformed(), "{value:?}");
        }
    }

    #[test]
    fn a_header_with_a_timestamp_and_no_h1_entry_is_no_signature_matched() {
        assert_eq!(
            check(&format!("ts={T}"), BODY, T),
            Err(VerifyError::NoSignatureMatched)
        );
        assert_eq!(
            check(&format!("ts={T};h2={H1}"), BODY, T),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn junk_h1_entries_do_not_fail_the_header() {
        for junk in [
            "",
            "zz",
            "0b39",
            &H1.to_ascii_uppercase(),
            &format!("{H1}00"),
            "=",
            " 0b394d18edcab21e92f2ba4e975b64b0e2a90a6b401db2ac809a95f4c5ffd1d",
        ] {
            assert_eq!(
                check(&header_with(&[junk, H1]), BODY, T),
                Ok(Verified { key_index: 0 }),
                "{junk:?}"
            );
            assert_eq!(
                check(&header_with(&[junk]), BODY, T),
                Err(VerifyError::NoSignatureMatched),
                "{junk:?}"
            );
        }
    }

    #[test]
    fn unknown_keys_are_ignored() {
        let value = format!("ts={T};h2={JUNK};scheme=x;h1={H1};extra=a=b");
        assert_eq!(check(&value, BODY, T), Ok(Verified { key_index: 0 }));
    }

    #[test]
    fn entries_may_come_in_any_order() {
        let value = format!("h1={JUNK};h1={H1};ts={T}");
        assert_eq!(check(&value, BODY, T), Ok(Verified { key_index: 0 }));
    }

    #[test]
    fn several_h1_signatures_with_only_the_last_valid_verify() {
        let value = header_with(&[JUNK, JUNK, JUNK, H1]);
        assert_eq!(check(&value, BODY, T), Ok(Verified { key_index: 0 }));
    }

    #[test]
    fn only_the_first_sixteen_h1_entries_are_considered() {
        let mut sigs = vec![JUNK; MAX_SIGNATURES - 1];
        sigs.push(H1);
        assert!(check(&header_with(&sigs), BODY, T).is_ok());
        let mut sigs = vec![JUNK; MAX_SIGNATURES];
        sigs.push(H1);
        assert_eq!(
            check(&header_with(&sigs), BODY, T),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn a_header_over_eight_kib_is_malformed() {
        let at_max = {
            let mut value = header_with(&[H1]);
            value.push_str(";x=");
            value.push_str(&"a".repeat(MAX_HEADER_LEN - value.len()));
            value
        };
        assert_eq!(at_max.len(), MAX_HEADER_LEN);
        assert!(check(&at_max, BODY, T).is_ok());
        assert_eq!(check(&format!("{at_max}a"), BODY, T), malformed());
    }

    #[test]
    fn rotation_reports_the_index_of_the_key_that_matched() {
        let keys = [key("pdl_ntfset_new"), key(SECRET)];
        let headers = header_map(&[("paddle-signature", &header_with(&[H1]))]);
        assert_eq!(
            verify(&keys, &headers, BODY, T, 300),
            Ok(Verified { key_index: 1 })
        );
    }

    #[test]
    fn rotation_with_both_secrets_signing_reports_the_first_key() {
        let old = key(SECRET);
        let new = key("pdl_ntfset_new");
        let new_sig = sign(&new, T, BODY).remove(0).1;
        let new_h1 = new_sig.rsplit_once("h1=").unwrap().1.to_owned();
        let headers = header_map(&[("paddle-signature", &header_with(&[H1, &new_h1]))]);
        assert_eq!(
            verify(&[new, old], &headers, BODY, T, 300),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn no_keys_is_no_keys() {
        let headers = header_map(&[("paddle-signature", &header_with(&[H1]))]);
        assert_eq!(
            verify(&[], &headers, BODY, T, 300),
            Err(VerifyError::NoKeys)
        );
    }

    #[test]
    fn an_empty_secret_is_refused() {
        assert_eq!(
            SigningKey::new(Scheme::Paddle, "").unwrap_err(),
            KeyError::Empty
        );
    }

    #[test]
    fn parse_keeps_the_timestamp_and_decoded_h1_entries() {
        let value = format!("ts={T};h1={H1};h1=zz");
        let parsed = parse_signature(&value).unwrap();
        assert_eq!(parsed.timestamp, T);
        assert_eq!(parsed.timestamp_text, "1671552777");
        assert_eq!(parsed.h1.len(), 1);
        assert_eq!(hex::encode(parsed.h1[0]), H1);
    }

    proptest! {
        #[test]
        fn the_parser_never_panics(value in any::<String>()) {
            let _ = parse_signature(&value);
        }

        #[test]
        fn the_parser_never_panics_on_header_like_strings(value in "[tsh1=;a-f0-9 ]{0,300}") {
            let _ = parse_signature(&value);
        }

        #[test]
        fn verify_never_panics_on_arbitrary_headers_and_bodies(
            value in proptest::collection::vec(any::<u8>(), 0..300),
            body in proptest::collection::vec(any::<u8>(), 0..300),
            now in any::<i64>(),
            tolerance in any::<u64>(),
        ) {
            let mut headers = HeaderMap::new();
            if let Ok(value) = http::HeaderValue::from_bytes(&value) {
                headers.insert(SIGNATURE_HEADER, value);
            }
            let _ = verify(&[key(SECRET)], &headers, &body, now, tolerance);
        }

        #[test]
        fn sign_then_verify_round_trips_any_body_and_timestamp(
            body in proptest::collection::vec(any::<u8>(), 0..300),
            timestamp in 0..i64::MAX,
        ) {
            let k = key(SECRET);
            let headers = signed_map(&sign(&k, timestamp, &body));
            prop_assert_eq!(verify(&[k], &headers, &body, timestamp, 0), Ok(Verified { key_index: 0 }));
        }
    }
}
