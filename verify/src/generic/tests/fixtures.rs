//! What the generic scheme's tests share: published and derived vectors, and the configurations
//! and verifiers built from them.

use http::HeaderMap;

use crate::test_support::header_map;

use super::super::{Algorithm, Encoding, GenericHmac};
use crate::{Scheme, Verified, Verifier, VerifyError};

pub(super) const SECRET: &str = "It's a Secret to Everybody";
pub(super) const BODY: &[u8] = b"Hello, World!";
// HMAC of BODY under SECRET: the GitHub docs vector (SHA-256), derived with Python's hmac
// for SHA-512.
pub(super) const SHA256_HEX: &str =
    "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
pub(super) const SHA256_BASE64: &str = "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc=";
pub(super) const SHA512_HEX: &str =
    "11ed355a617e98134e842012a7944ccf59c10256cb182357bd7e3a42013ff07c\
                          376f8c14cf5cc1923da20b51d64256b2fb8ebbf100aa67a61326f61fea8111bc";
pub(super) const SHA512_BASE64: &str =
    "Ee01WmF+mBNOhCASp5RMz1nBAlbLGCNXvX46QgE/8Hw3b4wUz1zBkj2iC1HWQlay\
                             +4678QCqZ6YTJvYf6oERvA==";

// `{timestamp}.{body}` at T under TS_SECRET, derived with Python's hmac.
pub(super) const TS_SECRET: &str = "generic secret";
pub(super) const T: i64 = 1_700_000_000;
pub(super) const TS_BODY: &[u8] = br#"{"id":"evt_1"}"#;
pub(super) const TS_SHA512_BASE64: &str =
    "M0bmHx8nf8LrOdqF4kpe3jh2agvJG1Er67Q82j3xyJZ8TaSI/00O1LWycZdsN9AEm\
                                poMa+VyuM8BoJkzwqpN6w==";
pub(super) const TS_SHA256_HEX: &str =
    "8fe597c672bab8dd6b61fb348491c5929858b0c027230332c4a8b46a85b6815b";

/// The smallest valid configuration: `X-Signature` with hex HMAC-SHA256 of the body.
pub(super) fn minimal() -> GenericHmac {
    GenericHmac {
        signature_header: Some("X-Signature".to_owned()),
        algorithm: Algorithm::Sha256,
        encoding: Encoding::Hex,
        event_id_pointer: Some("/id".to_owned()),
        ..GenericHmac::default()
    }
}

/// `X-Timestamp` signed as `{timestamp}.{body}`, base64 HMAC-SHA512 after `v1=`.
pub(super) fn timestamped() -> GenericHmac {
    GenericHmac {
        algorithm: Algorithm::Sha512,
        encoding: Encoding::Base64,
        prefix: Some("v1=".to_owned()),
        timestamp_header: Some("X-Timestamp".to_owned()),
        signed_payload: Some("{timestamp}.{body}".to_owned()),
        ..minimal()
    }
}

pub(super) fn verifier(config: GenericHmac, secrets: &[&str]) -> Verifier {
    Verifier::new(Scheme::GenericHmac, secrets, 300, Some(config)).unwrap()
}

pub(super) fn with(algorithm: Algorithm, encoding: Encoding) -> GenericHmac {
    GenericHmac {
        algorithm,
        encoding,
        ..minimal()
    }
}

pub(super) fn timestamped_headers(t: &str, signature: &str) -> HeaderMap {
    header_map(&[("x-timestamp", t), ("x-signature", signature)])
}

pub(super) fn check_timestamped(
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Verified, VerifyError> {
    verifier(timestamped(), &[TS_SECRET]).verify(headers, body, now)
}

pub(super) fn vector() -> HeaderMap {
    timestamped_headers("1700000000", &format!("v1={TS_SHA512_BASE64}"))
}

pub(super) fn malformed_sig() -> Result<Verified, VerifyError> {
    Err(VerifyError::MalformedHeader("x-signature".into()))
}

pub(super) const COMBINATIONS: [(Algorithm, Encoding, &str); 4] = [
    (Algorithm::Sha256, Encoding::Hex, SHA256_HEX),
    (Algorithm::Sha256, Encoding::Base64, SHA256_BASE64),
    (Algorithm::Sha512, Encoding::Hex, SHA512_HEX),
    (Algorithm::Sha512, Encoding::Base64, SHA512_BASE64),
];
