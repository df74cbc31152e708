//! [`SigningKey`]: one configured key, prepared for its [`Algorithm`] (a keyed HMAC for a shared
//! secret, a parsed public key otherwise; [`KeyError`] when it cannot be), and the match of a
//! delivery's candidate signatures against a source's keys (constant-time for MACs).

use std::fmt;

use base64::alphabet;
use base64::engine::general_purpose::GeneralPurpose;
use base64::engine::{DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;
use sha2::{Sha256, Sha512};

use subtle::{Choice, ConstantTimeEq};

pub use crate::algorithm::Algorithm;
use crate::asymmetric::{PublicKey, PublicKeyError};
use crate::outcome::{Verified, VerifyError};
use crate::tag::AnyTag;

/// One configured key, prepared for a scheme: the keyed HMAC state (computed once at start-up
/// and cloned per verification) for a shared secret, or the parsed public key.
///
/// The raw secret is not kept. `Debug` prints `SigningKey([redacted])`.
#[derive(Clone)]
pub struct SigningKey {
    /// The keyed HMAC, never updated (cloned for each MAC), or the public key.
    kind: KeyKind,
}

/// What a [`SigningKey`] holds.
#[derive(Clone)]
enum KeyKind {
    /// A shared secret, keyed.
    Mac(KeyedMac),
    /// A provider's public key.
    Public(PublicKey),
    /// A shared token, sent as is (GitLab).
    Token(Vec<u8>),
}

/// A keyed HMAC of one hash function.
#[derive(Clone)]
pub(crate) enum KeyedMac {
    /// HMAC-SHA1: a model source configured with `sha1` (Twilio, Intercom).
    Sha1(Hmac<Sha1>),
    /// HMAC-SHA256: every fixed scheme, and the model's default.
    Sha256(Hmac<Sha256>),
    /// HMAC-SHA512: a model source configured with `sha512`.
    Sha512(Hmac<Sha512>),
}

/// How a model source's shared secrets are written in its configuration. Configuration names:
/// `"utf8"` (the default: the string's bytes, as most providers key), `"base64"` (Standard
/// Webhooks' `whsec_...` after the prefix), `"hex"` (Adyen's HMAC key).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretEncoding {
    /// The secret's UTF-8 bytes, verbatim.
    #[default]
    Utf8,
    /// Standard base64 of the key bytes (padding optional).
    Base64,
    /// Hex digits of the key bytes (either case).
    Hex,
}

/// Base64 engine for Standard Webhooks secrets: standard alphabet; padding optional (full,
/// partial or none); non-zero trailing bits tolerated (as Python's `base64.b64decode` does).
/// Leniency here only concerns our own configuration, never what a sender controls.
pub(crate) const SECRET_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

impl SigningKey {
    /// Prepare one key of a model source (a preset or `generic-hmac`) for `algorithm`.
    ///
    /// `prefix`, when the key starts with it, is stripped first (Standard Webhooks' `whsec_` /
    /// `whpk_`). For an HMAC the rest is decoded as `encoding` (the key bytes); for a
    /// public-key algorithm it is the provider's public key, in any form
    /// [`crate::asymmetric`] reads (PEM, hex for Ed25519, base64 of the raw key or its DER).
    ///
    /// # Errors
    ///
    /// [`KeyError::Empty`] if nothing is left; [`KeyError::NotBase64`] / [`KeyError::NotHex`]
    /// for a secret that does not decode; [`KeyError::PublicKey`] for a public key that does not
    /// parse. None carries the key.
    pub fn for_algorithm(
        algorithm: Algorithm,
        secret: &str,
        encoding: SecretEncoding,
        prefix: Option<&str>,
    ) -> Result<SigningKey, KeyError> {
        let secret = prefix
            .and_then(|prefix| secret.strip_prefix(prefix))
            .unwrap_or(secret);
        if secret.is_empty() {
            return Err(KeyError::Empty);
        }
        if algorithm == Algorithm::Token {
            return Ok(SigningKey {
                kind: KeyKind::Token(secret.as_bytes().to_vec()),
            });
        }
        if !algorithm.is_hmac() {
            return PublicKey::parse(algorithm, secret)
                .map(|key| SigningKey {
                    kind: KeyKind::Public(key),
                })
                .map_err(KeyError::PublicKey);
        }
        let bytes: std::borrow::Cow<'_, [u8]> = match encoding {
            SecretEncoding::Utf8 => secret.as_bytes().into(),
            SecretEncoding::Base64 => SECRET_BASE64
                .decode(secret)
                .map_err(|_| KeyError::NotBase64)?
                .into(),
            SecretEncoding::Hex => hex::decode(secret).map_err(|_| KeyError::NotHex)?.into(),
        };
        if bytes.is_empty() {
            return Err(KeyError::Empty);
        }
        let mac = match algorithm {
            Algorithm::Sha1 => KeyedMac::Sha1(mac_from(&bytes)),
            Algorithm::Sha512 => KeyedMac::Sha512(mac_from(&bytes)),
            _ => KeyedMac::Sha256(mac_from(&bytes)),
        };
        Ok(SigningKey {
            kind: KeyKind::Mac(mac),
        })
    }

    /// Whether this key is a shared secret (so we can sign with it).
    #[must_use]
    pub fn is_secret(&self) -> bool {
        matches!(self.kind, KeyKind::Mac(_))
    }

    /// The HMAC of the concatenation of `parts` (fed in order, nothing copied): 20, 32 or 64
    /// bytes. A public key has no MAC: [`AnyTag::None`], which matches nothing.
    pub(crate) fn tag(&self, parts: &[&[u8]]) -> AnyTag {
        #[cfg(test)]
        crate::test_support::MACS.with(|macs| macs.set(macs.get() + 1));
        match &self.kind {
            KeyKind::Mac(KeyedMac::Sha1(mac)) => AnyTag::Sha1(finish(mac.clone(), parts).into()),
            KeyKind::Mac(KeyedMac::Sha256(mac)) => {
                AnyTag::Sha256(finish(mac.clone(), parts).into())
            }
            KeyKind::Mac(KeyedMac::Sha512(mac)) => {
                AnyTag::Sha512(finish(mac.clone(), parts).into())
            }
            KeyKind::Public(_) | KeyKind::Token(_) => AnyTag::None,
        }
    }

    /// Whether any of `candidates` is this key's signature (or MAC) of the concatenation of
    /// `parts`: a MAC compared in constant time with every candidate, a public key verifying
    /// each candidate in turn.
    fn matches<C: AsRef<[u8]>>(&self, parts: &[&[u8]], candidates: &[C]) -> bool {
        match &self.kind {
            KeyKind::Mac(_) => {
                let expected = self.tag(parts);
                let hit = candidates.iter().fold(Choice::from(0), |acc, candidate| {
                    acc | expected.as_ref().ct_eq(candidate.as_ref())
                });
                bool::from(hit)
            }
            // The token itself, compared in constant time (length aside: a token's length is
            // no secret worth a padded comparison).
            KeyKind::Token(token) => {
                let hit = candidates.iter().fold(Choice::from(0), |acc, candidate| {
                    acc | token.as_slice().ct_eq(candidate.as_ref())
                });
                bool::from(hit)
            }
            KeyKind::Public(key) => {
                let message = parts.concat();
                candidates
                    .iter()
                    .any(|candidate| key.verifies(&message, candidate.as_ref()))
            }
        }
    }
}

/// An HMAC keyed with `key` (HMAC accepts keys of any length).
pub(crate) fn mac_from<M: KeyInit>(key: &[u8]) -> M {
    M::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"))
}

/// Feed `parts` to `mac` in order and finalise it.
pub(crate) fn finish<M: Mac>(mut mac: M, parts: &[&[u8]]) -> hmac::digest::Output<M> {
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes()
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey([redacted])")
    }
}

/// Why a configured secret cannot be prepared as a [`SigningKey`]. A configuration error: not
/// retryable; the messages never include the secret.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// The secret is empty (or, for Standard Webhooks, empty after the `whsec_` prefix).
    #[error("signing secret is empty")]
    Empty,
    /// A Standard Webhooks secret is not base64 (standard alphabet) after the `whsec_` prefix.
    #[error("signing secret is not base64 (standard-webhooks secrets are whsec_<base64>)")]
    NotBase64,
    /// A model source's secret configured as hex does not decode.
    #[error("signing secret is not hex")]
    NotHex,
    /// A public key does not parse for the algorithm.
    #[error("public key: {0}")]
    PublicKey(PublicKeyError),
}

/// Compute each key's MAC over the concatenation of `parts`, in key order, and compare it in
/// constant time with every candidate (a candidate of another length than the key's output
/// never matches); the first key that matches wins and the keys after it are not computed.
///
/// Timing: each comparison is constant-time ([`subtle`]), and a delivery that matches no key
/// costs one MAC per key whatever it carries, so a forger learns nothing from the time taken.
/// A matching delivery stops at its key: its time tells how many keys come before the one that
/// matched (one HMAC of the body each). That is unavoidable with an early exit and harmless:
/// only someone holding a correctly signed delivery (the provider, or whoever replays one)
/// observes it, it says nothing about any key's bytes, and the index is no secret (the
/// `delivery` log line records it as `key_index`). With one key, or the current key first,
/// a delivery costs one HMAC instead of one per configured key.
///
/// # Errors
///
/// [`VerifyError::NoKeys`] if `keys` is empty; [`VerifyError::NoSignatureMatched`] if no
/// candidate matches any key (including when there are no candidates).
pub(crate) fn first_matching_key<C: AsRef<[u8]>>(
    keys: &[SigningKey],
    parts: &[&[u8]],
    candidates: &[C],
) -> Result<Verified, VerifyError> {
    if keys.is_empty() {
        return Err(VerifyError::NoKeys);
    }
    for (key_index, key) in keys.iter().enumerate() {
        if key.matches(parts, candidates) {
            return Ok(Verified { key_index });
        }
    }
    Err(VerifyError::NoSignatureMatched)
}
