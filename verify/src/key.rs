//! [`SigningKey`]: one configured secret, prepared as a keyed HMAC of an [`Algorithm`]
//! ([`KeyError`] when it cannot be), and the constant-time match of a delivery's candidate
//! signatures against a source's keys.

use std::fmt;

use base64::alphabet;
use base64::engine::general_purpose::GeneralPurpose;
use base64::engine::{DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Sha256, Sha512};

use subtle::{Choice, ConstantTimeEq};

use crate::outcome::{Verified, VerifyError};
use crate::scheme::Scheme;
use crate::tag::{AnyTag, TAG512_LEN, TAG_LEN};

/// One secret, prepared for a scheme: the keyed HMAC state (SHA-256, or SHA-512 for a generic
/// source configured so), computed once at start-up and cloned per verification.
///
/// The raw secret is not kept. `Debug` prints `SigningKey([redacted])`.
#[derive(Clone)]
pub struct SigningKey {
    /// The keyed HMAC, never updated: cloned for each MAC.
    mac: KeyedMac,
}

/// A keyed HMAC of either algorithm.
#[derive(Clone)]
pub(crate) enum KeyedMac {
    /// HMAC-SHA256: every scheme but a generic source configured with `sha512`.
    Sha256(Hmac<Sha256>),
    /// HMAC-SHA512: a generic source configured with `algorithm: "sha512"`.
    Sha512(Hmac<Sha512>),
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
    /// Prepare `secret` (the string as configured, used verbatim: no trimming) for `scheme`.
    ///
    /// The key bytes are:
    ///
    /// - Stripe: the secret string *including* its `whsec_` prefix, as UTF-8 bytes (Stripe's
    ///   libraries key the HMAC with the whole endpoint secret);
    /// - GitHub: the secret string's UTF-8 bytes (GitHub docs, "Validating webhook deliveries");
    /// - Standard Webhooks: the secret without an optional `whsec_` prefix, base64-decoded
    ///   (standard alphabet; missing or partial padding accepted, as the Python and JS libraries
    ///   do; no whitespace);
    /// - Shopify: the app's client secret, UTF-8 bytes (Shopify docs, "Verify webhooks");
    /// - Slack: the app's signing secret, UTF-8 bytes (Slack docs, "Verifying requests from
    ///   Slack");
    /// - Paddle: the notification destination's secret key *including* its `pdl_ntfset_`
    ///   prefix, UTF-8 bytes (Paddle's SDKs key the HMAC with the whole string);
    /// - generic: the secret's UTF-8 bytes, for HMAC-SHA256. A generic source configured with
    ///   `sha512` must be built through [`Verifier::new`](crate::Verifier::new), which keys HMAC-SHA512.
    ///
    /// # Errors
    ///
    /// [`KeyError::Empty`] if the secret is empty (for Standard Webhooks: nothing after the
    /// prefix, or it decodes to no bytes); [`KeyError::NotBase64`] if a Standard Webhooks secret
    /// does not decode. Neither error carries the secret.
    pub fn new(scheme: Scheme, secret: &str) -> Result<SigningKey, KeyError> {
        if secret.is_empty() {
            return Err(KeyError::Empty);
        }
        let mac = match scheme {
            Scheme::Stripe
            | Scheme::Github
            | Scheme::Shopify
            | Scheme::Slack
            | Scheme::Paddle
            | Scheme::GenericHmac => KeyedMac::Sha256(mac_from(secret.as_bytes())),
            Scheme::StandardWebhooks => {
                let encoded = secret
                    .strip_prefix(STANDARD_WEBHOOKS_SECRET_PREFIX)
                    .unwrap_or(secret);
                if encoded.is_empty() {
                    return Err(KeyError::Empty);
                }
                let key = SECRET_BASE64
                    .decode(encoded)
                    .map_err(|_| KeyError::NotBase64)?;
                if key.is_empty() {
                    return Err(KeyError::Empty);
                }
                KeyedMac::Sha256(mac_from(&key))
            }
        };
        Ok(SigningKey { mac })
    }

    /// Prepare `secret` (UTF-8 bytes, verbatim) for a generic source using `algorithm`.
    ///
    /// # Errors
    ///
    /// [`KeyError::Empty`] if the secret is empty.
    pub(crate) fn for_algorithm(
        algorithm: Algorithm,
        secret: &str,
    ) -> Result<SigningKey, KeyError> {
        if secret.is_empty() {
            return Err(KeyError::Empty);
        }
        let mac = match algorithm {
            Algorithm::Sha256 => KeyedMac::Sha256(mac_from(secret.as_bytes())),
            Algorithm::Sha512 => KeyedMac::Sha512(mac_from(secret.as_bytes())),
        };
        Ok(SigningKey { mac })
    }

    /// The HMAC of the concatenation of `parts` (fed in order, nothing copied): 32 bytes for a
    /// SHA-256 key, 64 for a SHA-512 key.
    pub(crate) fn tag(&self, parts: &[&[u8]]) -> AnyTag {
        #[cfg(test)]
        crate::test_support::MACS.with(|macs| macs.set(macs.get() + 1));
        match &self.mac {
            KeyedMac::Sha256(mac) => AnyTag::Sha256(finish(mac.clone(), parts).into()),
            KeyedMac::Sha512(mac) => AnyTag::Sha512(finish(mac.clone(), parts).into()),
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
        let expected = key.tag(parts);
        let hit = candidates.iter().fold(Choice::from(0), |acc, candidate| {
            acc | expected.as_ref().ct_eq(candidate.as_ref())
        });
        if bool::from(hit) {
            return Ok(Verified { key_index });
        }
    }
    Err(VerifyError::NoSignatureMatched)
}

/// Prefix of Standard Webhooks secrets (`whsec_<base64>`), stripped before decoding when present.
pub const STANDARD_WEBHOOKS_SECRET_PREFIX: &str = "whsec_";

/// The HMAC hash function of a generic source. Configuration names: `"sha256"` (the default),
/// `"sha512"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// HMAC-SHA256: a 32-byte digest (64 hex digits, 44 base64 characters).
    #[default]
    Sha256,
    /// HMAC-SHA512: a 64-byte digest (128 hex digits, 88 base64 characters).
    Sha512,
}

impl Algorithm {
    /// Length of the digest in bytes: 32 or 64.
    #[must_use]
    pub fn digest_len(self) -> usize {
        match self {
            Self::Sha256 => TAG_LEN,
            Self::Sha512 => TAG512_LEN,
        }
    }
}
