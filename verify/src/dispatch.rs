//! The dispatch from a [`Scheme`] to its preset's model: verify and sign without a
//! [`crate::Verifier`], key a secret for a scheme, and the scheme's facts (does it sign a
//! timestamp, which header carries its signature).

use http::HeaderMap;

use crate::generic;
use crate::key::{KeyError, SigningKey};
use crate::outcome::{Verified, VerifyError};
use crate::request::Request;
use crate::scheme::Scheme;

/// Verify `body` (the exact raw bytes received) against every key, for a built-in `scheme`,
/// through its preset's model ([`crate::presets`]).
///
/// `now` is the current time in unix seconds (injected clock). `tolerance_secs` (seconds)
/// applies where the scheme signs a timestamp ([`Scheme::signs_timestamp`]), in both directions:
/// `|now - t| <= tolerance_secs` is accepted, one second more is rejected. Header lookup is
/// case-insensitive ([`http::HeaderMap`]). The request is a POST with no URL: a scheme that
/// signs the URL (Twilio, Square, HubSpot) needs [`crate::Verifier::verify_request`].
///
/// A [`Scheme::GenericHmac`] source's rules are data this function does not have: such sources
/// are verified through [`Verifier::verify`](crate::Verifier::verify), and here they are always
/// [`VerifyError::MissingConfig`]. [`Verifier`](crate::Verifier) works for every scheme and is
/// the preferred API.
///
/// # Errors
///
/// [`VerifyError::MissingConfig`] for [`Scheme::GenericHmac`] or a scheme that signs the URL;
/// [`VerifyError::NoKeys`] if `keys` is empty; otherwise [`VerifyError::MissingHeader`],
/// [`VerifyError::MalformedHeader`], [`VerifyError::TimestampOutsideTolerance`] (checked
/// before any MAC is computed), [`VerifyError::MissingSignedField`] or
/// [`VerifyError::NoSignatureMatched`].
pub fn verify(
    scheme: Scheme,
    keys: &[SigningKey],
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
    tolerance_secs: u64,
) -> Result<Verified, VerifyError> {
    let prepared = crate::presets::prepared(scheme).ok_or(VerifyError::MissingConfig)?;
    generic::verify(
        prepared,
        keys,
        &Request::post(headers, body),
        now,
        tolerance_secs,
    )
}

/// Sign `body` as the provider of a built-in `scheme` would (tests, the local dev tool, replay).
///
/// Returns the headers to set, as `(lowercase name, value)` pairs, in a fixed order: the
/// headers the signed content names (set to `msg_id`: Standard Webhooks' `webhook-id`), the
/// timestamp's, then the signature's. `msg_id` must be a valid header value (visible ASCII)
/// and non-empty to verify where it is signed. `timestamp` is unix seconds, ignored where no
/// timestamp is signed; it must be non-negative to verify. `key` must have been prepared for
/// the same `scheme` ([`SigningKey::new`]). Empty for [`Scheme::GenericHmac`] (the
/// configuration is needed: [`Verifier::sign`](crate::Verifier::sign)), for a scheme that signs
/// the URL or reads signed body fields the body lacks, and for a public-key scheme (a
/// [`crate::PrivateKey`] signs those: [`crate::generic::sign`]).
#[must_use]
pub fn sign(
    scheme: Scheme,
    key: &SigningKey,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Vec<(String, String)> {
    match crate::presets::prepared(scheme) {
        Some(prepared) => generic::sign_with_id(prepared, key, msg_id, timestamp, body),
        None => Vec::new(),
    }
}

impl SigningKey {
    /// Prepare `secret` (the string as configured, used verbatim: no trimming) for `scheme`, as
    /// its preset's model keys it ([`SigningKey::for_algorithm`] with the model's algorithm,
    /// `secret_encoding` and `key_prefix`). The key bytes are:
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
    /// - the other presets: as their files say (a public key for Discord, SendGrid, ...);
    /// - [`Scheme::GenericHmac`]: the secret's UTF-8 bytes, for HMAC-SHA256. Such sources are
    ///   built through [`Verifier::new`](crate::Verifier::new), which keys them as configured.
    ///
    /// # Errors
    ///
    /// [`KeyError::Empty`] if the secret is empty (for Standard Webhooks: nothing after the
    /// prefix, or it decodes to no bytes); [`KeyError::NotBase64`] if a Standard Webhooks secret
    /// does not decode; [`KeyError::PublicKey`] for a public key that does not parse. No error
    /// carries the secret.
    pub fn new(scheme: Scheme, secret: &str) -> Result<SigningKey, KeyError> {
        let Some(model) = crate::presets::prepared(scheme).map(generic::Prepared::config) else {
            return SigningKey::for_algorithm(
                crate::Algorithm::Sha256,
                secret,
                crate::SecretEncoding::Utf8,
                None,
            );
        };
        SigningKey::for_algorithm(
            model.algorithm,
            secret,
            model.secret_encoding,
            model.key_prefix.as_deref(),
        )
    }
}

impl Scheme {
    /// Whether the scheme signs a timestamp, so that the tolerance applies.
    ///
    /// Stripe (`t=`), Standard Webhooks (`webhook-timestamp`), Slack
    /// (`X-Slack-Request-Timestamp`), Paddle (`ts=`) and the presets that sign one do; GitHub and
    /// Shopify do not (such a delivery can be replayed by whoever captured it; the ledger's
    /// idempotency absorbs it). For [`Scheme::GenericHmac`] it depends on the configuration:
    /// this returns `false`, and [`Verifier::signs_timestamp`](crate::Verifier::signs_timestamp)
    /// gives the answer for a configured source.
    #[must_use]
    pub fn signs_timestamp(self) -> bool {
        crate::presets::prepared(self).is_some_and(generic::Prepared::signs_timestamp)
    }

    /// Name of the header that carries the signature, lowercase, for logs and docs:
    /// `"stripe-signature"`, `"x-hub-signature-256"`, `"webhook-signature"`, ..., or
    /// `body <pointer>` for a preset that reads it from the body (Mailgun, Adyen).
    ///
    /// For [`Scheme::GenericHmac`] the header is configured per source: this returns
    /// [`generic::CONFIGURED_HEADER`] (`"(configured per source)"`, not a header name), and
    /// [`Verifier::signature_header`](crate::Verifier::signature_header) gives the configured name.
    #[must_use]
    pub fn signature_header(self) -> &'static str {
        crate::presets::prepared(self).map_or(
            generic::CONFIGURED_HEADER,
            generic::Prepared::signature_header,
        )
    }
}
