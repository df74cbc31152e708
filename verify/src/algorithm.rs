//! [`Algorithm`]: how a scheme of the model signs (an HMAC over SHA-1, SHA-256 or SHA-512, or a
//! public-key signature: Ed25519, ECDSA P-256 over SHA-256, RSA PKCS#1 v1.5 over SHA-256).

/// How a source's deliveries are signed.
///
/// Configuration names: `"sha256"` (HMAC-SHA256, the default), `"sha1"`, `"sha512"`,
/// `"ed25519"`, `"ecdsa-p256-sha256"`, `"rsa-pkcs1-sha256"` and `"token"`. For the HMACs a source's keys are
/// shared secrets; for the others they are the provider's public keys (PEM, or base64 / hex of the
/// raw key or its DER, see [`SigningKey::for_algorithm`](crate::SigningKey)).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// HMAC-SHA1: a 20-byte MAC (Twilio, Intercom). SHA-1 is broken for collisions, not as an
    /// HMAC: RFC 6151 section 4.
    Sha1,
    /// HMAC-SHA256: a 32-byte MAC (64 hex digits, 44 base64 characters).
    #[default]
    Sha256,
    /// HMAC-SHA512: a 64-byte MAC (128 hex digits, 88 base64 characters).
    Sha512,
    /// Ed25519 (RFC 8032, strict verification): a 64-byte signature (Discord, Standard Webhooks
    /// `v1a`).
    Ed25519,
    /// ECDSA over NIST P-256 with SHA-256 (FIPS 186-4): a DER signature of at most 72 bytes, or
    /// the fixed 64-byte `r || s` (SendGrid sends DER).
    #[serde(rename = "ecdsa-p256-sha256")]
    EcdsaP256Sha256,
    /// RSASSA-PKCS1-v1_5 with SHA-256 (RFC 8017 section 8.2), keys of 2048 to 4096 bits: a
    /// signature as long as the modulus.
    #[serde(rename = "rsa-pkcs1-sha256")]
    RsaPkcs1Sha256,
    /// No signature: the header carries the shared secret itself, compared in constant time
    /// (GitLab's `X-Gitlab-Token`). It proves who sent the request, not what it says: nothing
    /// of the request is signed.
    Token,
}

impl Algorithm {
    /// Every algorithm, in documentation order.
    pub const ALL: [Algorithm; 7] = [
        Algorithm::Sha1,
        Algorithm::Sha256,
        Algorithm::Sha512,
        Algorithm::Ed25519,
        Algorithm::EcdsaP256Sha256,
        Algorithm::RsaPkcs1Sha256,
        Algorithm::Token,
    ];

    /// Whether this is an HMAC (the keys are shared secrets, and we can sign).
    #[must_use]
    pub fn is_hmac(self) -> bool {
        matches!(self, Self::Sha1 | Self::Sha256 | Self::Sha512)
    }

    /// Whether the keys are public keys (Ed25519, ECDSA, RSA): not HMAC secrets nor tokens.
    #[must_use]
    pub fn is_public_key(self) -> bool {
        matches!(
            self,
            Self::Ed25519 | Self::EcdsaP256Sha256 | Self::RsaPkcs1Sha256
        )
    }

    /// Length of the MAC in bytes (20, 32 or 64) for an HMAC; `None` for a public-key
    /// algorithm, whose signature length depends on the key or the encoding.
    #[must_use]
    pub fn digest_len(self) -> Option<usize> {
        match self {
            Self::Sha1 => Some(20),
            Self::Sha256 => Some(32),
            Self::Sha512 => Some(64),
            Self::Ed25519 | Self::EcdsaP256Sha256 | Self::RsaPkcs1Sha256 | Self::Token => None,
        }
    }

    /// The longest signature this algorithm produces, bytes: the MAC length, 64 for Ed25519, 72
    /// for a DER ECDSA P-256 signature, 512 for RSA-4096. A longer decoded value is malformed.
    #[must_use]
    pub fn max_signature_len(self) -> usize {
        match self {
            Self::Sha1 => 20,
            Self::Sha256 => 32,
            Self::Ed25519 | Self::Sha512 => 64,
            Self::EcdsaP256Sha256 => 72,
            Self::RsaPkcs1Sha256 => 512,
            Self::Token => 1024,
        }
    }

    /// The configuration name, as in the sources JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha1 => "sha1",
            Self::Sha256 => "sha256",
            Self::Sha512 => "sha512",
            Self::Ed25519 => "ed25519",
            Self::EcdsaP256Sha256 => "ecdsa-p256-sha256",
            Self::RsaPkcs1Sha256 => "rsa-pkcs1-sha256",
            Self::Token => "token",
        }
    }

    /// A short human description for the providers table: `"HMAC-SHA256"`, `"Ed25519"`...
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Sha1 => "HMAC-SHA1",
            Self::Sha256 => "HMAC-SHA256",
            Self::Sha512 => "HMAC-SHA512",
            Self::Ed25519 => "Ed25519",
            Self::EcdsaP256Sha256 => "ECDSA P-256 SHA-256",
            Self::RsaPkcs1Sha256 => "RSA PKCS#1 v1.5 SHA-256",
            Self::Token => "shared token",
        }
    }
}
