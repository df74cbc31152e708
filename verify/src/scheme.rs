//! [`Scheme`]: which signing scheme a source uses.

/// Which signing scheme a source uses.
///
/// In configuration (serde) the names are `"stripe"`, `"github"`, `"standard-webhooks"`,
/// `"shopify"`, `"slack"`, `"paddle"` and `"generic-hmac"`. Svix signs with Standard Webhooks
/// (its `svix-*` header names are accepted too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    /// Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, see [`stripe`](crate::stripe).
    Stripe,
    /// GitHub: `X-Hub-Signature-256: sha256=<hex>`, see [`github`](crate::github).
    Github,
    /// Standard Webhooks (and Svix): `webhook-id`, `webhook-timestamp` and
    /// `webhook-signature: v1,<base64> ...`, see [`standard_webhooks`](crate::standard_webhooks).
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
}
