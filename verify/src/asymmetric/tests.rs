//! Public keys in every accepted form, signing round trips, and vectors of Python's
//! `cryptography` (`verify/tests/vectors/asymmetric.json`, made by `generate.py` there): RSA
//! PKCS#1 v1.5, ECDSA P-256 in DER and fixed form, low-S and high-S.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use serde_json::Value;

use super::{PrivateKey, PublicKey, PublicKeyError, MIN_RSA_BITS};
use crate::algorithm::Algorithm;

const MESSAGE: &[u8] = b"1796301813{\"id\":\"evt_1\",\"type\":\"test\"}";

/// RFC 8032 test 1's secret key; its public key is `d75a9801...511a`.
const ED25519_SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const ED25519_PUBLIC: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

fn vectors() -> Value {
    serde_json::from_str(include_str!("../../tests/vectors/asymmetric.json")).unwrap()
}

fn vector_message() -> Vec<u8> {
    STANDARD
        .decode(vectors()["message_base64"].as_str().unwrap())
        .unwrap()
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

fn parse(algorithm: Algorithm, text: &str) -> PublicKey {
    PublicKey::parse(algorithm, text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn ed25519_signs_and_verifies_in_every_key_form() {
    let private = PrivateKey::parse(Algorithm::Ed25519, ED25519_SEED, None).unwrap();
    assert_eq!(private.algorithm(), Algorithm::Ed25519);
    let signature = private.sign(MESSAGE);
    assert_eq!(signature.len(), 64);
    let raw = hex::decode(ED25519_PUBLIC).unwrap();
    assert_eq!(private.public_key_base64(), STANDARD.encode(&raw));
    // SubjectPublicKeyInfo of an Ed25519 key: a fixed 12-byte header, then the key.
    let mut der = hex::decode("302a300506032b6570032100").unwrap();
    der.extend_from_slice(&raw);
    let forms = [
        ED25519_PUBLIC.to_owned(),
        ED25519_PUBLIC.to_ascii_uppercase(),
        STANDARD.encode(&raw),
        URL_SAFE_NO_PAD.encode(&raw),
        STANDARD.encode(&der),
        pem("PUBLIC KEY", &der),
        format!("  {}\n", pem("PUBLIC KEY", &der)),
    ];
    for form in forms {
        let key = parse(Algorithm::Ed25519, &form);
        assert!(key.verifies(MESSAGE, &signature), "{form}");
        let mut flipped = signature.clone();
        flipped[10] ^= 1;
        assert!(!key.verifies(MESSAGE, &flipped), "{form}");
        assert!(!key.verifies(b"other", &signature), "{form}");
        assert!(!key.verifies(MESSAGE, &signature[..63]), "{form}");
    }
    // RFC 8032 test 1: the empty message.
    let rfc = hex::decode(
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    )
    .unwrap();
    assert_eq!(private.sign(b""), rfc);
    assert!(parse(Algorithm::Ed25519, ED25519_PUBLIC).verifies(b"", &rfc));
}

#[test]
fn the_private_key_forms_agree() {
    let seed = hex::decode(ED25519_SEED).unwrap();
    let hex_key = PrivateKey::parse(Algorithm::Ed25519, ED25519_SEED, None).unwrap();
    let b64_key = PrivateKey::parse(
        Algorithm::Ed25519,
        &format!("whsk_{}", STANDARD.encode(&seed)),
        Some("whsk_"),
    )
    .unwrap();
    assert_eq!(hex_key.sign(MESSAGE), b64_key.sign(MESSAGE));
    assert!(PrivateKey::parse(Algorithm::RsaPkcs1Sha256, ED25519_SEED, None).is_err());
    assert!(PrivateKey::parse(Algorithm::Sha256, ED25519_SEED, None).is_err());
    assert!(PrivateKey::parse(Algorithm::Ed25519, "abcd", None).is_err());
    let debug = format!("{hex_key:?}");
    assert!(!debug.contains("9d61"), "{debug}");
}

#[test]
fn p256_signs_and_verifies_in_every_key_form() {
    let scalar = "c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721";
    let private = PrivateKey::parse(Algorithm::EcdsaP256Sha256, scalar, None).unwrap();
    let der_signature = private.sign(MESSAGE);
    let parsed = p256::ecdsa::Signature::from_der(&der_signature).unwrap();
    let fixed = parsed.to_bytes().to_vec();
    assert_eq!(fixed.len(), 64);
    let spki = STANDARD
        .decode(private.public_key_base64())
        .expect("base64 DER");
    let verifying = p256::ecdsa::VerifyingKey::from_public_key_der_for_test(&spki);
    let uncompressed = verifying.to_sec1_point(false).as_bytes().to_vec();
    let compressed = verifying.to_sec1_point(true).as_bytes().to_vec();
    assert_eq!(uncompressed.len(), 65);
    assert_eq!(compressed.len(), 33);
    let forms = [
        private.public_key_base64(),
        URL_SAFE_NO_PAD.encode(&spki),
        pem("PUBLIC KEY", &spki),
        STANDARD.encode(&uncompressed),
        STANDARD.encode(&compressed),
    ];
    for form in forms {
        let key = parse(Algorithm::EcdsaP256Sha256, &form);
        assert!(key.verifies(MESSAGE, &der_signature), "DER, {form}");
        assert!(key.verifies(MESSAGE, &fixed), "fixed, {form}");
        assert!(!key.verifies(b"other", &der_signature), "{form}");
        let mut flipped = fixed.clone();
        flipped[40] ^= 1;
        assert!(!key.verifies(MESSAGE, &flipped), "{form}");
    }
    // The P-256 key is no Ed25519 or RSA key, and the reverse.
    assert!(PublicKey::parse(Algorithm::Ed25519, &private.public_key_base64()).is_err());
    assert!(PublicKey::parse(Algorithm::RsaPkcs1Sha256, &private.public_key_base64()).is_err());
    assert!(PublicKey::parse(Algorithm::EcdsaP256Sha256, ED25519_PUBLIC).is_err());
}

/// A P-256 public key from its DER (the test's own reading, beside the crate's).
trait FromDerForTest {
    fn from_public_key_der_for_test(der: &[u8]) -> Self;
}

impl FromDerForTest for p256::ecdsa::VerifyingKey {
    fn from_public_key_der_for_test(der: &[u8]) -> Self {
        use p256::pkcs8::DecodePublicKey as _;
        Self::from_public_key_der(der).unwrap()
    }
}

#[test]
fn python_cryptography_ecdsa_signatures_verify_low_s_and_high_s() {
    let v = vectors();
    let message = vector_message();
    let p256 = &v["p256"];
    let keys = [
        parse(
            Algorithm::EcdsaP256Sha256,
            p256["public_pem"].as_str().unwrap(),
        ),
        parse(
            Algorithm::EcdsaP256Sha256,
            p256["public_der_base64"].as_str().unwrap(),
        ),
    ];
    let signatures = p256["signatures"].as_array().unwrap();
    assert!(signatures.iter().any(|s| s["high_s"] == true));
    assert!(signatures.iter().any(|s| s["high_s"] == false));
    for signature in signatures {
        let der = STANDARD
            .decode(signature["der_base64"].as_str().unwrap())
            .unwrap();
        let fixed = hex::decode(signature["raw_hex"].as_str().unwrap()).unwrap();
        for key in &keys {
            // cryptography (OpenSSL) and SendGrid's library accept high-S: so do we.
            assert!(key.verifies(&message, &der), "DER {signature}");
            assert!(key.verifies(&message, &fixed), "fixed {signature}");
            let mut flipped = der.clone();
            let last = flipped.len() - 1;
            flipped[last] ^= 1;
            assert!(!key.verifies(&message, &flipped));
            assert!(!key.verifies(b"other", &der));
        }
    }
}

#[test]
fn python_cryptography_rsa_2048_verifies_and_a_flipped_bit_does_not() {
    let v = vectors();
    let message = vector_message();
    let rsa = &v["rsa2048"];
    let signature = STANDARD
        .decode(rsa["signature_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(signature.len(), 256);
    for form in ["public_pem", "public_pkcs1_pem", "public_der_base64"] {
        let key = parse(Algorithm::RsaPkcs1Sha256, rsa[form].as_str().unwrap());
        assert!(key.verifies(&message, &signature), "{form}");
        for bit in [0, 1000, 2047] {
            let mut flipped = signature.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(!key.verifies(&message, &flipped), "{form} bit {bit}");
        }
        let mut other = message.clone();
        other.push(b'\n');
        assert!(!key.verifies(&other, &signature), "{form}");
        assert!(!key.verifies(&message, &signature[..255]), "{form}");
        assert!(!key.verifies(&message, &[]), "{form}");
    }
}

#[test]
fn rsa_keys_below_2048_bits_are_refused_in_every_form() {
    let v = vectors();
    let pem_text = v["rsa1024_public_pem"].as_str().unwrap();
    assert_eq!(
        PublicKey::parse(Algorithm::RsaPkcs1Sha256, pem_text).map(|_| ()),
        Err(PublicKeyError::RsaSize(1024))
    );
    let der: String = pem_text
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    assert_eq!(
        PublicKey::parse(Algorithm::RsaPkcs1Sha256, &der).map(|_| ()),
        Err(PublicKeyError::RsaSize(1024))
    );
    assert_eq!(MIN_RSA_BITS, 2048);
    // Through the configured-key path, the error says why without the key.
    let error = crate::SigningKey::for_algorithm(
        Algorithm::RsaPkcs1Sha256,
        pem_text,
        crate::SecretEncoding::Utf8,
        None,
    )
    .unwrap_err();
    assert!(error.to_string().contains("1024 bits"), "{error}");
    assert!(!error.to_string().contains("MIG"), "{error}");
}

#[test]
fn hmac_algorithms_have_no_public_keys() {
    for algorithm in [Algorithm::Sha1, Algorithm::Sha256, Algorithm::Sha512] {
        assert!(PublicKey::parse(algorithm, ED25519_PUBLIC).is_err());
    }
}

#[test]
fn garbage_keys_and_signatures_never_panic() {
    let keys = [
        parse(Algorithm::Ed25519, ED25519_PUBLIC),
        parse(
            Algorithm::EcdsaP256Sha256,
            vectors()["p256"]["public_der_base64"].as_str().unwrap(),
        ),
        parse(
            Algorithm::RsaPkcs1Sha256,
            vectors()["rsa2048"]["public_pem"].as_str().unwrap(),
        ),
    ];
    let signatures: [&[u8]; 6] = [&[], &[0], &[0; 64], &[0xff; 64], &[0x30; 72], &[0xff; 512]];
    for key in &keys {
        for signature in signatures {
            assert!(!key.verifies(MESSAGE, signature), "{key:?}");
        }
    }
    for algorithm in Algorithm::ALL {
        for text in ["", " ", "-----BEGIN PUBLIC KEY-----", "====", "zz", "AAAA"] {
            assert!(
                PublicKey::parse(algorithm, text).is_err(),
                "{algorithm:?} {text:?}"
            );
        }
    }
}
