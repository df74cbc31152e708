//! The targets of the scheme model's public-key algorithms and of the model itself:
//! `ed25519`, `ecdsa_p256`, `rsa` (key text, signature and message from the fuzzer, through a
//! model source's [`Verifier`]) and `scheme_model` (a [`GenericHmac`] from the fuzzer's JSON,
//! validated, then a delivery verified and extracted with it).

use std::sync::LazyLock;

use hookledger_verify::extract::extract;
use hookledger_verify::{Algorithm, Encoding, GenericHmac, Request, Scheme, Verifier};
use http::{HeaderMap, HeaderValue};

use crate::{parse_delivery, NOW};

/// The URL every model target's request was sent to.
pub const URL: &str = "https://hooks.example.com/webhooks/model?x=1";

/// The public-key vectors of `verify/tests/vectors/asymmetric.json`, compiled in.
static VECTORS: LazyLock<serde_json::Value> = LazyLock::new(|| {
    serde_json::from_str(include_str!(
        "../../../verify/tests/vectors/asymmetric.json"
    ))
    .unwrap_or_else(|error| panic!("asymmetric.json does not parse: {error}"))
});

/// A valid public key of `algorithm` (RFC 8032's test key for Ed25519, the vectors' keys
/// otherwise); `None` for an HMAC.
pub fn fixed_public_key(algorithm: Algorithm) -> Option<&'static str> {
    match algorithm {
        Algorithm::Ed25519 => {
            Some("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        }
        Algorithm::EcdsaP256Sha256 => VECTORS["p256"]["public_der_base64"].as_str(),
        Algorithm::RsaPkcs1Sha256 => VECTORS["rsa2048"]["public_pem"].as_str(),
        Algorithm::Sha1 | Algorithm::Sha256 | Algorithm::Sha512 | Algorithm::Token => None,
    }
}

/// The model of the public-key targets: `x-signature` (base64) over `{body}`.
fn public_key_model(algorithm: Algorithm) -> GenericHmac {
    GenericHmac {
        signature_header: Some("x-signature".into()),
        algorithm,
        encoding: Encoding::Base64,
        event_id_pointer: Some("/id".into()),
        ..GenericHmac::default()
    }
}

/// `data` as three parts: the key text (first line), the signature (second line, base64) and
/// the message (the rest). Missing parts are empty.
fn three_parts(data: &[u8]) -> (&[u8], &[u8], &[u8]) {
    let mut parts = data.splitn(3, |b| *b == b'\n');
    let key = parts.next().unwrap_or_default();
    let signature = parts.next().unwrap_or_default();
    let message = parts.next().unwrap_or_default();
    (key, signature, message)
}

/// Verifies `message` signed `signature` with the key text, and with the fixed key of
/// `algorithm`; neither must panic, and the fixed key must not accept a one-byte-longer message
/// it accepted.
fn public_key_target(algorithm: Algorithm, data: &[u8]) {
    let (key_text, signature, message) = three_parts(data);
    let key_text = String::from_utf8_lossy(key_text);
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_bytes(signature) {
        headers.insert("x-signature", value);
    }
    let fixed = fixed_public_key(algorithm).unwrap_or_default();
    for key in [key_text.as_ref(), fixed] {
        let Ok(verifier) = Verifier::new(
            Scheme::GenericHmac,
            &[key],
            300,
            Some(public_key_model(algorithm)),
        ) else {
            continue;
        };
        let request = Request {
            method: "POST",
            url: URL,
            headers: &headers,
            body: message,
        };
        if verifier.verify_request(&request, NOW).is_ok() {
            let mut longer = message.to_vec();
            longer.push(b' ');
            let request = Request {
                body: &longer,
                ..request
            };
            assert!(
                verifier.verify_request(&request, NOW).is_err(),
                "{algorithm:?}: a signature still verifies with a byte appended"
            );
        }
    }
}

/// Target `ed25519`: key text / base64 signature / message, Ed25519.
pub fn ed25519(data: &[u8]) {
    public_key_target(Algorithm::Ed25519, data);
}

/// Target `ecdsa_p256`: key text / base64 signature (DER or 64 bytes) / message, ECDSA P-256.
pub fn ecdsa_p256(data: &[u8]) {
    public_key_target(Algorithm::EcdsaP256Sha256, data);
}

/// Target `rsa`: key text / base64 signature / message, RSA PKCS#1 v1.5 SHA-256.
pub fn rsa(data: &[u8]) {
    public_key_target(Algorithm::RsaPkcs1Sha256, data);
}

/// Target `scheme_model`: the bytes up to the first `\n===\n` as a [`GenericHmac`] (JSON); if
/// it validates, a source of it (the secret `model-secret`, or the algorithm's fixed public
/// key) verifies and extracts the delivery after the separator (see [`parse_delivery`]), at
/// several clocks. Nothing may panic; a model that validates must build a verifier.
pub fn scheme_model(data: &[u8]) {
    const SEPARATOR: &[u8] = b"\n===\n";
    let (json, delivery) = match data.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
        Some(at) => (&data[..at], &data[at + SEPARATOR.len()..]),
        None => (data, &b""[..]),
    };
    let Ok(model) = serde_json::from_slice::<GenericHmac>(json) else {
        return;
    };
    if model.validate().is_err() {
        return;
    }
    let _ = model.signs_id_and_type();
    let secret = fixed_public_key(model.algorithm).unwrap_or("model-secret");
    let verifier = match Verifier::new(Scheme::GenericHmac, &[secret], 300, Some(model.clone())) {
        Ok(verifier) => verifier,
        // A key prefix the secret does not carry is stripped only when present; an HMAC
        // secret encoded as base64 or hex may not decode: those are configuration errors.
        Err(_) if !model.algorithm.is_public_key() => return,
        Err(error) => panic!("a valid public-key model refused its fixed key: {error}"),
    };
    let (headers, body) = parse_delivery(delivery);
    for now in [NOW, 0, i64::MIN, i64::MAX] {
        let request = Request {
            method: "POST",
            url: URL,
            headers: &headers,
            body,
        };
        if let Err(error) = verifier.verify_request(&request, now) {
            assert!(!error.reason().is_empty());
        }
        let empty_url = Request { url: "", ..request };
        let _ = verifier.verify_request(&empty_url, now);
    }
    let _ = extract(Scheme::GenericHmac, verifier.generic(), &headers, body);
    let _ = verifier.sign(0, "msg_1", NOW, body);
}
