//! [`Scheme`]: which signing scheme a source uses.

/// Which signing scheme a source uses.
///
/// In configuration (serde) the names are those of [`Scheme::name`]: the presets of the scheme
/// model ([`crate::presets`]: `"stripe"`, `"github"`, `"standard-webhooks"`, `"twilio"`, ...)
/// and `"generic-hmac"` (the model configured per source). Svix signs with Standard Webhooks (its `svix-*` header names are accepted too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    /// Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, see [`stripe`](crate::stripe).
    Stripe,
    /// GitHub: `X-Hub-Signature-256: sha256=<hex>`, see [`github`](crate::github).
    Github,
    /// Standard Webhooks (and Svix): `webhook-id`, `webhook-timestamp` and
    /// `webhook-signature: v1,<base64> ...`, see [`standard_webhooks`](crate::standard_webhooks).
    /// The senders that use it can be named: `"svix"`, `"clerk"`, `"resend"`, `"openai"`,
    /// `"liveblocks"`, `"brex"` are aliases.
    #[serde(
        alias = "svix",
        alias = "clerk",
        alias = "resend",
        alias = "openai",
        alias = "liveblocks",
        alias = "brex"
    )]
    StandardWebhooks,
    /// Shopify: `X-Shopify-Hmac-Sha256: <base64>`, see [`shopify`](crate::shopify).
    Shopify,
    /// Slack: `X-Slack-Request-Timestamp` and `X-Slack-Signature: v0=<hex>`, see [`slack`](crate::slack).
    Slack,
    /// Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>...]`, see [`paddle`](crate::paddle).
    Paddle,
    /// A configurable HMAC ([`GenericHmac`](crate::GenericHmac): header, algorithm, encoding, prefix, optional
    /// timestamp, signed-payload template), see [`generic`](crate::generic). Verified only through a
    /// [`Verifier`](crate::Verifier), which holds the configuration.
    GenericHmac,
    /// Twilio: HMAC-SHA1 of the URL and the sorted form fields, see
    /// [`presets`](crate::presets) (twilio.rs).
    Twilio,
    /// Square: HMAC-SHA256 of the notification URL and the body.
    Square,
    /// Intercom: HMAC-SHA1 of the body, `X-Hub-Signature: sha1=...`.
    Intercom,
    /// Linear: HMAC-SHA256 of the body, `webhookTimestamp` in the body.
    Linear,
    /// Zoom: HMAC-SHA256 of `v0:{ts}:{body}`, plus the URL validation handshake.
    Zoom,
    /// Discord interactions: Ed25519 of `{ts}{body}`, plus the PING handshake.
    Discord,
    /// Twitch EventSub: HMAC-SHA256 of id + timestamp + body, plus the callback verification.
    Twitch,
    /// Mailgun: HMAC-SHA256 of the body's `signature.timestamp` and `signature.token`.
    Mailgun,
    /// Standard Webhooks `v1a`: Ed25519 of `{id}.{ts}.{body}` (configuration name
    /// `"standard-webhooks-v1a"`).
    #[serde(rename = "standard-webhooks-v1a")]
    StandardWebhooksV1a,
    /// SendGrid Event Webhook: ECDSA P-256 of `{ts}{body}`; a batch.
    Sendgrid,
    /// HubSpot signature v3: HMAC-SHA256 of method + URI + body + timestamp; a batch.
    Hubspot,
    /// GitLab: the `X-Gitlab-Token` shared token (no signature).
    Gitlab,
    /// Adyen standard webhooks: a batch whose items are signed one by one (HMAC-SHA256).
    Adyen,
    /// Meta (Pages, Instagram, WhatsApp): `X-Hub-Signature-256`, a batch of entries, and the
    /// GET subscription check.
    Meta,
}

impl Scheme {
    /// Every scheme, in the providers table's order.
    pub const ALL: [Scheme; 21] = [
        Scheme::Stripe,
        Scheme::Github,
        Scheme::StandardWebhooks,
        Scheme::Shopify,
        Scheme::Slack,
        Scheme::Paddle,
        Scheme::Twilio,
        Scheme::Square,
        Scheme::Intercom,
        Scheme::Linear,
        Scheme::Zoom,
        Scheme::Discord,
        Scheme::Twitch,
        Scheme::Mailgun,
        Scheme::StandardWebhooksV1a,
        Scheme::Sendgrid,
        Scheme::Hubspot,
        Scheme::Gitlab,
        Scheme::Adyen,
        Scheme::Meta,
        Scheme::GenericHmac,
    ];

    /// The configuration name, as in the sources JSON: `"stripe"`, `"standard-webhooks-v1a"`...
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Stripe => "stripe",
            Self::Github => "github",
            Self::StandardWebhooks => "standard-webhooks",
            Self::Shopify => "shopify",
            Self::Slack => "slack",
            Self::Paddle => "paddle",
            Self::GenericHmac => "generic-hmac",
            Self::Twilio => "twilio",
            Self::Square => "square",
            Self::Intercom => "intercom",
            Self::Linear => "linear",
            Self::Zoom => "zoom",
            Self::Discord => "discord",
            Self::Twitch => "twitch",
            Self::Mailgun => "mailgun",
            Self::StandardWebhooksV1a => "standard-webhooks-v1a",
            Self::Sendgrid => "sendgrid",
            Self::Hubspot => "hubspot",
            Self::Gitlab => "gitlab",
            Self::Adyen => "adyen",
            Self::Meta => "meta",
        }
    }
}
