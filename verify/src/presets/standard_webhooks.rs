//! Standard Webhooks (also Svix's): the three `webhook-*` headers (a preset of the scheme
//! model).
//!
//! Source: the Standard Webhooks specification (github.com/standard-webhooks/standard-webhooks,
//! `spec/standard-webhooks.md`, "Signature scheme") and its reference libraries:
//!
//! - headers `webhook-id` (message id), `webhook-timestamp` (unix seconds) and
//!   `webhook-signature`: a space-delimited list of `<version>,<base64>` entries; only `v1`
//!   (HMAC-SHA256) is read, other versions (`v1a`, `v2`, ...) are ignored;
//! - Svix sends the same headers named `svix-id`, `svix-timestamp`, `svix-signature`: each is
//!   read under its `webhook-*` name if present, else under its `svix-*` name;
//! - signed content: the bytes `{webhook-id}.{webhook-timestamp}.{body}`;
//! - signature: standard base64 (padded) of HMAC-SHA256 keyed with the base64-decoded secret
//!   (secrets are written `whsec_<base64>`);
//! - tolerance: five minutes, in both directions.
//! - The id is `webhook-id` (signed) and the type the body's `type`, read by
//!   [`crate::extract::extract`].

use super::Preset;
use crate::generic::{Encoding, GenericHmac, SecretEncoding, SignatureFormat};
use crate::Scheme;

/// The message id header.
pub const ID_HEADER: &str = "webhook-id";
/// The timestamp header.
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// The signature header.
pub const SIGNATURE_HEADER: &str = "webhook-signature";
/// Svix's name for [`ID_HEADER`].
pub const SVIX_ID_HEADER: &str = "svix-id";
/// Svix's name for [`TIMESTAMP_HEADER`].
pub const SVIX_TIMESTAMP_HEADER: &str = "svix-timestamp";
/// Svix's name for [`SIGNATURE_HEADER`].
pub const SVIX_SIGNATURE_HEADER: &str = "svix-signature";
/// What a Standard Webhooks secret starts with (`whsec_<base64>`); optional in configuration.
pub const SECRET_PREFIX: &str = "whsec_";

pub(super) fn preset() -> Preset {
    Preset {
        model: Some(GenericHmac {
            signature_header: Some(SIGNATURE_HEADER.into()),
            signature_format: SignatureFormat::List {
                separator: " ".into(),
                version: "v1,".into(),
            },
            encoding: Encoding::Base64,
            strict_encoding: true,
            secret_encoding: SecretEncoding::Base64,
            key_prefix: Some(SECRET_PREFIX.into()),
            timestamp_header: Some(TIMESTAMP_HEADER.into()),
            signed_payload: Some("{header:webhook-id}.{timestamp}.{body}".into()),
            header_aliases: [
                (SVIX_ID_HEADER, ID_HEADER),
                (SVIX_TIMESTAMP_HEADER, TIMESTAMP_HEADER),
                (SVIX_SIGNATURE_HEADER, SIGNATURE_HEADER),
            ]
            .into_iter()
            .map(|(from, to)| (from.to_owned(), to.to_owned()))
            .collect(),
            ..GenericHmac::default()
        }),
        ..Preset::row(
            Scheme::StandardWebhooks,
            "Standard Webhooks (Svix, Clerk, Resend, OpenAI, ...)",
            "HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`",
            "header `webhook-id` (signed)",
            "body `type`",
            76,
            false,
            "https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{header_map, signed_map};
    use crate::{KeyError, SigningKey, Verified, VerifyError, MAX_HEADER_LEN, MAX_SIGNATURES};
    use http::HeaderMap;

    crate::test_support::preset_test_fns!(Scheme::StandardWebhooks);

    use proptest::prelude::*;
    use sign_as as sign;

    // Vector A: the libraries' shared test suite; vector B: the Rust library's own test.
    const SECRET_A: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID_A: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const T_A: i64 = 1_614_265_330;
    const BODY_A: &[u8] = br#"{"test": 2432232314}"#;
    const SIG_A: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    const SECRET_B: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    const ID_B: &str = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
    const T_B: i64 = 1_649_367_553;
    const BODY_B: &[u8] = br#"{"email":"test@example.com","username":"test_user"}"#;
    const SIG_B: &str = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=";

    const JUNK: &str = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=";

    fn key(secret: &str) -> SigningKey {
        SigningKey::new(Scheme::StandardWebhooks, secret).unwrap()
    }

    /// Headers of vector A with `signature` as the signature header.
    fn headers_a(signature: &str) -> HeaderMap {
        header_map(&[
            ("webhook-id", ID_A),
            ("webhook-timestamp", &T_A.to_string()),
            ("webhook-signature", signature),
        ])
    }

    fn check_a(headers: &HeaderMap, body: &[u8], now: i64) -> Result<Verified, VerifyError> {
        verify(
            &[key(SECRET_A)],
            headers,
            body,
            now,
            crate::DEFAULT_TOLERANCE_SECS,
        )
    }

    // Vectors: the published standard-webhooks vectors, copied here.

    #[test]
    fn standard_webhooks_vector_a_verifies() {
        assert_eq!(
            check_a(&headers_a(SIG_A), BODY_A, 1_614_265_330),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn standard_webhooks_vector_a_with_a_tampered_signature_is_no_signature_matched() {
        assert_eq!(
            check_a(
                &headers_a("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="),
                BODY_A,
                1_614_265_330
            ),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn standard_webhooks_vector_a_with_multiple_signatures_verifies() {
        let signature = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= \
                         v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= \
                         v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=";
        assert_eq!(
            check_a(&headers_a(signature), BODY_A, 1_614_265_330),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn standard_webhooks_vector_a_too_old_is_outside_tolerance() {
        assert_eq!(
            check_a(&headers_a(SIG_A), BODY_A, 1_614_265_631),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn standard_webhooks_vector_a_too_new_is_outside_tolerance() {
        assert_eq!(
            check_a(&headers_a(SIG_A), BODY_A, 1_614_265_029),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn standard_webhooks_vector_b_verifies() {
        let headers = header_map(&[
            ("webhook-id", ID_B),
            ("webhook-timestamp", "1649367553"),
            ("webhook-signature", SIG_B),
        ]);
        assert_eq!(
            verify(&[key(SECRET_B)], &headers, BODY_B, 1_649_367_553, 300),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn sign_reproduces_both_vectors() {
        assert_eq!(
            sign(&key(SECRET_A), ID_A, T_A, BODY_A),
            vec![
                ("webhook-id", ID_A.to_owned()),
                ("webhook-timestamp", "1614265330".to_owned()),
                ("webhook-signature", SIG_A.to_owned()),
            ]
        );
        assert_eq!(sign(&key(SECRET_B), ID_B, T_B, BODY_B)[2].1, SIG_B);
    }

    #[test]
    fn sign_then_verify_round_trips() {
        let k = key("whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM=");
        let headers = signed_map(&sign(&k, "msg_1", 1_700_000_000, b"{}"));
        assert_eq!(
            verify(&[k], &headers, b"{}", 1_700_000_000, 300),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn tampering_one_body_byte_is_no_signature_matched() {
        let mut body = BODY_A.to_vec();
        body[3] ^= 0x20;
        assert_eq!(
            check_a(&headers_a(SIG_A), &body, T_A),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn a_different_message_id_is_no_signature_matched() {
        let headers = header_map(&[
            ("webhook-id", "msg_other"),
            ("webhook-timestamp", "1614265330"),
            ("webhook-signature", SIG_A),
        ]);
        assert_eq!(
            check_a(&headers, BODY_A, T_A),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn exactly_tolerance_away_is_accepted_in_both_directions() {
        assert!(check_a(&headers_a(SIG_A), BODY_A, T_A + 300).is_ok());
        assert!(check_a(&headers_a(SIG_A), BODY_A, T_A - 300).is_ok());
    }

    #[test]
    fn one_second_beyond_tolerance_is_rejected_in_both_directions() {
        for now in [T_A + 301, T_A - 301] {
            assert_eq!(
                check_a(&headers_a(SIG_A), BODY_A, now),
                Err(VerifyError::TimestampOutsideTolerance)
            );
        }
    }

    #[test]
    fn the_timestamp_is_checked_before_the_signature() {
        assert_eq!(
            check_a(&headers_a(JUNK), BODY_A, T_A - 10_000),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn each_missing_header_is_reported_by_its_webhook_name() {
        let t = T_A.to_string();
        for (missing, present) in [
            (
                "webhook-signature",
                [("webhook-id", ID_A), ("webhook-timestamp", t.as_str())],
            ),
            (
                "webhook-timestamp",
                [("webhook-id", ID_A), ("webhook-signature", SIG_A)],
            ),
            (
                "webhook-id",
                [
                    ("webhook-timestamp", t.as_str()),
                    ("webhook-signature", SIG_A),
                ],
            ),
        ] {
            assert_eq!(
                check_a(&header_map(&present), BODY_A, T_A),
                Err(VerifyError::MissingHeader(missing.into()))
            );
        }
        assert_eq!(
            check_a(&HeaderMap::new(), BODY_A, T_A),
            Err(VerifyError::MissingHeader("webhook-signature".into()))
        );
    }

    #[test]
    fn svix_header_names_are_accepted() {
        let headers = header_map(&[
            ("svix-id", ID_A),
            ("svix-timestamp", "1614265330"),
            ("svix-signature", SIG_A),
        ]);
        assert_eq!(
            check_a(&headers, BODY_A, T_A),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn svix_header_names_in_any_case_are_accepted() {
        let headers = header_map(&[
            ("Svix-Id", ID_A),
            ("Svix-Timestamp", "1614265330"),
            ("Svix-Signature", SIG_A),
        ]);
        assert_eq!(
            check_a(&headers, BODY_A, T_A),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn webhook_names_win_over_svix_names_header_by_header() {
        let headers = header_map(&[
            ("webhook-id", ID_A),
            ("svix-id", "msg_ignored"),
            ("svix-timestamp", "1614265330"),
            ("webhook-signature", SIG_A),
            ("svix-signature", JUNK),
        ]);
        assert_eq!(
            check_a(&headers, BODY_A, T_A),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn a_missing_header_with_svix_names_is_reported_by_its_webhook_name() {
        let headers = header_map(&[("svix-id", ID_A), ("svix-signature", SIG_A)]);
        assert_eq!(
            check_a(&headers, BODY_A, T_A),
            Err(VerifyError::MissingHeader("webhook-timestamp".into()))
        );
    }

    #[test]
    fn a_duplicated_header_is_malformed() {
        let t = T_A.to_string();
        for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
            let mut pairs = vec![
                ("webhook-id", ID_A),
                ("webhook-timestamp", t.as_str()),
                ("webhook-signature", SIG_A),
            ];
            let value = pairs.iter().find(|(n, _)| *n == name).unwrap().1;
            pairs.push((name, value));
            assert_eq!(
                check_a(&header_map(&pairs), BODY_A, T_A),
                Err(VerifyError::MalformedHeader(name.into()))
            );
        }
    }

    #[test]
    fn a_duplicated_svix_header_is_malformed_under_its_svix_name() {
        let headers = header_map(&[
            ("svix-id", ID_A),
            ("svix-timestamp", "1614265330"),
            ("svix-signature", SIG_A),
            ("svix-signature", SIG_A),
        ]);
        assert_eq!(
            check_a(&headers, BODY_A, T_A),
            Err(VerifyError::MalformedHeader("svix-signature".into()))
        );
    }

    #[test]
    fn malformed_signature_lists_are_malformed_header() {
        for signature in [
            "",
            " ",
            "   ",
            "v1",
            "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            ",g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1",
            "v1=g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        ] {
            assert_eq!(
                check_a(&headers_a(signature), BODY_A, T_A),
                Err(VerifyError::MalformedHeader("webhook-signature".into())),
                "{signature:?}"
            );
        }
    }

    #[test]
    fn malformed_timestamps_are_malformed_header() {
        for timestamp in [
            "",
            "abc",
            "-1614265330",
            "+1614265330",
            " 1614265330",
            "1614265330.0",
            "1614265330000000000000",
        ] {
            let headers = header_map(&[
                ("webhook-id", ID_A),
                ("webhook-timestamp", timestamp),
                ("webhook-signature", SIG_A),
            ]);
            assert_eq!(
                check_a(&headers, BODY_A, T_A),
                Err(VerifyError::MalformedHeader("webhook-timestamp".into())),
                "{timestamp:?}"
            );
        }
    }

    #[test]
    fn an_empty_message_id_is_malformed_header() {
        let headers = header_map(&[
            ("webhook-id", ""),
            ("webhook-timestamp", "1614265330"),
            ("webhook-signature", SIG_A),
        ]);
        assert_eq!(
            check_a(&headers, BODY_A, T_A),
            Err(VerifyError::MalformedHeader("webhook-id".into()))
        );
    }

    #[test]
    fn a_header_over_eight_kib_is_malformed() {
        let mut at_max = SIG_A.to_owned();
        at_max.push(' ');
        at_max.push_str("v9,");
        at_max.push_str(&"a".repeat(MAX_HEADER_LEN - at_max.len()));
        assert_eq!(at_max.len(), MAX_HEADER_LEN);
        assert!(check_a(&headers_a(&at_max), BODY_A, T_A).is_ok());
        assert_eq!(
            check_a(&headers_a(&format!("{at_max}a")), BODY_A, T_A),
            Err(VerifyError::MalformedHeader("webhook-signature".into()))
        );
    }

    #[test]
    fn junk_and_other_versions_do_not_fail_the_header() {
        let unpadded = SIG_A.trim_end_matches('=');
        for junk in [
            "v1,",
            "v1,!!!!",
            "v1,g0hM9SsE",
            "v1,g0hM9SsE-OTPJTGt_tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            unpadded,
            "v1a,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            "v2,anything",
        ] {
            assert_eq!(
                check_a(&headers_a(&format!("{junk} {SIG_A}")), BODY_A, T_A),
                Ok(Verified { key_index: 0 }),
                "{junk:?}"
            );
            assert_eq!(
                check_a(&headers_a(junk), BODY_A, T_A),
                Err(VerifyError::NoSignatureMatched),
                "{junk:?}"
            );
        }
    }

    #[test]
    fn extra_spaces_between_entries_are_tolerated() {
        let signature = format!("  {JUNK}   {SIG_A}  ");
        assert_eq!(
            check_a(&headers_a(&signature), BODY_A, T_A),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn several_signatures_with_only_the_last_valid_verify() {
        let signature = format!("{JUNK} {JUNK} v1a,xyz {JUNK} {SIG_A}");
        assert_eq!(
            check_a(&headers_a(&signature), BODY_A, T_A),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn only_the_first_sixteen_v1_entries_are_considered() {
        let mut entries = vec![JUNK; MAX_SIGNATURES - 1];
        entries.push(SIG_A);
        assert!(check_a(&headers_a(&entries.join(" ")), BODY_A, T_A).is_ok());
        let mut entries = vec![JUNK; MAX_SIGNATURES];
        entries.push(SIG_A);
        assert_eq!(
            check_a(&headers_a(&entries.join(" ")), BODY_A, T_A),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn rotation_reports_the_index_of_the_key_that_matched() {
        let keys = [key(SECRET_B), key(SECRET_A)];
        assert_eq!(
            verify(&keys, &headers_a(SIG_A), BODY_A, T_A, 300),
            Ok(Verified { key_index: 1 })
        );
    }

    #[test]
    fn no_keys_is_no_keys() {
        assert_eq!(
            verify(&[], &headers_a(SIG_A), BODY_A, T_A, 300),
            Err(VerifyError::NoKeys)
        );
    }

    #[test]
    fn a_secret_without_the_whsec_prefix_is_the_same_key() {
        let k = key("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        assert_eq!(
            verify(&[k], &headers_a(SIG_A), BODY_A, T_A, 300),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn a_secret_with_or_without_padding_is_the_same_key() {
        // 16 bytes: 22 base64 characters + "==".
        let padded = key("whsec_AAECAwQFBgcICQoLDA0ODw==");
        let unpadded = key("whsec_AAECAwQFBgcICQoLDA0ODw");
        let partially_padded = key("whsec_AAECAwQFBgcICQoLDA0ODw=");
        let bare = key("AAECAwQFBgcICQoLDA0ODw");
        let expected = sign(&padded, "msg_1", T_A, BODY_A);
        assert_eq!(sign(&unpadded, "msg_1", T_A, BODY_A), expected);
        assert_eq!(sign(&partially_padded, "msg_1", T_A, BODY_A), expected);
        assert_eq!(sign(&bare, "msg_1", T_A, BODY_A), expected);
        let headers = signed_map(&expected);
        assert_eq!(
            verify(&[unpadded], &headers, BODY_A, T_A, 300),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn an_undecodable_secret_is_not_base64() {
        for secret in [
            "whsec_not base64",
            "whsec_%%%%",
            "whsec_abc$",
            "whsec_A",
            "whsec_-_-_",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n",
        ] {
            assert_eq!(
                SigningKey::new(Scheme::StandardWebhooks, secret).unwrap_err(),
                KeyError::NotBase64,
                "{secret:?}"
            );
        }
    }

    #[test]
    fn an_empty_secret_or_a_bare_prefix_is_empty() {
        for secret in ["", "whsec_"] {
            assert_eq!(
                SigningKey::new(Scheme::StandardWebhooks, secret).unwrap_err(),
                KeyError::Empty,
                "{secret:?}"
            );
        }
    }

    proptest! {

        #[test]
        fn verify_never_panics_on_header_like_signatures(
            value in "(v1,[A-Za-z0-9+/=]{0,50} ?){0,20}"
        ) {
            let keys = [SigningKey::new(Scheme::StandardWebhooks, "a2V5").unwrap()];
            let _ = verify(&keys, &header_map(&[(SIGNATURE_HEADER, &value)]), b"{}", 0, 300);
        }

        #[test]
        fn verify_never_panics_on_arbitrary_headers_and_bodies(
            id in proptest::collection::vec(any::<u8>(), 0..100),
            timestamp in proptest::collection::vec(any::<u8>(), 0..30),
            signature in proptest::collection::vec(any::<u8>(), 0..300),
            svix in any::<bool>(),
            body in proptest::collection::vec(any::<u8>(), 0..300),
            now in any::<i64>(),
            tolerance in any::<u64>(),
        ) {
            let names = if svix {
                [SVIX_ID_HEADER, SVIX_TIMESTAMP_HEADER, SVIX_SIGNATURE_HEADER]
            } else {
                [ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER]
            };
            let mut headers = HeaderMap::new();
            for (name, value) in names.into_iter().zip([id, timestamp, signature]) {
                if let Ok(value) = http::HeaderValue::from_bytes(&value) {
                    headers.insert(name, value);
                }
            }
            let _ = verify(&[key(SECRET_A)], &headers, &body, now, tolerance);
        }

        #[test]
        fn sign_then_verify_round_trips_any_body_id_and_timestamp(
            body in proptest::collection::vec(any::<u8>(), 0..300),
            id in "[!-~]{1,64}",
            timestamp in 0..i64::MAX,
        ) {
            let k = key(SECRET_A);
            let headers = signed_map(&sign(&k, &id, timestamp, &body));
            prop_assert_eq!(verify(&[k], &headers, &body, timestamp, 0), Ok(Verified { key_index: 0 }));
        }
    }
}
