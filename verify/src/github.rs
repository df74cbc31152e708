//! GitHub's signing scheme: the `X-Hub-Signature-256` header, its parser, verify and sign.
//!
//! Source: GitHub docs, "Validating webhook deliveries"
//! (docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries):
//!
//! - header `X-Hub-Signature-256: sha256=<hex>`;
//! - signature: lowercase hex of HMAC-SHA256 keyed with the webhook secret's bytes, over the
//!   raw body;
//! - no timestamp is signed, so there is no tolerance (the legacy SHA-1 `X-Hub-Signature` header
//!   is not read).

use http::HeaderMap;

use crate::header::single_header;
use crate::key::{first_matching_key, SigningKey};
use crate::outcome::{Verified, VerifyError};
use crate::tag::{decode_lower_hex, Tag};

/// Name of GitHub's SHA-256 signature header, lowercase (`X-Hub-Signature-256`).
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";

/// The algorithm label GitHub puts before the hex digest in [`SIGNATURE_HEADER`].
const ALGORITHM: &str = "sha256";

/// A parsed `X-Hub-Signature-256` value: the decoded digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GithubSignature(Tag);

/// Parse an `X-Hub-Signature-256` value: `sha256=` followed by exactly 64 lowercase hex digits.
///
/// `None` (malformed) for anything else: no `=`, another label (`sha1=`, `SHA256=`), whitespace,
/// uppercase or non-hex digits, a wrong length, several digests.
fn parse_signature(value: &str) -> Option<GithubSignature> {
    let (algorithm, digest) = value.split_once('=')?;
    if algorithm != ALGORITHM {
        return None;
    }
    decode_lower_hex(digest).map(GithubSignature)
}

/// Verify a GitHub delivery: `body` is the exact raw bytes received.
///
/// Reads `X-Hub-Signature-256` (exactly once), parses it, and compares HMAC-SHA256(key, body)
/// of every key with the digest in constant time. `_now` and `_tolerance_secs` are ignored
/// (GitHub signs no timestamp); they keep the signature uniform with the other schemes.
///
/// # Errors
///
/// - [`VerifyError::NoKeys`]: `keys` is empty;
/// - [`VerifyError::MissingHeader`]`("x-hub-signature-256")`: header absent (a delivery with
///   only the legacy SHA-1 `X-Hub-Signature` is rejected this way);
/// - [`VerifyError::MalformedHeader`]`("x-hub-signature-256")`: repeated, over
///   [`super::MAX_HEADER_LEN`] bytes, not visible ASCII, or not `sha256=<64 lowercase hex>`
///   (a `sha1=` label included);
/// - [`VerifyError::NoSignatureMatched`]: the digest matches no key.
pub fn verify(
    keys: &[SigningKey],
    headers: &HeaderMap,
    body: &[u8],
    _now: i64,
    _tolerance_secs: u64,
) -> Result<Verified, VerifyError> {
    if keys.is_empty() {
        return Err(VerifyError::NoKeys);
    }
    let value = single_header(headers, SIGNATURE_HEADER)?
        .ok_or(VerifyError::MissingHeader(SIGNATURE_HEADER.into()))?;
    let GithubSignature(digest) =
        parse_signature(value).ok_or(VerifyError::MalformedHeader(SIGNATURE_HEADER.into()))?;
    first_matching_key(keys, &[body], &[digest])
}

/// Sign `body` as GitHub does.
///
/// Returns one pair: `("x-hub-signature-256", "sha256=<64 lowercase hex>")`.
#[must_use]
pub fn sign(key: &SigningKey, body: &[u8]) -> Vec<(&'static str, String)> {
    let tag = key.tag(&[body]);
    vec![(
        SIGNATURE_HEADER,
        format!("{ALGORITHM}={}", hex::encode(tag)),
    )]
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{header_map, signed_map};
    use super::super::{Scheme, MAX_HEADER_LEN};
    use super::*;
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

    #[test]
    fn parse_decodes_the_digest() {
        let GithubSignature(digest) = parse_signature(&format!("sha256={DIGEST}")).unwrap();
        assert_eq!(hex::encode(digest), DIGEST);
    }

    proptest! {
        #[test]
        fn the_parser_never_panics(value in any::<String>()) {
            let _ = parse_signature(&value);
        }

        #[test]
        fn the_parser_never_panics_on_header_like_strings(value in "(sha256=)?[a-f0-9=A-Z ]{0,80}") {
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
        fn sign_then_verify_round_trips_any_body(
            body in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let k = key(SECRET);
            let headers = signed_map(&sign(&k, &body));
            prop_assert_eq!(verify(&[k], &headers, &body, 0, 0), Ok(Verified { key_index: 0 }));
        }
    }
}
