//! The dispatch from a [`Scheme`] to its scheme file: the header it signs in, whether it signs a
//! timestamp, and verify and sign without a [`crate::Verifier`] (every scheme but generic-hmac).

use http::HeaderMap;

use crate::key::SigningKey;
use crate::outcome::{Verified, VerifyError};
use crate::scheme::Scheme;
use crate::{generic, github, paddle, shopify, slack, standard_webhooks, stripe};

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
/// are verified through [`Verifier::verify`](crate::Verifier::verify), and here they are always
/// [`VerifyError::MissingConfig`]. [`Verifier`](crate::Verifier) works for every scheme and is the preferred API.
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
        // A preset of the model: through a Verifier, which holds the preset's model.
        _ => Err(VerifyError::MissingConfig),
    }
}

/// Sign `body` as the provider of a fixed `scheme` would (tests, the local dev tool, replay).
///
/// Returns the headers to set, as `(lowercase name, value)` pairs, in a fixed order. `msg_id` is
/// used by Standard Webhooks (`webhook-id`, part of the signed content) and ignored by the
/// others; it must be a valid header value (visible ASCII) and non-empty to verify. `timestamp`
/// is unix seconds, ignored by GitHub and Shopify; it must be non-negative to verify. `key` must
/// have been prepared for the same `scheme`. For [`Scheme::GenericHmac`] this returns no headers
/// (the configuration is needed): use [`Verifier::sign`](crate::Verifier::sign).
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
        // A preset of the model: through a Verifier (`Verifier::sign`).
        _ => Vec::new(),
    }
}

impl Scheme {
    /// Whether the scheme signs a timestamp, so that the tolerance applies.
    ///
    /// Stripe (`t=`), Standard Webhooks (`webhook-timestamp`), Slack
    /// (`X-Slack-Request-Timestamp`) and Paddle (`ts=`) do; GitHub and Shopify do not (such a
    /// delivery can be replayed by whoever captured it; the ledger's idempotency absorbs it).
    /// For [`Scheme::GenericHmac`] it depends on the configuration: this returns `false`, and
    /// [`Verifier::signs_timestamp`](crate::Verifier::signs_timestamp) gives the answer for a configured source.
    #[must_use]
    pub fn signs_timestamp(self) -> bool {
        match self {
            Self::Stripe | Self::StandardWebhooks | Self::Slack | Self::Paddle => true,
            Self::Github | Self::Shopify | Self::GenericHmac => false,
            preset => crate::presets::preset(preset)
                .and_then(|preset| preset.model)
                .and_then(|model| model.parse().ok())
                .is_some_and(|parsed| parsed.timestamp.is_some()),
        }
    }

    /// Name of the header that carries the signature, lowercase, for logs and docs:
    /// `"stripe-signature"`, `"x-hub-signature-256"`, `"webhook-signature"`,
    /// `"x-shopify-hmac-sha256"`, `"x-slack-signature"` or `"paddle-signature"`.
    ///
    /// For [`Scheme::GenericHmac`] the header is configured per source: this returns
    /// [`generic::CONFIGURED_HEADER`] (`"(configured per source)"`, not a header name), and
    /// [`Verifier::signature_header`](crate::Verifier::signature_header) gives the configured name.
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
            // The presets' names, as their files configure them (a test checks they agree).
            Self::Twilio => "x-twilio-signature",
            Self::Square => "x-square-hmacsha256-signature",
            Self::Intercom => "x-hub-signature",
            Self::Linear => "linear-signature",
            Self::Zoom => "x-zm-signature",
            Self::Discord => "x-signature-ed25519",
            Self::Twitch => "twitch-eventsub-message-signature",
            Self::Mailgun => "body /signature/signature",
            Self::StandardWebhooksV1a => "webhook-signature",
            Self::Sendgrid => "x-twilio-email-event-webhook-signature",
            Self::Hubspot => "x-hubspot-signature-v3",
            Self::Gitlab => "x-gitlab-token",
            Self::Adyen => "body /additionalData/hmacSignature",
            Self::Meta => "x-hub-signature-256",
        }
    }
}
