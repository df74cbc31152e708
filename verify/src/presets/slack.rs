//! Slack: the `X-Slack-Request-Timestamp` and `X-Slack-Signature` headers (a preset of the
//! scheme model).
//!
//! Source: Slack docs, "Verifying requests from Slack"
//! (api.slack.com/authentication/verifying-requests-from-slack), and the reference
//! implementation in python-slack-sdk `slack_sdk/signature/__init__.py` (`SignatureVerifier`):
//!
//! - header `X-Slack-Request-Timestamp: <unix seconds>`;
//! - header `X-Slack-Signature: v0=<hex>`: one signature; `v0` is the only version;
//! - signed payload ("basestring"): the bytes `v0:{X-Slack-Request-Timestamp}:{body}`, the
//!   timestamp exactly as received;
//! - signature: lowercase hex of HMAC-SHA256 keyed with the app's signing secret (UTF-8 bytes);
//! - tolerance: the docs reject a timestamp "more than five minutes from local time", and the
//!   SDK checks `abs(now - timestamp) > 60 * 5`: both directions, 300 s.
//! - The id and type (Events API `event_id` and `event.type`, a form's `trigger_id`, the
//!   `url_verification` handshake) are read by [`crate::extract::extract`].

use super::{Handshake, Preset};
use crate::generic::GenericHmac;
use crate::Scheme;

/// The signature header's name, lowercase.
pub const SIGNATURE_HEADER: &str = "x-slack-signature";

/// The timestamp header's name, lowercase.
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";

pub(super) fn preset() -> Preset {
    Preset {
        model: Some(GenericHmac {
            signature_header: Some("X-Slack-Signature".into()),
            prefix: Some("v0=".into()),
            timestamp_header: Some("X-Slack-Request-Timestamp".into()),
            signed_payload: Some("v0:{timestamp}:{body}".into()),
            strict_encoding: true,
            ..GenericHmac::default()
        }),
        handshake: Some(Handshake::SlackUrlVerification),
        ..Preset::row(
            Scheme::Slack,
            "Slack",
            "HMAC-SHA256 of `v0:{timestamp}:{body}`",
            "body `event_id`, or the form's `trigger_id`",
            "body `event.type`",
            1,
            false,
            "https://api.slack.com/authentication/verifying-requests-from-slack",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{header_map, signed_map};
    use crate::{KeyError, SigningKey, Verified, VerifyError, MAX_HEADER_LEN};
    use http::HeaderMap;

    crate::test_support::preset_test_fns!(Scheme::Slack);

    /// The preset's signature headers.
    fn sign(key: &SigningKey, timestamp: i64, body: &[u8]) -> Vec<(&'static str, String)> {
        sign_as(key, "", timestamp, body)
    }
    use proptest::prelude::*;

    // Vector: the published slack vectors, copied here (Slack's docs example, also in
    // python-slack-sdk's tests).
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const T: i64 = 1_531_420_618;
    const SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
    const BODY: &[u8] = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";

    const JUNK: &str = "v0=0000000000000000000000000000000000000000000000000000000000000000";

    fn key(secret: &str) -> SigningKey {
        SigningKey::new(Scheme::Slack, secret).unwrap()
    }

    fn headers(timestamp: &str, signature: &str) -> HeaderMap {
        header_map(&[
            ("X-Slack-Request-Timestamp", timestamp),
            ("X-Slack-Signature", signature),
        ])
    }

    fn check(headers: &HeaderMap, body: &[u8], now: i64) -> Result<Verified, VerifyError> {
        verify(
            &[key(SECRET)],
            headers,
            body,
            now,
            crate::DEFAULT_TOLERANCE_SECS,
        )
    }

    fn vector() -> HeaderMap {
        headers("1531420618", SIGNATURE)
    }

    #[test]
    fn slack_docs_vector_verifies() {
        assert_eq!(check(&vector(), BODY, T), Ok(Verified { key_index: 0 }));
    }

    #[test]
    fn sign_reproduces_the_docs_vector() {
        assert_eq!(
            sign(&key(SECRET), T, BODY),
            vec![
                ("x-slack-request-timestamp", "1531420618".to_owned()),
                ("x-slack-signature", SIGNATURE.to_owned()),
            ]
        );
    }

    #[test]
    fn sign_then_verify_round_trips() {
        let k = key("another signing secret");
        let headers = signed_map(&sign(&k, 1_700_000_000, b"payload=%7B%7D"));
        assert_eq!(
            verify(&[k], &headers, b"payload=%7B%7D", 1_700_000_000, 300),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn tampering_one_body_byte_is_no_signature_matched() {
        let mut body = BODY.to_vec();
        body[0] ^= 1;
        assert_eq!(
            check(&vector(), &body, T),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn a_timestamp_changed_after_signing_is_no_signature_matched() {
        assert_eq!(
            check(&headers("1531420619", SIGNATURE), BODY, T),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn the_timestamp_is_signed_as_received() {
        // Leading zeros parse to the same second but are other bytes in the basestring.
        assert_eq!(
            check(&headers("01531420618", SIGNATURE), BODY, T),
            Err(VerifyError::NoSignatureMatched)
        );
        let k = key(SECRET);
        let tag = k.tag(&[b"v0:", b"01531420618", b":", BODY]);
        let signature = format!("v0={}", hex::encode(tag));
        assert_eq!(
            check(&headers("01531420618", &signature), BODY, T),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn exactly_tolerance_away_is_accepted_in_both_directions() {
        assert!(check(&vector(), BODY, T + 300).is_ok());
        assert!(check(&vector(), BODY, T - 300).is_ok());
    }

    #[test]
    fn one_second_beyond_tolerance_is_rejected_in_both_directions() {
        for now in [T + 301, T - 301] {
            assert_eq!(
                check(&vector(), BODY, now),
                Err(VerifyError::TimestampOutsideTolerance)
            );
        }
    }

    #[test]
    fn the_timestamp_is_checked_before_the_signature() {
        assert_eq!(
            check(&headers("1531420618", JUNK), BODY, T + 10_000),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn a_zero_tolerance_accepts_only_the_same_second() {
        assert!(verify(&[key(SECRET)], &vector(), BODY, T, 0).is_ok());
        assert_eq!(
            verify(&[key(SECRET)], &vector(), BODY, T - 1, 0),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn each_missing_header_is_reported_by_name() {
        assert_eq!(
            check(&header_map(&[("x-slack-signature", SIGNATURE)]), BODY, T),
            Err(VerifyError::MissingHeader(
                "x-slack-request-timestamp".into()
            ))
        );
        assert_eq!(
            check(
                &header_map(&[("x-slack-request-timestamp", "1531420618")]),
                BODY,
                T
            ),
            Err(VerifyError::MissingHeader("x-slack-signature".into()))
        );
        assert_eq!(
            check(&HeaderMap::new(), BODY, T),
            Err(VerifyError::MissingHeader("x-slack-signature".into()))
        );
    }

    #[test]
    fn a_duplicated_header_is_malformed_even_if_both_are_valid() {
        for (name, value) in [
            ("x-slack-signature", SIGNATURE),
            ("x-slack-request-timestamp", "1531420618"),
        ] {
            let mut headers = vector();
            headers.append(name, http::HeaderValue::from_static(value));
            assert_eq!(
                check(&headers, BODY, T),
                Err(VerifyError::MalformedHeader(name.into()))
            );
        }
    }

    #[test]
    fn malformed_signatures_are_malformed_header() {
        let digest = &SIGNATURE[3..];
        for value in [
            String::new(),
            "=".to_owned(),
            "v0=".to_owned(),
            "v0".to_owned(),
            digest.to_owned(),
            format!("v0{digest}"),
            format!("v1={digest}"),
            format!("V0={digest}"),
            format!("=v0={digest}"),
            format!("v0= {digest}"),
            format!(" v0={digest}"),
            format!("v0={digest} "),
            format!("v0={}", digest.to_ascii_uppercase()),
            format!("v0={}", &digest[..63]),
            format!("v0={digest}0"),
            format!("v0={}", digest.replace('a', "z")),
            format!("v0={digest},v0={digest}"),
            format!("v0={digest} v0={digest}"),
            format!("v0={}", "a".repeat(MAX_HEADER_LEN)),
        ] {
            assert_eq!(
                check(&headers("1531420618", &value), BODY, T),
                Err(VerifyError::MalformedHeader("x-slack-signature".into())),
                "{value:?}"
            );
        }
    }

    #[test]
    fn malformed_timestamps_are_malformed_header() {
        for timestamp in [
            "",
            "abc",
            "-1531420618",
            "+1531420618",
            " 1531420618",
            "1531420618 ",
            "1531420618.0",
            "1.531420618e9",
            "0x5b47a0ca",
            "99999999999999999999",
        ] {
            assert_eq!(
                check(&headers(timestamp, SIGNATURE), BODY, T),
                Err(VerifyError::MalformedHeader(
                    "x-slack-request-timestamp".into()
                )),
                "{timestamp:?}"
            );
        }
    }

    #[test]
    fn a_signature_header_over_eight_kib_is_malformed_before_the_timestamp_is_read() {
        let over = format!("v0={}", "a".repeat(MAX_HEADER_LEN));
        assert_eq!(
            check(&header_map(&[("x-slack-signature", &over)]), BODY, T),
            Err(VerifyError::MalformedHeader("x-slack-signature".into()))
        );
    }

    #[test]
    fn rotation_reports_the_index_of_the_key_that_matched() {
        let keys = [key("the new signing secret"), key(SECRET)];
        assert_eq!(
            verify(&keys, &vector(), BODY, T, 300),
            Ok(Verified { key_index: 1 })
        );
    }

    #[test]
    fn no_keys_is_no_keys() {
        assert_eq!(
            verify(&[], &vector(), BODY, T, 300),
            Err(VerifyError::NoKeys)
        );
    }

    #[test]
    fn an_empty_secret_is_refused() {
        assert_eq!(
            SigningKey::new(Scheme::Slack, "").unwrap_err(),
            KeyError::Empty
        );
    }

    proptest! {

        #[test]
        fn verify_never_panics_on_header_like_signatures(
            value in "(v0=)?[a-f0-9=A-Z ]{0,80}"
        ) {
            let keys = [SigningKey::new(Scheme::Slack, "a2V5").unwrap()];
            let _ = verify(&keys, &header_map(&[(SIGNATURE_HEADER, &value)]), b"{}", 0, 300);
        }

        #[test]
        fn verify_never_panics_on_arbitrary_headers_and_bodies(
            timestamp in proptest::collection::vec(any::<u8>(), 0..30),
            signature in proptest::collection::vec(any::<u8>(), 0..300),
            body in proptest::collection::vec(any::<u8>(), 0..300),
            now in any::<i64>(),
            tolerance in any::<u64>(),
        ) {
            let mut headers = HeaderMap::new();
            for (name, value) in [(TIMESTAMP_HEADER, timestamp), (SIGNATURE_HEADER, signature)] {
                if let Ok(value) = http::HeaderValue::from_bytes(&value) {
                    headers.insert(name, value);
                }
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
