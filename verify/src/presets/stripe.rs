//! Stripe: the `Stripe-Signature` header (a preset of the scheme model).
//!
//! Source: Stripe docs, "Check the webhook signatures" (stripe.com/docs/webhooks#verify-manually),
//! and the reference implementation in stripe-python `stripe/_webhook.py` (`WebhookSignature`):
//!
//! - header `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]`, comma-separated
//!   `key=value` entries; Stripe sends one `v1` per active endpoint secret during a rotation,
//!   and may add entries of other schemes (`v0`, test-mode extras) that are ignored;
//! - signed payload: the bytes `{t}.{body}`, `t` as received;
//! - signature: lowercase hex of HMAC-SHA256 keyed with the endpoint secret *including* its
//!   `whsec_` prefix;
//! - default tolerance 300 s (the libraries check only the past; we check both directions).
//! - The id and type are the body's `id` and `type` (signed), read by
//!   [`crate::extract::extract`].

use super::Preset;
use crate::generic::{GenericHmac, SignatureFormat};
use crate::Scheme;

/// The signature header's name, lowercase.
pub const SIGNATURE_HEADER: &str = "stripe-signature";

pub(super) fn preset() -> Preset {
    Preset {
        model: Some(GenericHmac {
            signature_header: Some("Stripe-Signature".into()),
            signature_format: SignatureFormat::Pairs {
                separator: ",".into(),
                assign: "=".into(),
                signature_key: "v1".into(),
                timestamp_key: Some("t".into()),
            },
            signed_payload: Some("{timestamp}.{body}".into()),
            strict_encoding: true,
            ..GenericHmac::default()
        }),
        ..Preset::row(
            Scheme::Stripe,
            "Stripe",
            "HMAC-SHA256 of `{t}.{body}` (`Stripe-Signature: t=...,v1=...`)",
            "body `id`",
            "body `type`",
            72,
            true,
            "https://docs.stripe.com/webhooks#verify-manually",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{header_map, signed_map};
    use crate::{SigningKey, Verified, VerifyError, MAX_HEADER_LEN, MAX_SIGNATURES};
    use http::HeaderMap;

    crate::test_support::preset_test_fns!(Scheme::Stripe);

    /// The preset's signature headers.
    fn sign(key: &SigningKey, timestamp: i64, body: &[u8]) -> Vec<(&'static str, String)> {
        sign_as(key, "", timestamp, body)
    }
    use proptest::prelude::*;

    const SECRET: &str = "whsec_test_secret";
    const BODY: &[u8] = br#"{"id":"evt_test_webhook","object":"event"}"#;
    const T: i64 = 1_614_265_330;
    const V1: &str = "3c5817089d739023dd6190f70a3757e04f7a2fd8b5dab12c2e000f51970dccff";

    fn key(secret: &str) -> SigningKey {
        SigningKey::new(Scheme::Stripe, secret).unwrap()
    }

    fn check(value: &str, body: &[u8], now: i64) -> Result<Verified, VerifyError> {
        let headers = header_map(&[("Stripe-Signature", value)]);
        verify(
            &[key(SECRET)],
            &headers,
            body,
            now,
            crate::DEFAULT_TOLERANCE_SECS,
        )
    }

    /// A header for `BODY` at `T` with the given v1 entries.
    fn header_with(v1: &[&str]) -> String {
        let mut value = format!("t={T}");
        for sig in v1 {
            value.push_str(",v1=");
            value.push_str(sig);
        }
        value
    }

    const JUNK: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    // Vectors: the published stripe vectors, copied here.

    #[test]
    fn stripe_vector_derived_verifies() {
        assert_eq!(
            check(&format!("t=1614265330,v1={V1}"), BODY, 1_614_265_330),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn stripe_vector_with_two_v1_entries_verifies_on_the_second() {
        assert_eq!(
            check(
                &format!("t=1614265330,v1={JUNK},v1={V1}"),
                BODY,
                1_614_265_330
            ),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn stripe_vector_with_only_v0_is_no_signature_matched() {
        assert_eq!(
            check(&format!("t=1614265330,v0={V1}"), BODY, 1_614_265_330),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn stripe_vector_too_old_is_outside_tolerance() {
        assert_eq!(
            check(&format!("t=1614265330,v1={V1}"), BODY, 1_614_265_631),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn sign_reproduces_the_vector() {
        assert_eq!(
            sign(&key(SECRET), T, BODY),
            vec![("stripe-signature", format!("t={T},v1={V1}"))]
        );
    }

    #[test]
    fn the_whsec_prefix_is_part_of_the_key() {
        let without_prefix = [key("test_secret")];
        let headers = header_map(&[("stripe-signature", &header_with(&[V1]))]);
        assert_eq!(
            verify(&without_prefix, &headers, BODY, T, 300),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn sign_then_verify_round_trips() {
        let k = key("whsec_other");
        let headers = signed_map(&sign(&k, 1_700_000_000, b"payload"));
        assert_eq!(
            verify(&[k], &headers, b"payload", 1_700_000_000, 300),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn tampering_one_body_byte_is_no_signature_matched() {
        let mut body = BODY.to_vec();
        body[7] ^= 1;
        assert_eq!(
            check(&header_with(&[V1]), &body, T),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn a_timestamp_changed_after_signing_is_no_signature_matched() {
        assert_eq!(
            check(&format!("t={},v1={V1}", T + 1), BODY, T),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn exactly_tolerance_away_is_accepted_in_both_directions() {
        let value = header_with(&[V1]);
        assert!(check(&value, BODY, T + 300).is_ok());
        assert!(check(&value, BODY, T - 300).is_ok());
    }

    #[test]
    fn one_second_beyond_tolerance_is_rejected_in_both_directions() {
        let value = header_with(&[V1]);
        assert_eq!(
            check(&value, BODY, T + 301),
            Err(VerifyError::TimestampOutsideTolerance)
        );
        assert_eq!(
            check(&value, BODY, T - 301),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn the_timestamp_is_checked_before_the_signature() {
        assert_eq!(
            check(&header_with(&[JUNK]), BODY, T + 10_000),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn a_zero_tolerance_accepts_only_the_same_second() {
        let headers = header_map(&[("stripe-signature", &header_with(&[V1]))]);
        assert!(verify(&[key(SECRET)], &headers, BODY, T, 0).is_ok());
        assert_eq!(
            verify(&[key(SECRET)], &headers, BODY, T + 1, 0),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn a_missing_header_is_missing_stripe_signature() {
        let headers = header_map(&[("x-hub-signature-256", "sha256=00")]);
        assert_eq!(
            verify(&[key(SECRET)], &headers, BODY, T, 300),
            Err(VerifyError::MissingHeader("stripe-signature".into()))
        );
    }

    #[test]
    fn a_duplicated_header_is_malformed_even_if_both_are_valid() {
        let value = header_with(&[V1]);
        let headers = header_map(&[("stripe-signature", &value), ("Stripe-Signature", &value)]);
        assert_eq!(
            verify(&[key(SECRET)], &headers, BODY, T, 300),
            Err(VerifyError::MalformedHeader("stripe-signature".into()))
        );
    }

    #[test]
    fn malformed_values_are_malformed_header() {
        for value in [
            String::new(),
            ",".to_owned(),
            format!("v1={V1}"),
            format!("t={T},,v1={V1}"),
            format!("t={T},v1={V1},"),
            format!("t={T};v1={V1}"),
            format!("t={T},v1{V1}"),
            format!("t={T},={V1}"),
            format!("t=,v1={V1}"),
            format!("t=abc,v1={V1}"),
            format!("t=-{T},v1={V1}"),
            format!("t=+{T},v1={V1}"),
            format!("t= {T},v1={V1}"),
            format!("t={T}.5,v1={V1}"),
            format!("t=99999999999999999999,v1={V1}"),
            format!("t={T},t={T},v1={V1}"),
        ] {
            assert_eq!(
                check(&value, BODY, T),
                Err(VerifyError::MalformedHeader("stripe-signature".into())),
                "{value:?}"
            );
        }
    }

    #[test]
    fn a_header_with_a_timestamp_and_no_v1_entry_is_no_signature_matched() {
        assert_eq!(
            check(&format!("t={T}"), BODY, T),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn junk_v1_entries_do_not_fail_the_header() {
        for junk in [
            "",
            "zz",
            "3c58",
            &V1.to_ascii_uppercase(),
            &format!("{V1}00"),
            "=",
            "g3c5817089d739023dd6190f70a3757e04f7a2fd8b5dab12c2e000f51970dccf",
        ] {
            assert_eq!(
                check(&header_with(&[junk, V1]), BODY, T),
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
    fn unknown_keys_and_v0_entries_are_ignored() {
        let value = format!("t={T},v0={JUNK},scheme=x,v1={V1},extra=a=b");
        assert_eq!(check(&value, BODY, T), Ok(Verified { key_index: 0 }));
    }

    #[test]
    fn entries_may_come_in_any_order() {
        let value = format!("v1={JUNK},v1={V1},t={T}");
        assert_eq!(check(&value, BODY, T), Ok(Verified { key_index: 0 }));
    }

    #[test]
    fn several_signatures_with_only_the_last_valid_verify() {
        let value = header_with(&[JUNK, JUNK, JUNK, V1]);
        assert_eq!(check(&value, BODY, T), Ok(Verified { key_index: 0 }));
    }

    #[test]
    fn only_the_first_sixteen_v1_entries_are_considered() {
        let mut sigs = vec![JUNK; MAX_SIGNATURES - 1];
        sigs.push(V1);
        assert!(check(&header_with(&sigs), BODY, T).is_ok());
        let mut sigs = vec![JUNK; MAX_SIGNATURES];
        sigs.push(V1);
        assert_eq!(
            check(&header_with(&sigs), BODY, T),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn a_header_over_eight_kib_is_malformed() {
        let at_max = {
            let mut value = header_with(&[V1]);
            value.push_str(",x=");
            value.push_str(&"a".repeat(MAX_HEADER_LEN - value.len()));
            value
        };
        assert_eq!(at_max.len(), MAX_HEADER_LEN);
        assert!(check(&at_max, BODY, T).is_ok());
        let over = format!("{at_max}a");
        assert_eq!(
            check(&over, BODY, T),
            Err(VerifyError::MalformedHeader("stripe-signature".into()))
        );
    }

    #[test]
    fn rotation_reports_the_index_of_the_key_that_matched() {
        let keys = [key("whsec_new_secret"), key(SECRET)];
        let headers = header_map(&[("stripe-signature", &header_with(&[V1]))]);
        assert_eq!(
            verify(&keys, &headers, BODY, T, 300),
            Ok(Verified { key_index: 1 })
        );
    }

    #[test]
    fn rotation_with_both_secrets_signing_reports_the_first_key() {
        let old = key(SECRET);
        let new = key("whsec_new_secret");
        let new_sig = sign(&new, T, BODY).remove(0).1;
        let new_v1 = new_sig.rsplit_once("v1=").unwrap().1.to_owned();
        let headers = header_map(&[("stripe-signature", &header_with(&[V1, &new_v1]))]);
        assert_eq!(
            verify(&[new, old], &headers, BODY, T, 300),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn no_keys_is_no_keys() {
        let headers = header_map(&[("stripe-signature", &header_with(&[V1]))]);
        assert_eq!(
            verify(&[], &headers, BODY, T, 300),
            Err(VerifyError::NoKeys)
        );
    }

    proptest! {

        #[test]
        fn verify_never_panics_on_header_like_strings(value in "[tv01=,a-f0-9 ]{0,300}") {
            let keys = [SigningKey::new(Scheme::Stripe, "a2V5").unwrap()];
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
