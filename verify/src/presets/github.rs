//! GitHub: the `X-Hub-Signature-256` header (a preset of the scheme model).
//!
//! Source: GitHub docs, "Validating webhook deliveries"
//! (docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries):
//!
//! - header `X-Hub-Signature-256: sha256=<hex>`;
//! - signature: lowercase hex of HMAC-SHA256 keyed with the webhook secret's bytes, over the
//!   raw body;
//! - no timestamp is signed, so there is no tolerance (the legacy SHA-1 `X-Hub-Signature` header
//!   is not read).
//! - The id and type are the `X-GitHub-Delivery` and `X-GitHub-Event` headers (not signed: the
//!   ledger keeps one event per body), and a form-encoded delivery's document is its `payload`
//!   field: read by [`crate::extract::extract`].

use super::Preset;
use crate::generic::GenericHmac;
use crate::Scheme;

/// The signature header's name, lowercase.
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";

pub(super) fn preset() -> Preset {
    Preset {
        model: Some(GenericHmac {
            signature_header: Some("X-Hub-Signature-256".into()),
            prefix: Some("sha256=".into()),
            strict_encoding: true,
            ..GenericHmac::default()
        }),
        ..Preset::row(
            Scheme::Github,
            "GitHub",
            "HMAC-SHA256 of the body (`X-Hub-Signature-256: sha256=...`)",
            "header `X-GitHub-Delivery` (not signed)",
            "header `X-GitHub-Event` (not signed)",
            72,
            true,
            "https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{header_map, signed_map};
    use crate::{SigningKey, Verified, VerifyError, MAX_HEADER_LEN};
    use http::HeaderMap;

    crate::test_support::preset_test_fns!(Scheme::Github);

    /// The preset's signature headers.
    fn sign(key: &SigningKey, body: &[u8]) -> Vec<(&'static str, String)> {
        sign_as(key, "", 0, body)
    }
    use proptest::prelude::*;

    const SECRET: &str = "It's a Secret to Everybody";
    const BODY: &[u8] = b"Hello, World!";
    const DIGEST: &str = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    fn key(secret: &str) -> SigningKey {
        SigningKey::new(Scheme::Github, secret).unwrap()
    }

    fn check(value: &str, body: &[u8]) -> Result<Verified, VerifyError> {
        let headers = header_map(&[("X-Hub-Signature-256", value)]);
        verify(&[key(SECRET)], &headers, body, 0, 0)
    }

    // Vectors: the published github vectors, copied here.

    #[test]
    fn github_docs_vector_verifies() {
        assert_eq!(
            check(&format!("sha256={DIGEST}"), BODY),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn github_vector_with_a_sha1_prefix_is_malformed() {
        assert_eq!(
            check(&format!("sha1={DIGEST}"), BODY),
            Err(VerifyError::MalformedHeader("x-hub-signature-256".into()))
        );
    }

    #[test]
    fn sign_reproduces_the_docs_vector() {
        assert_eq!(
            sign(&key(SECRET), BODY),
            vec![("x-hub-signature-256", format!("sha256={DIGEST}"))]
        );
    }

    #[test]
    fn sign_then_verify_round_trips() {
        let k = key("another secret");
        let headers = signed_map(&sign(&k, b"{\"zen\":\"Keep it logically awesome.\"}"));
        assert_eq!(
            verify(
                &[k],
                &headers,
                b"{\"zen\":\"Keep it logically awesome.\"}",
                0,
                0
            ),
            Ok(Verified { key_index: 0 })
        );
    }

    #[test]
    fn tampering_one_body_byte_is_no_signature_matched() {
        assert_eq!(
            check(&format!("sha256={DIGEST}"), b"Hello, World?"),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn time_plays_no_part() {
        let headers = header_map(&[("x-hub-signature-256", &format!("sha256={DIGEST}"))]);
        for (now, tolerance) in [(i64::MIN, 0), (0, 0), (i64::MAX, u64::MAX)] {
            assert_eq!(
                verify(&[key(SECRET)], &headers, BODY, now, tolerance),
                Ok(Verified { key_index: 0 })
            );
        }
    }

    #[test]
    fn a_missing_header_is_missing_x_hub_signature_256() {
        let headers = header_map(&[("x-hub-signature", "sha1=0123")]);
        assert_eq!(
            verify(&[key(SECRET)], &headers, BODY, 0, 0),
            Err(VerifyError::MissingHeader("x-hub-signature-256".into()))
        );
    }

    #[test]
    fn a_duplicated_header_is_malformed_even_if_both_are_valid() {
        let value = format!("sha256={DIGEST}");
        let headers = header_map(&[
            ("x-hub-signature-256", &value),
            ("X-Hub-Signature-256", &value),
        ]);
        assert_eq!(
            verify(&[key(SECRET)], &headers, BODY, 0, 0),
            Err(VerifyError::MalformedHeader("x-hub-signature-256".into()))
        );
    }

    #[test]
    fn malformed_values_are_malformed_header() {
        for value in [
            String::new(),
            "=".to_owned(),
            "sha256=".to_owned(),
            DIGEST.to_owned(),
            format!("sha256{DIGEST}"),
            format!("SHA256={DIGEST}"),
            format!("sha512={DIGEST}"),
            format!("=sha256={DIGEST}"),
            format!("sha256= {DIGEST}"),
            format!(" sha256={DIGEST}"),
            format!("sha256={DIGEST} "),
            format!("sha256={}", DIGEST.to_ascii_uppercase()),
            format!("sha256={}", &DIGEST[..63]),
            format!("sha256={DIGEST}0"),
            format!("sha256={DIGEST}00"),
            format!("sha256={}", DIGEST.replace('e', "x")),
            format!("sha256={DIGEST},sha256={DIGEST}"),
            format!("sha256={}", "a".repeat(MAX_HEADER_LEN)),
        ] {
            assert_eq!(
                check(&value, BODY),
                Err(VerifyError::MalformedHeader("x-hub-signature-256".into())),
                "{value:?}"
            );
        }
    }

    #[test]
    fn rotation_reports_the_index_of_the_key_that_matched() {
        let keys = [key("the new secret"), key(SECRET)];
        let headers = header_map(&[("x-hub-signature-256", &format!("sha256={DIGEST}"))]);
        assert_eq!(
            verify(&keys, &headers, BODY, 0, 0),
            Ok(Verified { key_index: 1 })
        );
    }

    #[test]
    fn no_keys_is_no_keys() {
        let headers = header_map(&[("x-hub-signature-256", &format!("sha256={DIGEST}"))]);
        assert_eq!(verify(&[], &headers, BODY, 0, 0), Err(VerifyError::NoKeys));
    }

    proptest! {

        #[test]
        fn verify_never_panics_on_header_like_strings(value in "(sha256=)?[a-f0-9=A-Z ]{0,80}") {
            let keys = [SigningKey::new(Scheme::Github, "a2V5").unwrap()];
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
