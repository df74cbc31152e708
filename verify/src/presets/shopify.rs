//! Shopify: the `X-Shopify-Hmac-Sha256` header (a preset of the scheme model).
//!
//! Source: Shopify's developer docs on HTTPS webhook delivery, "Verify the webhook"
//! (shopify.dev, apps/build/webhooks), whose Ruby example compares the header with
//! `Base64.strict_encode64(OpenSSL::HMAC.digest('sha256', CLIENT_SECRET, data))`:
//!
//! - header `X-Shopify-Hmac-Sha256: <base64>`: padded standard base64 (44 characters) of the
//!   32-byte digest; one digest, no label, no list;
//! - signature: HMAC-SHA256 keyed with the app's client secret (UTF-8 bytes), over the raw body;
//! - no timestamp is signed, so there is no tolerance (`X-Shopify-Triggered-At` is not signed
//!   and is not read).
//! - The id is `X-Shopify-Event-Id`, else `X-Shopify-Webhook-Id`, and the type
//!   `X-Shopify-Topic` (not signed: the ledger keeps one event per body), read by
//!   [`crate::extract::extract`].

use super::Preset;
use crate::generic::{Encoding, GenericHmac};
use crate::Scheme;

/// The signature header's name, lowercase.
pub const SIGNATURE_HEADER: &str = "x-shopify-hmac-sha256";

pub(super) fn preset() -> Preset {
    Preset {
        model: Some(GenericHmac {
            signature_header: Some("X-Shopify-Hmac-Sha256".into()),
            encoding: Encoding::Base64,
            strict_encoding: true,
            ..GenericHmac::default()
        }),
        ..Preset::row(
            Scheme::Shopify,
            "Shopify",
            "HMAC-SHA256 of the body (`X-Shopify-Hmac-Sha256`, base64)",
            "header `X-Shopify-Event-Id` (not signed)",
            "header `X-Shopify-Topic` (not signed)",
            4,
            false,
            "https://shopify.dev/docs/apps/build/webhooks/subscribe/https",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{header_map, signed_map};
    use crate::{KeyError, SigningKey, Verified, VerifyError, MAX_HEADER_LEN};
    use http::HeaderMap;

    crate::test_support::preset_test_fns!(Scheme::Shopify);

    /// The preset's signature headers.
    fn sign(key: &SigningKey, body: &[u8]) -> Vec<(&'static str, String)> {
        sign_as(key, "", 0, body)
    }
    use proptest::prelude::*;

    // Vectors: the published shopify vectors, copied here. The digest is the GitHub docs
    // vector's, in base64.
    const SECRET: &str = "It's a Secret to Everybody";
    const BODY: &[u8] = b"Hello, World!";
    const DIGEST: &str = "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc=";
    const HEX_DIGEST: &str = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    /// A valid-looking digest that matches nothing.
    const JUNK: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

    fn key(secret: &str) -> SigningKey {
        SigningKey::new(Scheme::Shopify, secret).unwrap()
    }

    fn check(value: &str, body: &[u8]) -> Result<Verified, VerifyError> {
        let headers = header_map(&[("X-Shopify-Hmac-Sha256", value)]);
        verify(&[key(SECRET)], &headers, body, 0, 0)
    }

    fn malformed() -> Result<Verified, VerifyError> {
        Err(VerifyError::MalformedHeader("x-shopify-hmac-sha256".into()))
    }

    #[test]
    fn shopify_derived_vector_verifies() {
        assert_eq!(check(DIGEST, BODY), Ok(Verified { key_index: 0 }));
    }

    #[test]
    fn shopify_vector_with_a_hex_digest_instead_of_base64_is_malformed() {
        assert_eq!(check(HEX_DIGEST, BODY), malformed());
    }

    #[test]
    fn sign_reproduces_the_vector() {
        assert_eq!(
            sign(&key(SECRET), BODY),
            vec![("x-shopify-hmac-sha256", DIGEST.to_owned())]
        );
    }

    #[test]
    fn sign_then_verify_round_trips() {
        let k = key("shpss_another_client_secret");
        let body = br#"{"id":820982911946154508,"email":"jon@example.com"}"#;
        let headers = signed_map(&sign(&k, body));
        assert_eq!(
            verify(&[k], &headers, body, 0, 0),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn tampering_one_body_byte_is_no_signature_matched() {
        assert_eq!(
            check(DIGEST, b"Hello, World?"),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn tampering_one_digest_character_is_no_signature_matched() {
        assert_eq!(
            check("dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhY=", BODY),
            Err(VerifyError::NoSignatureMatched)
        );
        assert_eq!(check(JUNK, BODY), Err(VerifyError::NoSignatureMatched));
    }

    #[test]
    fn time_plays_no_part() {
        let headers = header_map(&[("x-shopify-hmac-sha256", DIGEST)]);
        for (now, tolerance) in [(i64::MIN, 0), (0, 0), (i64::MAX, u64::MAX)] {
            assert_eq!(
                verify(&[key(SECRET)], &headers, BODY, now, tolerance),
                Ok(Verified { key_index: 0 })
            );
        }
    }

    #[test]
    fn a_missing_header_is_missing_x_shopify_hmac_sha256() {
        let headers = header_map(&[("x-hub-signature-256", &format!("sha256={HEX_DIGEST}"))]);
        assert_eq!(
            verify(&[key(SECRET)], &headers, BODY, 0, 0),
            Err(VerifyError::MissingHeader("x-shopify-hmac-sha256".into()))
        );
    }

    #[test]
    fn the_header_name_is_case_insensitive() {
        for name in ["x-shopify-hmac-sha256", "X-SHOPIFY-HMAC-SHA256"] {
            let headers = header_map(&[(name, DIGEST)]);
            assert!(
                verify(&[key(SECRET)], &headers, BODY, 0, 0).is_ok(),
                "{name}"
            );
        }
    }

    #[test]
    fn a_duplicated_header_is_malformed_even_if_both_are_valid() {
        let headers = header_map(&[
            ("x-shopify-hmac-sha256", DIGEST),
            ("X-Shopify-Hmac-Sha256", DIGEST),
        ]);
        assert_eq!(verify(&[key(SECRET)], &headers, BODY, 0, 0), malformed());
    }

    #[test]
    fn malformed_values_are_malformed_header() {
        for value in [
            String::new(),
            "=".to_owned(),
            DIGEST.trim_end_matches('=').to_owned(),
            format!("{DIGEST}="),
            format!("{DIGEST}A"),
            format!(" {DIGEST}"),
            format!("{DIGEST} "),
            DIGEST.replace('/', "_"),
            DIGEST.replace('/', "!"),
            format!("sha256={DIGEST}"),
            format!("{DIGEST},{DIGEST}"),
            format!("{DIGEST} {DIGEST}"),
            DIGEST[..40].to_owned(),
            "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhd=".to_owned(),
            "A".repeat(MAX_HEADER_LEN + 1),
        ] {
            assert_eq!(check(&value, BODY), malformed(), "{value:?}");
        }
    }

    #[test]
    fn rotation_reports_the_index_of_the_key_that_matched() {
        let keys = [key("the new secret"), key(SECRET)];
        let headers = header_map(&[("x-shopify-hmac-sha256", DIGEST)]);
        assert_eq!(
            verify(&keys, &headers, BODY, 0, 0),
            Ok(Verified { key_index: 1 })
        );
    }

    #[test]
    fn no_keys_is_no_keys() {
        let headers = header_map(&[("x-shopify-hmac-sha256", DIGEST)]);
        assert_eq!(verify(&[], &headers, BODY, 0, 0), Err(VerifyError::NoKeys));
    }

    #[test]
    fn an_empty_secret_is_refused() {
        assert_eq!(
            SigningKey::new(Scheme::Shopify, "").unwrap_err(),
            KeyError::Empty
        );
    }

    proptest! {

        #[test]
        fn verify_never_panics_on_header_like_strings(value in "[A-Za-z0-9+/=_ -]{0,60}") {
            let keys = [SigningKey::new(Scheme::Shopify, "a2V5").unwrap()];
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
        fn sign_then_verify_round_trips_any_body(
            body in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let k = key(SECRET);
            let headers = signed_map(&sign(&k, &body));
            prop_assert_eq!(verify(&[k], &headers, &body, 0, 0), Ok(Verified { key_index: 0 }));
        }
    }
}
