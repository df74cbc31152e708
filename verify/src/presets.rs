//! The presets: the providers hookledger knows by name, each a [`GenericHmac`] (the scheme
//! model) plus what a team needs to run it: the event id and type, the retry horizon, the
//! handshake it answers, whether it batches, and the provider's documentation as the source.
//! One file per provider.
//!
//! The fixed schemes (Stripe, GitHub, Standard Webhooks, Shopify, Slack, Paddle) keep their own
//! modules; their rows in the providers table come from [`fixed`].

use crate::generic::GenericHmac;
use crate::key::SigningKey;
use crate::scheme::Scheme;

mod adyen;
mod discord;
mod gitlab;
mod hubspot;
mod intercom;
mod linear;
mod mailgun;
mod meta;
mod sendgrid;
mod square;
mod standard_webhooks_v1a;
#[cfg(test)]
mod tests;
mod twilio;
mod twitch;
mod zoom;

#[cfg(test)]
mod table_tests {
    /// docs/guide/providers.md carries the table [`super::providers_table`] renders: a new or
    /// changed preset is a changed table (run `cargo test -p hookledger-verify` and paste).
    #[test]
    fn the_guide_has_the_providers_table_of_the_presets() {
        let guide = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/guide/providers.md"),
        )
        .unwrap();
        let table = super::providers_table();
        assert!(
            guide.contains(&table),
            "docs/guide/providers.md must contain the providers table:\n{table}"
        );
    }
}

/// A handshake: a request the provider sends to check the endpoint, answered by the receiver
/// and never recorded as an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// Slack: a signed `{"type": "url_verification", "challenge": ...}`, answered
    /// `{"challenge": ...}`.
    SlackUrlVerification,
    /// Zoom: a signed `endpoint.url_validation` event, answered `{"plainToken": ...,
    /// "encryptedToken": hex(HMAC-SHA256(secret token, plainToken))}`.
    ZoomUrlValidation,
    /// Discord: a signed interaction of `"type": 1` (PING), answered `{"type": 1}` (PONG).
    DiscordPing,
    /// Twitch EventSub: a signed delivery with `Twitch-Eventsub-Message-Type:
    /// webhook_callback_verification`, answered with the body's `challenge` as `text/plain`.
    TwitchCallbackVerification,
    /// Meta: an unsigned GET `?hub.mode=subscribe&hub.verify_token=...&hub.challenge=...`,
    /// answered with the challenge as `text/plain` when the token is the source's
    /// `verify_token` (the receiver function's GET route).
    MetaSubscribe,
}

/// What a handshake is answered with (status 200).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeAnswer {
    /// `application/json`, or `text/plain` for Twitch.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl Handshake {
    /// The answer to this handshake's request: `token` is what extraction found (Slack's and
    /// Twitch's challenge, Zoom's `plainToken`, empty for Discord); `key` is the key that verified
    /// the request (Zoom answers with its HMAC-SHA256 of the token, hex).
    #[must_use]
    pub fn answer(self, token: &str, key: &SigningKey) -> HandshakeAnswer {
        let json = |value: serde_json::Value| HandshakeAnswer {
            content_type: "application/json",
            body: value.to_string(),
        };
        match self {
            Self::SlackUrlVerification => json(serde_json::json!({ "challenge": token })),
            Self::ZoomUrlValidation => json(serde_json::json!({
                "plainToken": token,
                "encryptedToken": hex::encode(key.tag(&[token.as_bytes()])),
            })),
            Self::DiscordPing => json(serde_json::json!({ "type": 1 })),
            Self::TwitchCallbackVerification | Self::MetaSubscribe => HandshakeAnswer {
                content_type: "text/plain",
                body: token.to_owned(),
            },
        }
    }

    /// A short description for the providers table.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::SlackUrlVerification => "`url_verification` challenge",
            Self::ZoomUrlValidation => "`endpoint.url_validation` (HMAC of the plainToken)",
            Self::DiscordPing => "PING answered PONG",
            Self::TwitchCallbackVerification => "`webhook_callback_verification` challenge",
            Self::MetaSubscribe => "GET `hub.challenge` with the `verify_token`",
        }
    }
}

/// A provider preset: its scheme, its model and the facts beside it.
#[derive(Debug, Clone)]
pub struct Preset {
    /// The scheme's configuration name.
    pub scheme: Scheme,
    /// The provider, as its documentation names it.
    pub provider: &'static str,
    /// The signing rules as data; `None` for a fixed scheme (its own module).
    pub model: Option<GenericHmac>,
    /// What is signed, in words, e.g. `` `{t}.{body}` ``.
    pub signed: &'static str,
    /// Where the event id is, in words.
    pub event_id: &'static str,
    /// Where the event type is, in words.
    pub event_type: &'static str,
    /// How long the provider retries a failed delivery, hours (the minimum retention's part).
    pub retry_horizon_hours: u64,
    /// The timestamp tolerance a source of this scheme gets when it sets none, seconds;
    /// `None`: [`crate::DEFAULT_TOLERANCE_SECS`].
    pub default_tolerance_secs: Option<u64>,
    /// The handshake the receiver answers, if any.
    pub handshake: Option<Handshake>,
    /// Whether one delivery can carry several events.
    pub batch: bool,
    /// Whether `hookledger replay` can pull missed events back from the provider's API.
    pub replay: bool,
    /// The provider's documentation this preset follows.
    pub source: &'static str,
}

/// The preset of `scheme`; `None` for [`Scheme::GenericHmac`], which is configured per source.
#[must_use]
pub fn preset(scheme: Scheme) -> Option<Preset> {
    Some(match scheme {
        Scheme::Twilio => twilio::preset(),
        Scheme::Square => square::preset(),
        Scheme::Intercom => intercom::preset(),
        Scheme::Linear => linear::preset(),
        Scheme::Zoom => zoom::preset(),
        Scheme::Discord => discord::preset(),
        Scheme::Twitch => twitch::preset(),
        Scheme::Mailgun => mailgun::preset(),
        Scheme::StandardWebhooksV1a => standard_webhooks_v1a::preset(),
        Scheme::Sendgrid => sendgrid::preset(),
        Scheme::Hubspot => hubspot::preset(),
        Scheme::Gitlab => gitlab::preset(),
        Scheme::Adyen => adyen::preset(),
        Scheme::Meta => meta::preset(),
        Scheme::GenericHmac => return None,
        fixed_scheme => fixed(fixed_scheme)?,
    })
}

/// The handshake `scheme`'s receiver answers, if any ([`Preset::handshake`]).
#[must_use]
pub fn handshake(scheme: Scheme) -> Option<Handshake> {
    preset(scheme).and_then(|preset| preset.handshake)
}

/// Every scheme with a preset, in the providers table's order.
#[must_use]
pub fn all() -> Vec<Preset> {
    Scheme::ALL
        .iter()
        .filter_map(|scheme| preset(*scheme))
        .collect()
}

/// The providers table of docs/guide/providers.md, rendered from the presets (a test checks
/// the guide carries exactly this): provider, scheme, what is signed, id, type, retry horizon,
/// handshake, batch, replay. Markdown, one row per preset, `Scheme::ALL` order.
#[must_use]
pub fn providers_table() -> String {
    let mut table = String::from(
        "| provider | `scheme` | what is signed | event id | event type | retry horizon | \
         handshake | batch | replay |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for preset in all() {
        let hours = preset.retry_horizon_hours;
        let horizon = if hours % 24 == 0 && hours >= 48 {
            format!("{} days", hours / 24)
        } else if hours == 1 {
            "1 hour".to_owned()
        } else {
            format!("{hours} hours")
        };
        table.push_str(&format!(
            "| [{}]({}) | `{}` | {} | {} | {} | {} | {} | {} | {} |\n",
            preset.provider,
            preset.source,
            preset.scheme.name(),
            preset.signed,
            preset.event_id,
            preset.event_type,
            horizon,
            preset.handshake.map_or("none", Handshake::label),
            if preset.batch { "yes" } else { "no" },
            if preset.replay { "yes" } else { "no" },
        ));
    }
    table
}

/// The table rows of the fixed schemes (their rules live in their own modules).
fn fixed(scheme: Scheme) -> Option<Preset> {
    let row = |provider, signed, event_id, event_type, hours, replay, source| Preset {
        scheme,
        provider,
        model: None,
        signed,
        event_id,
        event_type,
        retry_horizon_hours: hours,
        default_tolerance_secs: None,
        handshake: None,
        batch: false,
        replay,
        source,
    };
    Some(match scheme {
        Scheme::Stripe => row(
            "Stripe",
            "HMAC-SHA256 of `{t}.{body}` (`Stripe-Signature: t=...,v1=...`)",
            "body `id`",
            "body `type`",
            72,
            true,
            "https://docs.stripe.com/webhooks#verify-manually",
        ),
        Scheme::Github => row(
            "GitHub",
            "HMAC-SHA256 of the body (`X-Hub-Signature-256: sha256=...`)",
            "header `X-GitHub-Delivery` (not signed)",
            "header `X-GitHub-Event` (not signed)",
            72,
            true,
            "https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries",
        ),
        Scheme::StandardWebhooks => row(
            "Standard Webhooks (Svix, Clerk, Resend, OpenAI, ...)",
            "HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`",
            "header `webhook-id` (signed)",
            "body `type`",
            76,
            false,
            "https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md",
        ),
        Scheme::Shopify => row(
            "Shopify",
            "HMAC-SHA256 of the body (`X-Shopify-Hmac-Sha256`, base64)",
            "header `X-Shopify-Event-Id` (not signed)",
            "header `X-Shopify-Topic` (not signed)",
            4,
            false,
            "https://shopify.dev/docs/apps/build/webhooks/subscribe/https",
        ),
        Scheme::Slack => Preset {
            handshake: Some(Handshake::SlackUrlVerification),
            ..row(
                "Slack",
                "HMAC-SHA256 of `v0:{timestamp}:{body}`",
                "body `event_id`, or the form's `trigger_id`",
                "body `event.type`",
                1,
                false,
                "https://api.slack.com/authentication/verifying-requests-from-slack",
            )
        },
        Scheme::Paddle => row(
            "Paddle Billing",
            "HMAC-SHA256 of `{ts}:{body}` (`Paddle-Signature: ts=...;h1=...`)",
            "body `event_id`",
            "body `event_type`",
            72,
            true,
            "https://developer.paddle.com/webhooks/signature-verification",
        ),
        _ => return None,
    })
}
