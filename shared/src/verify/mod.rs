//! Webhook signature verification: pure functions over the raw body bytes and the headers.
//!
//! This module owns the [`Scheme`] dispatch, the prepared [`Verifier`] (one per source, built at
//! start-up), the prepared [`SigningKey`], the outcome [`Verified`] and the errors
//! [`VerifierError`], [`KeyError`] and [`VerifyError`]. Each scheme's header format and signed
//! content live in its own file: [`stripe`], [`github`], [`standard_webhooks`], [`shopify`],
//! [`slack`], [`paddle`] and [`generic`] (a configurable HMAC, [`GenericHmac`]).
//!
//! Rules shared by every scheme:
//!
//! - the body is the exact raw bytes received; nothing is re-serialised;
//! - the keys of a source (secret rotation) are tried in configuration order until one
//!   matches, and [`Verified::key_index`] says which; a delivery that matches none is tried
//!   against every key;
//! - MACs are compared in constant time ([`subtle::ConstantTimeEq`] on the 32-byte HMAC-SHA256
//!   or 64-byte HMAC-SHA512 output), after decoding the provided hex or base64 once;
//! - a header value longer than [`MAX_HEADER_LEN`] bytes, not visible ASCII, or present more than
//!   once is [`VerifyError::MalformedHeader`]; at most [`MAX_SIGNATURES`] signatures of one
//!   header are considered, so a hostile header cannot cause unbounded work;
//! - where the scheme signs a timestamp, it is checked against the injected clock in both
//!   directions before any HMAC is computed.
//!
//! No I/O, no clock, no logging: the caller passes `now` and logs the outcome.

use std::borrow::Cow;
use std::fmt;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, STANDARD};
use base64::engine::{DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use http::header::AsHeaderName;
use http::HeaderMap;
use sha2::{Sha256, Sha512};
use subtle::{Choice, ConstantTimeEq};

pub mod generic;
pub mod github;
pub mod paddle;
pub mod shopify;
pub mod slack;
pub mod standard_webhooks;
pub mod stripe;

pub use generic::{Algorithm, Encoding, GenericHmac};

/// Longest signature-related header value accepted, in bytes (8 KiB).
///
/// Longer values are [`VerifyError::MalformedHeader`]. Real values are far shorter: Stripe sends
/// one `t` and a few `v1` entries (~80 bytes each), GitHub ~71 bytes, Standard Webhooks ~47
/// bytes per signature, Shopify 44, Slack 67, Paddle ~70 per `h1`.
pub const MAX_HEADER_LEN: usize = 8 * 1024;

/// Most signatures of one header that are considered; later ones are ignored.
///
/// Providers send one signature per active secret (two during a rotation), so 16 is generous;
/// the cap bounds the comparisons a hostile header can cause.
pub const MAX_SIGNATURES: usize = 16;

/// Default timestamp tolerance, in seconds, for the schemes that sign a timestamp (300 s).
///
/// Source: Stripe's libraries (`DEFAULT_TOLERANCE = 300`), the Standard Webhooks specification
/// ("five minutes") and Slack's docs ("more than five minutes"). Paddle's SDKs default to 5 s;
/// see [`paddle::DEFAULT_TOLERANCE_SECS`] for why we keep 300 s.
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;

/// Length of an HMAC-SHA256 output in bytes.
const TAG_LEN: usize = 32;

/// Length of an HMAC-SHA512 output in bytes.
const TAG512_LEN: usize = 64;

/// An HMAC-SHA256 output: computed by us or decoded from a header.
type Tag = [u8; TAG_LEN];

/// Length of a padded standard base64 encoding of a [`Tag`] (32 bytes -> 44 characters).
const TAG_BASE64_LEN: usize = TAG_LEN.div_ceil(3) * 4;

/// An HMAC output of either algorithm: what a [`SigningKey`] computes, and what the generic
/// scheme decodes from its header. Compared as byte slices, so outputs of different lengths
/// never match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AnyTag {
    /// HMAC-SHA256: 32 bytes.
    Sha256(Tag),
    /// HMAC-SHA512: 64 bytes.
    Sha512([u8; TAG512_LEN]),
}

impl AsRef<[u8]> for AnyTag {
    fn as_ref(&self) -> &[u8] {
        match self {
            Self::Sha256(tag) => tag,
            Self::Sha512(tag) => tag,
        }
    }
}

/// Which signing scheme a source uses.
///
/// In configuration (serde) the names are `"stripe"`, `"github"`, `"standard-webhooks"`,
/// `"shopify"`, `"slack"`, `"paddle"` and `"generic-hmac"`. Svix signs with Standard Webhooks
/// (its `svix-*` header names are accepted too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    /// Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, see [`stripe`].
    Stripe,
    /// GitHub: `X-Hub-Signature-256: sha256=<hex>`, see [`github`].
    Github,
    /// Standard Webhooks (and Svix): `webhook-id`, `webhook-timestamp` and
    /// `webhook-signature: v1,<base64> ...`, see [`standard_webhooks`].
    StandardWebhooks,
    /// Shopify: `X-Shopify-Hmac-Sha256: <base64>`, see [`shopify`].
    Shopify,
    /// Slack: `X-Slack-Request-Timestamp` and `X-Slack-Signature: v0=<hex>`, see [`slack`].
    Slack,
    /// Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>...]`, see [`paddle`].
    Paddle,
    /// A configurable HMAC ([`GenericHmac`]: header, algorithm, encoding, prefix, optional
    /// timestamp, signed-payload template), see [`generic`]. Verified only through a
    /// [`Verifier`], which holds the configuration.
    GenericHmac,
}

impl Scheme {
    /// Whether the scheme signs a timestamp, so that the tolerance applies.
    ///
    /// Stripe (`t=`), Standard Webhooks (`webhook-timestamp`), Slack
    /// (`X-Slack-Request-Timestamp`) and Paddle (`ts=`) do; GitHub and Shopify do not (such a
    /// delivery can be replayed by whoever captured it; the ledger's idempotency absorbs it).
    /// For [`Scheme::GenericHmac`] it depends on the configuration: this returns `false`, and
    /// [`Verifier::signs_timestamp`] gives the answer for a configured source.
    #[must_use]
    pub fn signs_timestamp(self) -> bool {
        match self {
            Self::Stripe | Self::StandardWebhooks | Self::Slack | Self::Paddle => true,
            Self::Github | Self::Shopify | Self::GenericHmac => false,
        }
    }

    /// Name of the header that carries the signature, lowercase, for logs and docs:
    /// `"stripe-signature"`, `"x-hub-signature-256"`, `"webhook-signature"`,
    /// `"x-shopify-hmac-sha256"`, `"x-slack-signature"` or `"paddle-signature"`.
    ///
    /// For [`Scheme::GenericHmac`] the header is configured per source: this returns
    /// [`generic::CONFIGURED_HEADER`] (`"(configured per source)"`, not a header name), and
    /// [`Verifier::signature_header`] gives the configured name.
    #[must_use]
    pub fn signature_header(self) -> &'static str {
        match self {
            Self::Stripe => stripe::SIGNATURE_HEADER,
            Self::Github => github::SIGNATURE_HEADER,
            Self::StandardWebhooks => standard_webhooks::SIGNATURE_HEADER,
            Self::Shopify => shopify::SIGNATURE_HEADER,
            Self::Slack => slack::SIGNATURE_HEADER,
            Self::Paddle => paddle::SIGNATURE_HEADER,
            Self::GenericHmac => generic::CONFIGURED_HEADER,
        }
    }
}

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
enum KeyedMac {
    /// HMAC-SHA256: every scheme but a generic source configured with `sha512`.
    Sha256(Hmac<Sha256>),
    /// HMAC-SHA512: a generic source configured with `algorithm: "sha512"`.
    Sha512(Hmac<Sha512>),
}

/// Base64 engine for Standard Webhooks secrets: standard alphabet; padding optional (full,
/// partial or none); non-zero trailing bits tolerated (as Python's `base64.b64decode` does).
/// Leniency here only concerns our own configuration, never what a sender controls.
const SECRET_BASE64: GeneralPurpose = GeneralPurpose::new(
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
    ///   `sha512` must be built through [`Verifier::new`], which keys HMAC-SHA512.
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
                    .strip_prefix(standard_webhooks::SECRET_PREFIX)
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
    fn for_algorithm(algorithm: Algorithm, secret: &str) -> Result<SigningKey, KeyError> {
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
    fn tag(&self, parts: &[&[u8]]) -> AnyTag {
        #[cfg(test)]
        test_support::MACS.with(|macs| macs.set(macs.get() + 1));
        match &self.mac {
            KeyedMac::Sha256(mac) => AnyTag::Sha256(finish(mac.clone(), parts).into()),
            KeyedMac::Sha512(mac) => AnyTag::Sha512(finish(mac.clone(), parts).into()),
        }
    }
}

/// An HMAC keyed with `key` (HMAC accepts keys of any length).
fn mac_from<M: KeyInit>(key: &[u8]) -> M {
    M::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"))
}

/// Feed `parts` to `mac` in order and finalise it.
fn finish<M: Mac>(mut mac: M, parts: &[&[u8]]) -> hmac::digest::Output<M> {
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

/// A source's verification, prepared once at start-up and used for every delivery: the scheme,
/// the keys (in configuration order), the tolerance and, for [`Scheme::GenericHmac`], the
/// validated [`GenericHmac`] configuration.
///
/// `Debug` shows the scheme, tolerance and configuration, and prints every key as
/// `SigningKey([redacted])`.
#[derive(Debug, Clone)]
pub struct Verifier {
    /// The scheme; [`Scheme::GenericHmac`] exactly when `generic` is `Some`.
    scheme: Scheme,
    /// One prepared key per configured secret, in configuration order; never empty.
    keys: Vec<SigningKey>,
    /// Timestamp tolerance in seconds, both directions, where a timestamp is signed.
    tolerance_secs: u64,
    /// The validated generic configuration (header names parsed, template split).
    generic: Option<generic::Prepared>,
}

impl Verifier {
    /// Prepare a source's verification: `secrets` in configuration order (each used verbatim,
    /// see [`SigningKey::new`]; for [`Scheme::GenericHmac`] the UTF-8 bytes keyed for the
    /// configured algorithm), `tolerance_secs` in seconds (both directions; applies where a
    /// timestamp is signed; [`DEFAULT_TOLERANCE_SECS`] is the usual value), and `generic`, which
    /// must be `Some` exactly for [`Scheme::GenericHmac`].
    ///
    /// # Errors
    ///
    /// Configuration errors, not retryable, whose messages never include a secret:
    ///
    /// - [`VerifierError::UnexpectedGeneric`]: a generic configuration for another scheme;
    /// - [`VerifierError::MissingGeneric`]: [`Scheme::GenericHmac`] without one;
    /// - [`VerifierError::Generic`]: the generic configuration does not validate
    ///   ([`GenericHmac::validate`]);
    /// - [`VerifierError::NoSecrets`]: `secrets` is empty (verification fails closed);
    /// - [`VerifierError::Key`]: a secret the scheme cannot use, with its 0-based index.
    pub fn new(
        scheme: Scheme,
        secrets: &[&str],
        tolerance_secs: u64,
        generic: Option<GenericHmac>,
    ) -> Result<Verifier, VerifierError> {
        let generic = match (scheme, generic) {
            (Scheme::GenericHmac, Some(config)) => {
                Some(generic::Prepared::new(config).map_err(VerifierError::Generic)?)
            }
            (Scheme::GenericHmac, None) => return Err(VerifierError::MissingGeneric),
            (_, Some(_)) => return Err(VerifierError::UnexpectedGeneric(scheme)),
            (_, None) => None,
        };
        if secrets.is_empty() {
            return Err(VerifierError::NoSecrets);
        }
        let keys = secrets
            .iter()
            .enumerate()
            .map(|(index, secret)| {
                match &generic {
                    Some(prepared) => SigningKey::for_algorithm(prepared.algorithm(), secret),
                    None => SigningKey::new(scheme, secret),
                }
                .map_err(|error| VerifierError::Key { index, error })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Verifier {
            scheme,
            keys,
            tolerance_secs,
            generic,
        })
    }

    /// The source's scheme.
    #[must_use]
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The generic configuration, for [`Scheme::GenericHmac`] (validated); `None` otherwise.
    #[must_use]
    pub fn generic(&self) -> Option<&GenericHmac> {
        self.generic.as_ref().map(generic::Prepared::config)
    }

    /// The timestamp tolerance, seconds, both directions.
    #[must_use]
    pub fn tolerance_secs(&self) -> u64 {
        self.tolerance_secs
    }

    /// How many keys (secrets) the source has; at least 1. [`Verified::key_index`] is below it.
    #[must_use]
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Whether a timestamp is signed, so that the tolerance applies: [`Scheme::signs_timestamp`],
    /// or for a generic source whether `timestamp_header` is configured.
    #[must_use]
    pub fn signs_timestamp(&self) -> bool {
        match &self.generic {
            Some(prepared) => prepared.signs_timestamp(),
            None => self.scheme.signs_timestamp(),
        }
    }

    /// Lowercase name of the header that carries the signature: [`Scheme::signature_header`],
    /// or for a generic source the configured `signature_header`, normalised to lowercase.
    #[must_use]
    pub fn signature_header(&self) -> &str {
        match &self.generic {
            Some(prepared) => prepared.signature_header(),
            None => self.scheme.signature_header(),
        }
    }

    /// Verify `body` (the exact raw bytes received) against every key of the source.
    ///
    /// `now` is the current time in unix seconds (injected clock); the tolerance applies as in
    /// [`verify`]. The rules of each scheme are documented on its `verify` function
    /// ([`stripe::verify`], [`github::verify`], [`standard_webhooks::verify`],
    /// [`shopify::verify`], [`slack::verify`], [`paddle::verify`]) and on [`GenericHmac`].
    ///
    /// # Errors
    ///
    /// [`VerifyError::MissingHeader`], [`VerifyError::MalformedHeader`],
    /// [`VerifyError::TimestampOutsideTolerance`] (checked before any HMAC is computed) or
    /// [`VerifyError::NoSignatureMatched`]. ([`VerifyError::NoKeys`] and
    /// [`VerifyError::MissingConfig`] cannot happen: [`Verifier::new`] refuses both cases.)
    pub fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<Verified, VerifyError> {
        match &self.generic {
            Some(prepared) => generic::verify(
                prepared,
                &self.keys,
                headers,
                body,
                now,
                self.tolerance_secs,
            ),
            None => verify(
                self.scheme,
                &self.keys,
                headers,
                body,
                now,
                self.tolerance_secs,
            ),
        }
    }

    /// Sign `body` as the provider would, with key `key_index` (0-based, configuration order),
    /// for tests and the dev tool.
    ///
    /// Returns the headers to set, as `(lowercase name, value)` pairs, in a fixed order (see
    /// [`sign`]; a generic source gets its timestamp header, if configured, then its signature
    /// header with the configured prefix). `msg_id` is used by Standard Webhooks only;
    /// `timestamp` is unix seconds, ignored where no timestamp is signed.
    ///
    /// # Panics
    ///
    /// If `key_index >= self.key_count()`.
    #[must_use]
    pub fn sign(
        &self,
        key_index: usize,
        msg_id: &str,
        timestamp: i64,
        body: &[u8],
    ) -> Vec<(String, String)> {
        let key = &self.keys[key_index];
        match &self.generic {
            Some(prepared) => generic::sign(prepared, key, timestamp, body),
            None => sign(self.scheme, key, msg_id, timestamp, body)
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value))
                .collect(),
        }
    }
}

/// Why a source's [`Verifier`] cannot be built. A configuration error (the source fails closed
/// at start-up): not retryable; the messages never include a secret.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifierError {
    /// The source has no secrets.
    #[error("no signing secrets configured (verification fails closed)")]
    NoSecrets,
    /// A secret cannot be used with the scheme.
    #[error("signing secret #{index}: {error}")]
    Key {
        /// 0-based index of the secret in the source's list.
        index: usize,
        /// Why it was refused.
        error: KeyError,
    },
    /// The [`GenericHmac`] configuration does not validate; the text says which field and why.
    #[error("generic-hmac configuration: {0}")]
    Generic(String),
    /// A [`GenericHmac`] configuration was given for a scheme that is not
    /// [`Scheme::GenericHmac`].
    #[error("a generic-hmac configuration was given for scheme {0:?}")]
    UnexpectedGeneric(Scheme),
    /// [`Scheme::GenericHmac`] was given without its configuration.
    #[error("scheme generic-hmac needs a generic-hmac configuration")]
    MissingGeneric,
}

/// What a successful verification tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// Which of the source's secrets matched: 0-based index into the `keys` slice (config
    /// order), the first that matched. Logged during a rotation to see when the old secret
    /// stops being used.
    pub key_index: usize,
}

/// Why a delivery failed verification.
///
/// Every variant is answered with 401 and [`VerifyError::reason`] as the body; the `Display`
/// text (which may name a header) is for our log. None is retryable by us: the provider retries
/// on its own schedule.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    /// A required header is absent. Carries the header's lowercase name (for Standard Webhooks
    /// the `webhook-*` name, even though `svix-*` is accepted too; for a generic source the
    /// configured name). Borrowed for the fixed schemes, owned for a generic source.
    #[error("missing header {0}")]
    MissingHeader(Cow<'static, str>),
    /// A header is present but cannot be parsed: duplicated, longer than [`MAX_HEADER_LEN`], not
    /// visible ASCII, empty, missing a separator or prefix, a non-numeric timestamp, a value
    /// that is not the expected hex or base64... Carries the lowercase name of the header as
    /// received.
    #[error("malformed header {0}")]
    MalformedHeader(Cow<'static, str>),
    /// The signed timestamp is more than the tolerance away from `now`, in either direction
    /// (too old, or too far in the future).
    #[error("timestamp outside tolerance")]
    TimestampOutsideTolerance,
    /// The headers are well-formed, but no signature matched any key (also: no signature of the
    /// expected version was present).
    #[error("no signature matched any key")]
    NoSignatureMatched,
    /// The keys slice is empty. A configuration bug (configuration fails closed at start-up),
    /// answered like a mismatch.
    #[error("no signing keys configured for this source")]
    NoKeys,
    /// The scheme needs per-source configuration the free [`verify`] function does not have
    /// ([`Scheme::GenericHmac`]: verify through a [`Verifier`]). A configuration bug, answered
    /// like a mismatch.
    #[error("scheme needs its per-source configuration: verify through a Verifier")]
    MissingConfig,
}

impl VerifyError {
    /// Short fixed reason, safe to send to the provider in the 401 body: `"missing signature
    /// header"`, `"malformed signature header"`, `"timestamp outside tolerance"` or
    /// `"signature mismatch"` ([`VerifyError::NoKeys`] and [`VerifyError::MissingConfig`] too,
    /// so the response does not reveal our configuration).
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingHeader(_) => "missing signature header",
            Self::MalformedHeader(_) => "malformed signature header",
            Self::TimestampOutsideTolerance => "timestamp outside tolerance",
            Self::NoSignatureMatched | Self::NoKeys | Self::MissingConfig => "signature mismatch",
        }
    }
}

/// Verify `body` (the exact raw bytes received) against every key, for a fixed `scheme`.
///
/// `now` is the current time in unix seconds (injected clock). `tolerance_secs` (seconds)
/// applies where the scheme signs a timestamp ([`Scheme::signs_timestamp`]), in both directions:
/// `|now - t| <= tolerance_secs` is accepted, one second more is rejected. Header lookup is
/// case-insensitive ([`http::HeaderMap`]). The rules of each scheme are documented on
/// [`stripe::verify`], [`github::verify`], [`standard_webhooks::verify`], [`shopify::verify`],
/// [`slack::verify`] and [`paddle::verify`].
///
/// A [`Scheme::GenericHmac`] source's rules are data this function does not have: such sources
/// are verified through [`Verifier::verify`], and here they are always
/// [`VerifyError::MissingConfig`]. [`Verifier`] works for every scheme and is the preferred API.
///
/// # Errors
///
/// [`VerifyError::MissingConfig`] for [`Scheme::GenericHmac`]; [`VerifyError::NoKeys`] if
/// `keys` is empty; otherwise [`VerifyError::MissingHeader`], [`VerifyError::MalformedHeader`],
/// [`VerifyError::TimestampOutsideTolerance`] (checked before any HMAC is computed) or
/// [`VerifyError::NoSignatureMatched`].
pub fn verify(
    scheme: Scheme,
    keys: &[SigningKey],
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
    tolerance_secs: u64,
) -> Result<Verified, VerifyError> {
    match scheme {
        Scheme::Stripe => stripe::verify(keys, headers, body, now, tolerance_secs),
        Scheme::Github => github::verify(keys, headers, body, now, tolerance_secs),
        Scheme::StandardWebhooks => {
            standard_webhooks::verify(keys, headers, body, now, tolerance_secs)
        }
        Scheme::Shopify => shopify::verify(keys, headers, body, now, tolerance_secs),
        Scheme::Slack => slack::verify(keys, headers, body, now, tolerance_secs),
        Scheme::Paddle => paddle::verify(keys, headers, body, now, tolerance_secs),
        Scheme::GenericHmac => Err(VerifyError::MissingConfig),
    }
}

/// Sign `body` as the provider of a fixed `scheme` would (tests, the local dev tool, replay).
///
/// Returns the headers to set, as `(lowercase name, value)` pairs, in a fixed order. `msg_id` is
/// used by Standard Webhooks (`webhook-id`, part of the signed content) and ignored by the
/// others; it must be a valid header value (visible ASCII) and non-empty to verify. `timestamp`
/// is unix seconds, ignored by GitHub and Shopify; it must be non-negative to verify. `key` must
/// have been prepared for the same `scheme`. For [`Scheme::GenericHmac`] this returns no headers
/// (the configuration is needed): use [`Verifier::sign`].
#[must_use]
pub fn sign(
    scheme: Scheme,
    key: &SigningKey,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    match scheme {
        Scheme::Stripe => stripe::sign(key, timestamp, body),
        Scheme::Github => github::sign(key, body),
        Scheme::StandardWebhooks => standard_webhooks::sign(key, msg_id, timestamp, body),
        Scheme::Shopify => shopify::sign(key, body),
        Scheme::Slack => slack::sign(key, timestamp, body),
        Scheme::Paddle => paddle::sign(key, timestamp, body),
        Scheme::GenericHmac => Vec::new(),
    }
}

/// The single value of header `name`, as a string.
///
/// `Ok(None)` if absent. A header present more than once is ambiguous (which one did the
/// provider sign?), so it is [`VerifyError::MalformedHeader`], as is a value longer than
/// [`MAX_HEADER_LEN`] or not visible ASCII ([`http::HeaderValue::to_str`]).
fn single_header<'h>(
    headers: &'h HeaderMap,
    name: &'static str,
) -> Result<Option<&'h str>, VerifyError> {
    single_value(headers, name).map_err(|Malformed| VerifyError::MalformedHeader(name.into()))
}

/// A header value that is duplicated, too long or not visible ASCII (see [`single_header`]).
struct Malformed;

/// [`single_header`] for any header name type (a generic source's [`http::HeaderName`]); the
/// caller names the header in its error.
fn single_value<K: AsHeaderName>(headers: &HeaderMap, name: K) -> Result<Option<&str>, Malformed> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() || value.len() > MAX_HEADER_LEN {
        return Err(Malformed);
    }
    value.to_str().map(Some).map_err(|_| Malformed)
}

/// Parse unix seconds written as ASCII decimal digits only (no sign, no spaces, no fraction):
/// what Stripe's `t=`, Standard Webhooks' `webhook-timestamp`, Slack's
/// `X-Slack-Request-Timestamp` and Paddle's `ts=` carry. `None` if not digits or beyond `i64`.
fn parse_unix_seconds(value: &str) -> Option<i64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// Accept `timestamp` if `|now - timestamp| <= tolerance_secs` (seconds, both directions).
///
/// # Errors
///
/// [`VerifyError::TimestampOutsideTolerance`] otherwise.
fn check_tolerance(timestamp: i64, now: i64, tolerance_secs: u64) -> Result<(), VerifyError> {
    if now.abs_diff(timestamp) > tolerance_secs {
        return Err(VerifyError::TimestampOutsideTolerance);
    }
    Ok(())
}

/// Decode exactly 64 lowercase hex digits (the form Stripe, GitHub, Slack and Paddle send) into
/// a tag. `None` for any other length, uppercase or non-hex digits.
fn decode_lower_hex(value: &str) -> Option<Tag> {
    if value.len() != 2 * TAG_LEN
        || !value
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    let mut tag = [0_u8; TAG_LEN];
    hex::decode_to_slice(value, &mut tag).ok()?;
    Some(tag)
}

/// Decode a padded standard base64 tag (exactly 44 characters, the form Standard Webhooks and
/// Shopify send). `None` for anything else.
fn decode_base64_tag(value: &str) -> Option<Tag> {
    if value.len() != TAG_BASE64_LEN {
        return None;
    }
    let decoded = STANDARD.decode(value).ok()?;
    decoded.try_into().ok()
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
fn first_matching_key<C: AsRef<[u8]>>(
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

/// Helpers shared by the scheme files' tests.
#[cfg(test)]
mod test_support {
    use http::header::{HeaderName, HeaderValue};
    use http::HeaderMap;

    thread_local! {
        /// How many MACs [`super::SigningKey::tag`] computed on this thread.
        pub(super) static MACS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// The MACs computed on this thread while `f` runs.
    pub(super) fn macs_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
        let before = MACS.with(std::cell::Cell::get);
        let value = f();
        (value, MACS.with(std::cell::Cell::get) - before)
    }

    /// A header map from `(name, value)` pairs; names in any case; repeated names are appended.
    pub(super) fn header_map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    /// A header map from the pairs [`crate::verify::sign`] returns.
    pub(super) fn signed_map(pairs: &[(&'static str, String)]) -> HeaderMap {
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(n, v)| (*n, v.as_str())).collect();
        header_map(&pairs)
    }

    /// A header map from the pairs [`crate::verify::Verifier::sign`] returns.
    pub(super) fn owned_map(pairs: &[(String, String)]) -> HeaderMap {
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        header_map(&pairs)
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{header_map, owned_map, signed_map};
    use super::*;
    use proptest::prelude::*;

    const STRIPE_SECRET: &str = "whsec_test_secret";
    const GITHUB_SECRET: &str = "It's a Secret to Everybody";
    const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const SHOPIFY_SECRET: &str = "It's a Secret to Everybody";
    const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const PADDLE_SECRET: &str = "pdl_ntfset_test_secret";
    const GENERIC_SECRET: &str = "generic secret";

    /// Another valid secret per scheme (the "new" secret of a rotation).
    fn other_secret(scheme: Scheme) -> &'static str {
        match scheme {
            Scheme::StandardWebhooks => "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
            _ => "the new secret",
        }
    }

    fn secret(scheme: Scheme) -> &'static str {
        match scheme {
            Scheme::Stripe => STRIPE_SECRET,
            Scheme::Github => GITHUB_SECRET,
            Scheme::StandardWebhooks => STANDARD_SECRET,
            Scheme::Shopify => SHOPIFY_SECRET,
            Scheme::Slack => SLACK_SECRET,
            Scheme::Paddle => PADDLE_SECRET,
            Scheme::GenericHmac => GENERIC_SECRET,
        }
    }

    fn key(scheme: Scheme) -> SigningKey {
        SigningKey::new(scheme, secret(scheme)).unwrap()
    }

    /// The schemes the free functions handle.
    const FIXED: [Scheme; 6] = [
        Scheme::Stripe,
        Scheme::Github,
        Scheme::StandardWebhooks,
        Scheme::Shopify,
        Scheme::Slack,
        Scheme::Paddle,
    ];

    const ALL: [Scheme; 7] = [
        Scheme::Stripe,
        Scheme::Github,
        Scheme::StandardWebhooks,
        Scheme::Shopify,
        Scheme::Slack,
        Scheme::Paddle,
        Scheme::GenericHmac,
    ];

    /// A generic configuration that signs a timestamp, with a prefix, SHA-512 and base64.
    fn generic_with_timestamp() -> GenericHmac {
        GenericHmac {
            signature_header: "X-Signature".to_owned(),
            algorithm: Algorithm::Sha512,
            encoding: Encoding::Base64,
            prefix: Some("sha512=".to_owned()),
            timestamp_header: Some("X-Timestamp".to_owned()),
            signed_payload: Some("{timestamp}.{body}".to_owned()),
            event_id_header: None,
            event_id_pointer: Some("/id".to_owned()),
            event_type_header: None,
            event_type_pointer: None,
        }
    }

    /// The generic configuration for `scheme` (only [`Scheme::GenericHmac`] has one).
    fn generic_for(scheme: Scheme) -> Option<GenericHmac> {
        (scheme == Scheme::GenericHmac).then(generic_with_timestamp)
    }

    fn verifier(scheme: Scheme, secrets: &[&str], tolerance_secs: u64) -> Verifier {
        Verifier::new(scheme, secrets, tolerance_secs, generic_for(scheme)).unwrap()
    }

    const T: i64 = 1_700_000_000;

    #[test]
    fn scheme_names_in_config_are_kebab_case() {
        for (scheme, name) in [
            (Scheme::Stripe, "\"stripe\""),
            (Scheme::Github, "\"github\""),
            (Scheme::StandardWebhooks, "\"standard-webhooks\""),
            (Scheme::Shopify, "\"shopify\""),
            (Scheme::Slack, "\"slack\""),
            (Scheme::Paddle, "\"paddle\""),
            (Scheme::GenericHmac, "\"generic-hmac\""),
        ] {
            assert_eq!(serde_json::to_string(&scheme).unwrap(), name);
            assert_eq!(serde_json::from_str::<Scheme>(name).unwrap(), scheme);
        }
        for unknown in ["\"svix\"", "\"generic\"", "\"generic_hmac\"", "\"Shopify\""] {
            assert!(
                serde_json::from_str::<Scheme>(unknown).is_err(),
                "{unknown}"
            );
        }
    }

    #[test]
    fn the_schemes_that_sign_a_timestamp_are_stripe_standard_webhooks_slack_and_paddle() {
        assert!(Scheme::Stripe.signs_timestamp());
        assert!(!Scheme::Github.signs_timestamp());
        assert!(Scheme::StandardWebhooks.signs_timestamp());
        assert!(!Scheme::Shopify.signs_timestamp());
        assert!(Scheme::Slack.signs_timestamp());
        assert!(Scheme::Paddle.signs_timestamp());
        assert!(!Scheme::GenericHmac.signs_timestamp());
    }

    #[test]
    fn signature_header_names_are_lowercase_and_are_what_sign_sets() {
        for scheme in FIXED {
            let name = scheme.signature_header();
            assert_eq!(name, name.to_ascii_lowercase());
            let signed = sign(scheme, &key(scheme), "msg_1", T, b"{}");
            assert!(signed.iter().any(|(n, _)| *n == name), "{scheme:?}");
        }
    }

    #[test]
    fn the_generic_scheme_signature_header_is_a_placeholder_that_is_not_a_header_name() {
        let placeholder = Scheme::GenericHmac.signature_header();
        assert_eq!(placeholder, generic::CONFIGURED_HEADER);
        assert!(http::HeaderName::from_bytes(placeholder.as_bytes()).is_err());
    }

    #[test]
    fn dispatch_round_trips_every_fixed_scheme() {
        for scheme in FIXED {
            let keys = [key(scheme)];
            let headers = signed_map(&sign(scheme, &keys[0], "msg_1", T, b"{}"));
            assert_eq!(
                verify(scheme, &keys, &headers, b"{}", T, 300),
                Ok(Verified { key_index: 0 }),
                "{scheme:?}"
            );
        }
    }

    #[test]
    fn a_signature_of_one_scheme_does_not_verify_under_another() {
        for signer in FIXED {
            let signed = signed_map(&sign(signer, &key(signer), "msg_1", T, b"{}"));
            for verifier in FIXED.into_iter().filter(|s| *s != signer) {
                assert!(
                    verify(verifier, &[key(verifier)], &signed, b"{}", T, 300).is_err(),
                    "{signer:?} verified as {verifier:?}"
                );
            }
        }
        let signed = signed_map(&sign(Scheme::Stripe, &key(Scheme::Stripe), "", T, b"{}"));
        assert_eq!(
            verify(
                Scheme::Github,
                &[key(Scheme::Github)],
                &signed,
                b"{}",
                T,
                300
            ),
            Err(VerifyError::MissingHeader("x-hub-signature-256".into()))
        );
    }

    #[test]
    fn empty_keys_are_no_keys_for_every_fixed_scheme_even_without_headers() {
        for scheme in FIXED {
            assert_eq!(
                verify(scheme, &[], &HeaderMap::new(), b"{}", 0, 300),
                Err(VerifyError::NoKeys)
            );
        }
    }

    #[test]
    fn the_free_functions_cannot_verify_or_sign_a_generic_source() {
        let headers = header_map(&[("x-signature", "00")]);
        assert_eq!(
            verify(
                Scheme::GenericHmac,
                &[key(Scheme::GenericHmac)],
                &headers,
                b"{}",
                T,
                300
            ),
            Err(VerifyError::MissingConfig)
        );
        assert_eq!(
            verify(Scheme::GenericHmac, &[], &headers, b"{}", T, 300),
            Err(VerifyError::MissingConfig)
        );
        assert!(sign(
            Scheme::GenericHmac,
            &key(Scheme::GenericHmac),
            "m",
            T,
            b"{}"
        )
        .is_empty());
    }

    #[test]
    fn an_empty_secret_is_an_error_for_every_scheme() {
        for scheme in ALL {
            assert_eq!(SigningKey::new(scheme, "").unwrap_err(), KeyError::Empty);
        }
        for algorithm in [Algorithm::Sha256, Algorithm::Sha512] {
            assert_eq!(
                SigningKey::for_algorithm(algorithm, "").unwrap_err(),
                KeyError::Empty
            );
        }
    }

    #[test]
    fn signing_key_debug_does_not_contain_the_secret() {
        for scheme in ALL {
            let printed = format!("{:?}", key(scheme));
            assert_eq!(printed, "SigningKey([redacted])");
            assert!(!printed.contains("secret") && !printed.contains("MfKQ"));
        }
        let sha512 = SigningKey::for_algorithm(Algorithm::Sha512, GENERIC_SECRET).unwrap();
        assert_eq!(format!("{sha512:?}"), "SigningKey([redacted])");
    }

    #[test]
    fn key_error_messages_do_not_contain_the_secret() {
        let secret = "whsec_not*base64!";
        let error = SigningKey::new(Scheme::StandardWebhooks, secret).unwrap_err();
        assert_eq!(error, KeyError::NotBase64);
        assert!(!error.to_string().contains("not*base64"));
    }

    #[test]
    fn reasons_are_the_fixed_strings_sent_to_providers() {
        assert_eq!(
            VerifyError::MissingHeader("stripe-signature".into()).reason(),
            "missing signature header"
        );
        assert_eq!(
            VerifyError::MissingHeader(String::from("x-custom").into()).reason(),
            "missing signature header"
        );
        assert_eq!(
            VerifyError::MalformedHeader("stripe-signature".into()).reason(),
            "malformed signature header"
        );
        assert_eq!(
            VerifyError::TimestampOutsideTolerance.reason(),
            "timestamp outside tolerance"
        );
        assert_eq!(
            VerifyError::NoSignatureMatched.reason(),
            "signature mismatch"
        );
        assert_eq!(VerifyError::NoKeys.reason(), "signature mismatch");
        assert_eq!(VerifyError::MissingConfig.reason(), "signature mismatch");
    }

    #[test]
    fn header_errors_name_the_header_in_the_log_text_only() {
        let error = VerifyError::MalformedHeader(String::from("x-custom-sig").into());
        assert_eq!(error.to_string(), "malformed header x-custom-sig");
        assert!(!error.reason().contains("x-custom-sig"));
    }

    #[test]
    fn tolerance_is_inclusive_in_both_directions() {
        assert_eq!(check_tolerance(1000, 1300, 300), Ok(()));
        assert_eq!(check_tolerance(1000, 700, 300), Ok(()));
        assert_eq!(
            check_tolerance(1000, 1301, 300),
            Err(VerifyError::TimestampOutsideTolerance)
        );
        assert_eq!(
            check_tolerance(1000, 699, 300),
            Err(VerifyError::TimestampOutsideTolerance)
        );
        assert_eq!(check_tolerance(0, i64::MAX, u64::MAX), Ok(()));
        assert_eq!(
            check_tolerance(i64::MAX, i64::MIN, 0),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }

    #[test]
    fn unix_seconds_are_digits_only() {
        assert_eq!(parse_unix_seconds("1614265330"), Some(1_614_265_330));
        assert_eq!(parse_unix_seconds("0"), Some(0));
        for bad in [
            "",
            "-1",
            "+1",
            " 1",
            "1 ",
            "1.5",
            "1e9",
            "0x10",
            "9223372036854775808",
        ] {
            assert_eq!(parse_unix_seconds(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn hex_tags_are_exactly_64_lowercase_hex_digits() {
        let good = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(decode_lower_hex(good).is_some());
        assert!(decode_lower_hex(&good.to_ascii_uppercase()).is_none());
        assert!(decode_lower_hex(&good[..62]).is_none());
        assert!(decode_lower_hex(&format!("{good}00")).is_none());
        assert!(decode_lower_hex(&good.replace('e', "g")).is_none());
        assert!(decode_lower_hex("").is_none());
    }

    #[test]
    fn base64_tags_are_exactly_44_padded_standard_characters() {
        let good = "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc=";
        assert_eq!(
            decode_base64_tag(good).map(hex::encode).as_deref(),
            Some("757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
        );
        for bad in [
            "",
            "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc",
            "dXEH6g6yUJ_CESIczphLijdXC211hsIsRvQ3nIsEPhc=",
            "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc==",
            " XEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc=",
            "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhd=",
        ] {
            assert_eq!(decode_base64_tag(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_duplicated_header_is_malformed() {
        let headers = header_map(&[("x-a", "1"), ("X-A", "2")]);
        assert_eq!(
            single_header(&headers, "x-a"),
            Err(VerifyError::MalformedHeader("x-a".into()))
        );
    }

    #[test]
    fn a_header_of_exactly_the_maximum_length_is_read_and_one_more_byte_is_malformed() {
        let at_max = "a".repeat(MAX_HEADER_LEN);
        let headers = header_map(&[("x-a", &at_max)]);
        assert_eq!(single_header(&headers, "x-a"), Ok(Some(at_max.as_str())));
        let over = "a".repeat(MAX_HEADER_LEN + 1);
        let headers = header_map(&[("x-a", &over)]);
        assert_eq!(
            single_header(&headers, "x-a"),
            Err(VerifyError::MalformedHeader("x-a".into()))
        );
    }

    #[test]
    fn a_non_ascii_header_value_is_malformed() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-a",
            http::HeaderValue::from_bytes("t=é".as_bytes()).unwrap(),
        );
        assert_eq!(
            single_header(&headers, "x-a"),
            Err(VerifyError::MalformedHeader("x-a".into()))
        );
    }

    #[test]
    fn an_absent_header_is_none() {
        assert_eq!(single_header(&HeaderMap::new(), "x-a"), Ok(None));
    }

    #[test]
    fn the_first_matching_key_is_reported() {
        let a = SigningKey::new(Scheme::Github, "a").unwrap();
        let b = SigningKey::new(Scheme::Github, "b").unwrap();
        let parts: &[&[u8]] = &[b"hello"];
        let tag_b = b.tag(parts);
        assert_eq!(
            first_matching_key(&[a.clone(), b.clone()], parts, &[tag_b]),
            Ok(Verified { key_index: 1 })
        );
        assert_eq!(
            first_matching_key(&[b.clone(), b.clone()], parts, &[tag_b]),
            Ok(Verified { key_index: 0 })
        );
        assert_eq!(
            first_matching_key::<AnyTag>(&[a], parts, &[]),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    #[test]
    fn verification_stops_at_the_first_matching_key_and_tries_every_key_otherwise() {
        use test_support::macs_during;
        let a = SigningKey::new(Scheme::Github, "a").unwrap();
        let b = SigningKey::new(Scheme::Github, "b").unwrap();
        let c = SigningKey::new(Scheme::Github, "c").unwrap();
        let parts: &[&[u8]] = &[b"hello"];
        let keys = [a.clone(), b.clone(), c];
        let (tag_a, tag_b) = (a.tag(parts), b.tag(parts));
        // The current key first (the usual case): one HMAC, not one per configured key.
        assert_eq!(
            macs_during(|| first_matching_key(&keys, parts, &[tag_a])),
            (Ok(Verified { key_index: 0 }), 1)
        );
        assert_eq!(
            macs_during(|| first_matching_key(&keys, parts, &[tag_b])),
            (Ok(Verified { key_index: 1 }), 2)
        );
        // A forgery costs every key, whatever it carries.
        let forged = SigningKey::new(Scheme::Github, "forged")
            .unwrap()
            .tag(parts);
        assert_eq!(
            macs_during(|| first_matching_key(&keys, parts, &[forged])),
            (Err(VerifyError::NoSignatureMatched), 3)
        );
        assert_eq!(
            macs_during(|| first_matching_key::<AnyTag>(&keys, parts, &[])),
            (Err(VerifyError::NoSignatureMatched), 3)
        );
    }

    #[test]
    fn parts_are_macd_as_their_concatenation() {
        let k = key(Scheme::Github);
        assert_eq!(k.tag(&[b"ab", b"", b"c"]), k.tag(&[b"abc"]));
        let k = SigningKey::for_algorithm(Algorithm::Sha512, "k").unwrap();
        assert_eq!(k.tag(&[b"ab", b"", b"c"]), k.tag(&[b"abc"]));
    }

    // RFC 4231, test case 2 (key "Jefe").
    #[test]
    fn keys_compute_the_rfc_4231_hmac_sha256_and_hmac_sha512_values() {
        let data: &[&[u8]] = &[b"what do ya want ", b"for nothing?"];
        let sha256 = SigningKey::for_algorithm(Algorithm::Sha256, "Jefe").unwrap();
        assert_eq!(
            hex::encode(sha256.tag(data)),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let sha512 = SigningKey::for_algorithm(Algorithm::Sha512, "Jefe").unwrap();
        assert_eq!(
            hex::encode(sha512.tag(data)),
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554\
             9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
        );
        assert_eq!(
            SigningKey::new(Scheme::GenericHmac, "Jefe")
                .unwrap()
                .tag(data),
            sha256.tag(data)
        );
    }

    #[test]
    fn a_tag_of_another_length_never_matches() {
        let sha256 = SigningKey::for_algorithm(Algorithm::Sha256, "k").unwrap();
        let sha512 = SigningKey::for_algorithm(Algorithm::Sha512, "k").unwrap();
        let parts: &[&[u8]] = &[b"body"];
        let AnyTag::Sha512(long) = sha512.tag(parts) else {
            panic!("a SHA-512 key computes 64 bytes")
        };
        let mut prefix = [0_u8; TAG_LEN];
        prefix.copy_from_slice(&long[..TAG_LEN]);
        assert_eq!(
            first_matching_key(
                std::slice::from_ref(&sha512),
                parts,
                &[AnyTag::Sha256(prefix)]
            ),
            Err(VerifyError::NoSignatureMatched)
        );
        assert_eq!(
            first_matching_key(&[sha256], parts, &[sha512.tag(parts)]),
            Err(VerifyError::NoSignatureMatched)
        );
    }

    // Verifier.

    #[test]
    fn a_verifier_round_trips_every_scheme() {
        for scheme in ALL {
            let v = verifier(scheme, &[secret(scheme)], 300);
            let headers = owned_map(&v.sign(0, "msg_1", T, b"{\"id\":\"e\"}"));
            assert_eq!(
                v.verify(&headers, b"{\"id\":\"e\"}", T),
                Ok(Verified { key_index: 0 }),
                "{scheme:?}"
            );
        }
    }

    #[test]
    fn a_verifier_signs_exactly_as_the_free_function_for_fixed_schemes() {
        for scheme in FIXED {
            let v = verifier(scheme, &[secret(scheme)], 300);
            let owned: Vec<(String, String)> = sign(scheme, &key(scheme), "msg_1", T, b"{}")
                .into_iter()
                .map(|(n, value)| (n.to_owned(), value))
                .collect();
            assert_eq!(v.sign(0, "msg_1", T, b"{}"), owned, "{scheme:?}");
        }
    }

    #[test]
    fn tampering_one_body_byte_fails_every_scheme_through_a_verifier() {
        for scheme in ALL {
            let v = verifier(scheme, &[secret(scheme)], 300);
            let headers = owned_map(&v.sign(0, "msg_1", T, b"{\"id\":\"e\"}"));
            assert_eq!(
                v.verify(&headers, b"{\"id\":\"f\"}", T),
                Err(VerifyError::NoSignatureMatched),
                "{scheme:?}"
            );
        }
    }

    #[test]
    fn rotation_through_a_verifier_reports_the_second_key_for_every_scheme() {
        for scheme in ALL {
            let old = verifier(scheme, &[secret(scheme)], 300);
            let rotating = verifier(scheme, &[other_secret(scheme), secret(scheme)], 300);
            assert_eq!(rotating.key_count(), 2);
            let headers = owned_map(&old.sign(0, "msg_1", T, b"{}"));
            assert_eq!(
                rotating.verify(&headers, b"{}", T),
                Ok(Verified { key_index: 1 }),
                "{scheme:?}"
            );
            let headers = owned_map(&rotating.sign(0, "msg_1", T, b"{}"));
            assert_eq!(
                rotating.verify(&headers, b"{}", T),
                Ok(Verified { key_index: 0 }),
                "{scheme:?}"
            );
            assert_eq!(
                old.verify(&headers, b"{}", T),
                Err(VerifyError::NoSignatureMatched),
                "{scheme:?}"
            );
        }
    }

    #[test]
    fn a_verifier_applies_its_tolerance_in_both_directions_where_a_timestamp_is_signed() {
        for scheme in ALL {
            let v = verifier(scheme, &[secret(scheme)], 10);
            let headers = owned_map(&v.sign(0, "msg_1", T, b"{}"));
            assert!(v.verify(&headers, b"{}", T + 10).is_ok(), "{scheme:?}");
            assert!(v.verify(&headers, b"{}", T - 10).is_ok(), "{scheme:?}");
            for now in [T + 11, T - 11] {
                let expected = if v.signs_timestamp() {
                    Err(VerifyError::TimestampOutsideTolerance)
                } else {
                    Ok(Verified { key_index: 0 })
                };
                assert_eq!(v.verify(&headers, b"{}", now), expected, "{scheme:?}");
            }
        }
    }

    #[test]
    fn a_verifier_reports_its_configuration() {
        let v = verifier(Scheme::Slack, &["a", "b", "c"], 42);
        assert_eq!(v.scheme(), Scheme::Slack);
        assert_eq!(v.tolerance_secs(), 42);
        assert_eq!(v.key_count(), 3);
        assert_eq!(v.generic(), None);
        assert!(v.signs_timestamp());
        assert_eq!(v.signature_header(), "x-slack-signature");

        let v = verifier(Scheme::GenericHmac, &["a"], 300);
        assert_eq!(v.scheme(), Scheme::GenericHmac);
        assert_eq!(v.generic(), Some(&generic_with_timestamp()));
        assert!(v.signs_timestamp());
        assert_eq!(v.signature_header(), "x-signature");

        let mut config = generic_with_timestamp();
        config.timestamp_header = None;
        config.signed_payload = None;
        let v = Verifier::new(Scheme::GenericHmac, &["a"], 300, Some(config)).unwrap();
        assert!(!v.signs_timestamp());
    }

    #[test]
    fn a_verifier_needs_at_least_one_secret() {
        for scheme in ALL {
            assert_eq!(
                Verifier::new(scheme, &[], 300, generic_for(scheme)).unwrap_err(),
                VerifierError::NoSecrets
            );
        }
    }

    #[test]
    fn a_bad_secret_is_reported_with_its_index_for_every_scheme() {
        for scheme in ALL {
            assert_eq!(
                Verifier::new(scheme, &[secret(scheme), ""], 300, generic_for(scheme)).unwrap_err(),
                VerifierError::Key {
                    index: 1,
                    error: KeyError::Empty
                },
                "{scheme:?}"
            );
        }
        assert_eq!(
            Verifier::new(Scheme::StandardWebhooks, &["whsec_%%%"], 300, None).unwrap_err(),
            VerifierError::Key {
                index: 0,
                error: KeyError::NotBase64
            }
        );
    }

    #[test]
    fn a_generic_configuration_is_required_for_generic_hmac_and_refused_for_the_others() {
        assert_eq!(
            Verifier::new(Scheme::GenericHmac, &["a"], 300, None).unwrap_err(),
            VerifierError::MissingGeneric
        );
        for scheme in FIXED {
            assert_eq!(
                Verifier::new(scheme, &["a"], 300, Some(generic_with_timestamp())).unwrap_err(),
                VerifierError::UnexpectedGeneric(scheme)
            );
        }
    }

    #[test]
    fn an_invalid_generic_configuration_is_refused_with_its_reason() {
        let mut config = generic_with_timestamp();
        config.signature_header = "not a header".to_owned();
        let error =
            Verifier::new(Scheme::GenericHmac, &["a"], 300, Some(config.clone())).unwrap_err();
        assert_eq!(
            error,
            VerifierError::Generic(config.validate().unwrap_err())
        );
        assert!(error.to_string().contains("signature_header"), "{error}");
    }

    #[test]
    fn the_generic_configuration_is_checked_before_the_secrets() {
        let mut config = generic_with_timestamp();
        config.signed_payload = Some("{nobody}".to_owned());
        assert!(matches!(
            Verifier::new(Scheme::GenericHmac, &[], 300, Some(config)),
            Err(VerifierError::Generic(_))
        ));
    }

    #[test]
    fn verifier_errors_and_debug_never_show_a_secret() {
        let secret = "super-secret-value";
        let v = verifier(Scheme::GenericHmac, &[secret], 300);
        let printed = format!("{v:?}");
        assert!(!printed.contains(secret), "{printed}");
        assert!(printed.contains("SigningKey([redacted])"), "{printed}");
        let error = Verifier::new(Scheme::StandardWebhooks, &["whsec_super*secret"], 300, None)
            .unwrap_err();
        assert!(!error.to_string().contains("super"), "{error}");
        assert_eq!(error.to_string(), "signing secret #0: signing secret is not base64 (standard-webhooks secrets are whsec_<base64>)");
    }

    #[test]
    #[should_panic(expected = "index out of bounds")]
    fn signing_with_a_key_index_beyond_the_keys_panics() {
        let _ = verifier(Scheme::Github, &["a"], 300).sign(1, "m", T, b"{}");
    }

    #[test]
    fn a_verifier_missing_its_signature_header_names_it() {
        for scheme in ALL {
            let v = verifier(scheme, &[secret(scheme)], 300);
            let mut headers = owned_map(&v.sign(0, "msg_1", T, b"{}"));
            headers.remove(v.signature_header());
            assert_eq!(
                v.verify(&headers, b"{}", T),
                Err(VerifyError::MissingHeader(
                    v.signature_header().to_owned().into()
                )),
                "{scheme:?}"
            );
        }
    }

    /// Every header name any scheme (and [`generic_with_timestamp`]) reads.
    const HEADER_NAMES: [&str; 14] = [
        "stripe-signature",
        "x-hub-signature-256",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "svix-id",
        "svix-timestamp",
        "svix-signature",
        "x-shopify-hmac-sha256",
        "x-slack-signature",
        "x-slack-request-timestamp",
        "paddle-signature",
        "x-signature",
        "x-timestamp",
    ];

    proptest! {
        #[test]
        fn unix_seconds_parser_never_panics(value in any::<String>()) {
            let _ = parse_unix_seconds(&value);
        }

        #[test]
        fn hex_decoder_never_panics(value in any::<String>()) {
            let _ = decode_lower_hex(&value);
        }

        #[test]
        fn base64_decoder_never_panics(value in any::<String>()) {
            let _ = decode_base64_tag(&value);
        }

        #[test]
        fn signing_key_new_never_panics(secret in any::<String>()) {
            for scheme in ALL {
                let _ = SigningKey::new(scheme, &secret);
            }
        }

        #[test]
        fn tolerance_check_never_panics(t in any::<i64>(), now in any::<i64>(), tol in any::<u64>()) {
            let _ = check_tolerance(t, now, tol);
        }

        #[test]
        fn verifier_verify_never_panics_on_arbitrary_headers_for_every_scheme(
            pairs in proptest::collection::vec(
                (0..HEADER_NAMES.len(), proptest::collection::vec(any::<u8>(), 0..200)),
                0..10,
            ),
            body in proptest::collection::vec(any::<u8>(), 0..200),
            now in any::<i64>(),
            tolerance in any::<u64>(),
        ) {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                if let Ok(value) = http::HeaderValue::from_bytes(&value) {
                    headers.append(HEADER_NAMES[name], value);
                }
            }
            for scheme in ALL {
                let v = verifier(scheme, &[secret(scheme)], tolerance);
                let _ = v.verify(&headers, &body, now);
            }
            let mut plain = generic_with_timestamp();
            plain.timestamp_header = None;
            plain.signed_payload = None;
            plain.prefix = None;
            plain.encoding = Encoding::Hex;
            let v = Verifier::new(Scheme::GenericHmac, &["k"], tolerance, Some(plain)).unwrap();
            let _ = v.verify(&headers, &body, now);
        }

        #[test]
        fn verifier_new_never_panics_on_arbitrary_secrets(
            secrets in proptest::collection::vec(any::<String>(), 0..4),
            tolerance in any::<u64>(),
        ) {
            let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
            for scheme in ALL {
                let _ = Verifier::new(scheme, &secrets, tolerance, generic_for(scheme));
            }
        }

        #[test]
        fn a_verifier_round_trips_any_body_and_timestamp_for_every_scheme(
            body in proptest::collection::vec(any::<u8>(), 0..200),
            timestamp in 0..i64::MAX,
        ) {
            for scheme in ALL {
                let v = verifier(scheme, &[secret(scheme)], 0);
                let headers = owned_map(&v.sign(0, "msg_1", timestamp, &body));
                prop_assert_eq!(v.verify(&headers, &body, timestamp), Ok(Verified { key_index: 0 }));
            }
        }
    }
}
