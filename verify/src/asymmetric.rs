//! Public-key signatures: a provider's public key as configured ([`PublicKey`], parsed once at
//! start-up) and its verification; and [`PrivateKey`], which signs as such a provider does (for
//! tests, the demo and the local dev tool; a deployment never holds one).
//!
//! Key formats accepted (after an optional configured prefix such as Standard Webhooks'
//! `whpk_` is stripped):
//!
//! - PEM: `-----BEGIN PUBLIC KEY-----` (SubjectPublicKeyInfo, RFC 5280) for every algorithm, and
//!   `-----BEGIN RSA PUBLIC KEY-----` (PKCS#1) for RSA;
//! - hex: an Ed25519 key as 64 hex digits (Discord's "public key" in the developer portal);
//! - base64 (standard or URL-safe alphabet, padding optional) of: the 32 raw bytes of an Ed25519
//!   key (Standard Webhooks `whpk_`), the DER SubjectPublicKeyInfo of any key (SendGrid's
//!   "verification key"), a SEC1 point for P-256 (65 or 33 bytes), or a PKCS#1 RSA key.

use base64::alphabet;
use base64::engine::general_purpose::GeneralPurpose;
use base64::engine::{DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine as _;

use crate::algorithm::Algorithm;

#[cfg(test)]
mod tests;

/// Base64 for configured keys: padding optional; the URL-safe alphabet is tried when the
/// standard one fails. Leniency here concerns our own configuration only.
const KEY_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);
const KEY_BASE64_URL: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Smallest RSA modulus accepted, bits (NIST SP 800-131A: 2048).
pub const MIN_RSA_BITS: usize = 2048;

/// Largest RSA modulus accepted, bits: bounds the cost of one verification.
pub const MAX_RSA_BITS: usize = 4096;

/// A provider's public key, parsed for its algorithm.
#[derive(Clone)]
pub(crate) enum PublicKey {
    /// Ed25519.
    Ed25519(ed25519_dalek::VerifyingKey),
    /// ECDSA P-256.
    P256(p256::ecdsa::VerifyingKey),
    /// RSA PKCS#1 v1.5 SHA-256.
    Rsa(rsa::pkcs1v15::VerifyingKey<sha2::Sha256>),
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Ed25519(_) => "PublicKey(Ed25519)",
            Self::P256(_) => "PublicKey(P-256)",
            Self::Rsa(_) => "PublicKey(RSA)",
        })
    }
}

/// Why a configured public key cannot be used: a sentence, never the key (it is public, but a
/// secret pasted by mistake must not reach a log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublicKeyError {
    /// Not PEM, hex or base64 of a key of the algorithm.
    #[error(
        "not a valid {0} public key (PEM with its lines wrapped as issued, base64 of the raw key \
         or its DER, or hex for Ed25519)"
    )]
    Unreadable(&'static str),
    /// An RSA key outside 2048 to 4096 bits.
    #[error("RSA key of {0} bits; 2048 to 4096 are accepted")]
    RsaSize(usize),
}

impl PublicKey {
    /// Parse `text` (see the module's formats) as a key of `algorithm`, a public-key
    /// algorithm.
    ///
    /// # Errors
    /// [`PublicKeyError`] when the text is no such key, or `algorithm` is an HMAC.
    pub(crate) fn parse(algorithm: Algorithm, text: &str) -> Result<PublicKey, PublicKeyError> {
        let text = text.trim();
        let unreadable = PublicKeyError::Unreadable(algorithm.label());
        if text.starts_with("-----BEGIN") {
            return Self::from_pem(algorithm, text)?.ok_or(unreadable);
        }
        let bytes = decode_text(text).ok_or_else(|| unreadable.clone())?;
        Self::from_der_or_raw(algorithm, &bytes)?.ok_or(unreadable)
    }

    fn from_pem(algorithm: Algorithm, text: &str) -> Result<Option<PublicKey>, PublicKeyError> {
        use ed25519_dalek::pkcs8::DecodePublicKey as _;
        Ok(match algorithm {
            Algorithm::Ed25519 => ed25519_dalek::VerifyingKey::from_public_key_pem(text)
                .ok()
                .map(Self::Ed25519),
            Algorithm::EcdsaP256Sha256 => {
                use p256::pkcs8::DecodePublicKey as _;
                p256::ecdsa::VerifyingKey::from_public_key_pem(text)
                    .ok()
                    .map(Self::P256)
            }
            Algorithm::RsaPkcs1Sha256 => {
                use rsa::pkcs1::DecodeRsaPublicKey as _;
                use rsa::pkcs8::DecodePublicKey as _;
                match rsa::PublicKey::from_public_key_pem(text)
                    .or_else(|_| rsa::PublicKey::from_pkcs1_pem(text))
                {
                    Ok(key) => Some(Self::rsa(key)?),
                    Err(_) => None,
                }
            }
            Algorithm::Sha1 | Algorithm::Sha256 | Algorithm::Sha512 | Algorithm::Token => None,
        })
    }

    /// An RSA key of [`MIN_RSA_BITS`] to [`MAX_RSA_BITS`] bits, whatever form it came in.
    fn rsa(key: rsa::PublicKey) -> Result<PublicKey, PublicKeyError> {
        use rsa::traits::PublicKeyParts as _;
        let bits = key.size() * 8;
        if !(MIN_RSA_BITS..=MAX_RSA_BITS).contains(&bits) {
            return Err(PublicKeyError::RsaSize(bits));
        }
        Ok(Self::Rsa(rsa::pkcs1v15::VerifyingKey::new(key)))
    }

    fn from_der_or_raw(
        algorithm: Algorithm,
        bytes: &[u8],
    ) -> Result<Option<PublicKey>, PublicKeyError> {
        Ok(match algorithm {
            Algorithm::Ed25519 => {
                use ed25519_dalek::pkcs8::DecodePublicKey as _;
                match <[u8; 32]>::try_from(bytes) {
                    Ok(raw) => ed25519_dalek::VerifyingKey::from_bytes(&raw).ok(),
                    Err(_) => ed25519_dalek::VerifyingKey::from_public_key_der(bytes).ok(),
                }
                .map(Self::Ed25519)
            }
            Algorithm::EcdsaP256Sha256 => {
                use p256::pkcs8::DecodePublicKey as _;
                p256::ecdsa::VerifyingKey::from_public_key_der(bytes)
                    .or_else(|_| p256::ecdsa::VerifyingKey::from_sec1_bytes(bytes))
                    .ok()
                    .map(Self::P256)
            }
            Algorithm::RsaPkcs1Sha256 => {
                use rsa::pkcs1::DecodeRsaPublicKey as _;
                use rsa::pkcs8::DecodePublicKey as _;
                let Ok(key) = rsa::PublicKey::from_public_key_der(bytes)
                    .or_else(|_| rsa::PublicKey::from_pkcs1_der(bytes))
                else {
                    return Ok(None);
                };
                Some(Self::rsa(key)?)
            }
            Algorithm::Sha1 | Algorithm::Sha256 | Algorithm::Sha512 | Algorithm::Token => None,
        })
    }

    /// Whether `signature` (decoded bytes) is this key's signature of `message`. Never panics;
    /// a signature of the wrong shape is `false`.
    pub(crate) fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        use p256::ecdsa::signature::Verifier as _;
        match self {
            Self::Ed25519(key) => ed25519_dalek::Signature::from_slice(signature)
                .is_ok_and(|signature| key.verify_strict(message, &signature).is_ok()),
            Self::P256(key) => {
                let parsed = if signature.len() == 64 {
                    p256::ecdsa::Signature::from_slice(signature)
                } else {
                    p256::ecdsa::Signature::from_der(signature)
                };
                parsed.is_ok_and(|signature| key.verify(message, &signature).is_ok())
            }
            Self::Rsa(key) => rsa::pkcs1v15::Signature::try_from(signature)
                .is_ok_and(|signature| key.verify(message, &signature).is_ok()),
        }
    }
}

/// Hex (an even count of hex digits) or base64 (either alphabet) to bytes.
fn decode_text(text: &str) -> Option<Vec<u8>> {
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return hex::decode(text).ok();
    }
    KEY_BASE64
        .decode(text)
        .or_else(|_| KEY_BASE64_URL.decode(text))
        .ok()
        .filter(|bytes| !bytes.is_empty())
}

/// A provider's private key, to sign as it does: for tests, the demo and the local dev tool
/// (a deployment verifies only). Ed25519 and ECDSA P-256; RSA deliveries are signed in the
/// tests by Python's `cryptography`.
#[derive(Clone)]
pub struct PrivateKey {
    inner: Private,
}

#[derive(Clone)]
enum Private {
    Ed25519(ed25519_dalek::SigningKey),
    P256(p256::ecdsa::SigningKey),
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrivateKey([redacted])")
    }
}

impl PrivateKey {
    /// A key of `algorithm` from its 32 secret bytes as hex or base64 (an Ed25519 seed, a P-256
    /// scalar) or a PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), after stripping `prefix`
    /// (Standard Webhooks' `whsk_`) if present.
    ///
    /// # Errors
    /// A sentence (without the key) when the text is no such key or the algorithm is not
    /// Ed25519 or ECDSA P-256.
    pub fn parse(algorithm: Algorithm, text: &str, prefix: Option<&str>) -> Result<Self, String> {
        let text = text.trim();
        let text = prefix.and_then(|p| text.strip_prefix(p)).unwrap_or(text);
        let refused = || format!("not an {} private key", algorithm.label());
        let inner = if text.starts_with("-----BEGIN") {
            match algorithm {
                Algorithm::Ed25519 => {
                    use ed25519_dalek::pkcs8::DecodePrivateKey as _;
                    Private::Ed25519(
                        ed25519_dalek::SigningKey::from_pkcs8_pem(text).map_err(|_| refused())?,
                    )
                }
                Algorithm::EcdsaP256Sha256 => {
                    use p256::pkcs8::DecodePrivateKey as _;
                    Private::P256(
                        p256::ecdsa::SigningKey::from_pkcs8_pem(text).map_err(|_| refused())?,
                    )
                }
                _ => return Err(refused()),
            }
        } else {
            let bytes = decode_text(text).ok_or_else(refused)?;
            let raw: [u8; 32] = bytes.try_into().map_err(|_| refused())?;
            match algorithm {
                Algorithm::Ed25519 => Private::Ed25519(ed25519_dalek::SigningKey::from_bytes(&raw)),
                Algorithm::EcdsaP256Sha256 => Private::P256(
                    p256::ecdsa::SigningKey::from_bytes(&raw.into()).map_err(|_| refused())?,
                ),
                _ => return Err(refused()),
            }
        };
        Ok(Self { inner })
    }

    /// The algorithm this key signs with.
    #[must_use]
    pub fn algorithm(&self) -> Algorithm {
        match self.inner {
            Private::Ed25519(_) => Algorithm::Ed25519,
            Private::P256(_) => Algorithm::EcdsaP256Sha256,
        }
    }

    /// The signature of `message`: 64 bytes for Ed25519; DER for ECDSA (deterministic, RFC
    /// 6979), as SendGrid sends.
    #[must_use]
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        use p256::ecdsa::signature::Signer as _;
        match &self.inner {
            Private::Ed25519(key) => key.sign(message).to_bytes().to_vec(),
            Private::P256(key) => {
                let signature: p256::ecdsa::Signature = key.sign(message);
                signature.to_der().as_bytes().to_vec()
            }
        }
    }

    /// The matching public key as standard base64: the 32 raw bytes for Ed25519, the DER
    /// SubjectPublicKeyInfo for P-256 (the forms Standard Webhooks and SendGrid show).
    #[must_use]
    pub fn public_key_base64(&self) -> String {
        use base64::engine::general_purpose::STANDARD;
        match &self.inner {
            Private::Ed25519(key) => STANDARD.encode(key.verifying_key().to_bytes()),
            Private::P256(key) => {
                use p256::pkcs8::EncodePublicKey as _;
                key.verifying_key()
                    .to_public_key_der()
                    .map(|der| STANDARD.encode(der.as_bytes()))
                    .unwrap_or_default()
            }
        }
    }
}
