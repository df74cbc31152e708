//! Paddle Billing: the `Paddle-Signature` header (a preset of the scheme model).
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
//! - The id and type are the body's `event_id` and `event_type` (signed), read by
//!   [`crate::extract::extract`].
//!
//! Classic Paddle (public-key `p_signature` in the body) is a different scheme, not handled.

use super::Preset;
use crate::generic::{GenericHmac, SignatureFormat};
use crate::Scheme;

/// The signature header's name, lowercase.
pub const SIGNATURE_HEADER: &str = "paddle-signature";

pub(super) fn preset() -> Preset {
    Preset {
        model: Some(GenericHmac {
            signature_header: Some("Paddle-Signature".into()),
            signature_format: SignatureFormat::Pairs {
                separator: ";".into(),
                assign: "=".into(),
                signature_key: "h1".into(),
                timestamp_key: Some("ts".into()),
            },
            signed_payload: Some("{timestamp}:{body}".into()),
            strict_encoding: true,
            ..GenericHmac::default()
        }),
        ..Preset::row(
            Scheme::Paddle,
            "Paddle Billing",
            "HMAC-SHA256 of `{ts}:{body}` (`Paddle-Signature: ts=...;h1=...`)",
            "body `event_id`",
            "body `event_type`",
            72,
            true,
            "https://developer.paddle.com/webhooks/signature-verification",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{header_map, signed_map};
    use crate::{KeyError, SigningKey, Verified, VerifyError, MAX_HEADER_LEN, MAX_SIGNATURES};
    use http::HeaderMap;

    crate::test_support::preset_test_fns!(Scheme::Paddle);

    /// The preset's signature headers.
    fn sign(key: &SigningKey, timestamp: i64, body: &[u8]) -> Vec<(&'static str, String)> {
        sign_as(key, "", timestamp, body)
    }
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

    proptest! {

        #[test]
        fn verify_never_panics_on_header_like_strings(value in "[tsh1=;a-f0-9 ]{0,300}") {
            let keys = [SigningKey::new(Scheme::Paddle, "a2V5").unwrap()];
            let _ = verify(&keys, &header_map(&[(SIGNATURE_HEADER, &value)]), b"{}", 0, 300);
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
