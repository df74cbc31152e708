//! The presets: the providers hookledger knows by name, each a [`GenericHmac`] (the scheme
//! model) plus what a team needs to run it: the event id and type, the retry horizon, the
//! handshake it answers, whether it batches, and the provider's documentation as the source.
//! One file per provider.
//!
//! Every built-in scheme is a preset, the six first ones too (Stripe, GitHub, Standard Webhooks,
//! Shopify, Slack, Paddle): their signatures are verified by the model, and their event ids and
//! types are read by code (their models have no event id or type rule: Slack's three body kinds and GitHub's form
//! payload have no words in the model).

use std::sync::OnceLock;

use crate::generic::{GenericHmac, Prepared};
use crate::key::SigningKey;
use crate::scheme::Scheme;

mod adyen;
mod discord;
pub mod github;
mod gitlab;
mod hubspot;
mod intercom;
mod linear;
mod mailgun;
mod meta;
pub mod paddle;
mod sendgrid;
pub mod shopify;
pub mod slack;
mod square;
pub mod standard_webhooks;
mod standard_webhooks_v1a;
pub mod stripe;
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
    /// The signing rules as data (every preset has them; an `Option` for presets to come that
    /// the model cannot express).
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

impl Preset {
    /// A preset's facts for the providers table, with no model, no handshake, no batch and the
    /// default tolerance: the start of every preset's literal.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn row(
        scheme: Scheme,
        provider: &'static str,
        signed: &'static str,
        event_id: &'static str,
        event_type: &'static str,
        retry_horizon_hours: u64,
        replay: bool,
        source: &'static str,
    ) -> Preset {
        Preset {
            scheme,
            provider,
            model: None,
            signed,
            event_id,
            event_type,
            retry_horizon_hours,
            default_tolerance_secs: None,
            handshake: None,
            batch: false,
            replay,
            source,
        }
    }

    /// The model, validated and prepared for deliveries.
    ///
    /// # Errors
    ///
    /// The model's first broken rule ([`GenericHmac::validate`]), or a sentence when the preset
    /// has no model.
    pub(crate) fn prepare(&self) -> Result<Prepared, String> {
        let model = self.model.clone().ok_or("the preset has no model")?;
        Prepared::for_preset(model)
    }
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
        Scheme::Stripe => stripe::preset(),
        Scheme::Github => github::preset(),
        Scheme::StandardWebhooks => standard_webhooks::preset(),
        Scheme::Shopify => shopify::preset(),
        Scheme::Slack => slack::preset(),
        Scheme::Paddle => paddle::preset(),
        Scheme::GenericHmac => return None,
    })
}

/// A preset's own naming rule beyond its model's, applied to the id and type the model read
/// from a verified delivery (`body`: its JSON document, if any): Twitch's revocations are typed
/// `revocation`; Twilio's ids must be in Twilio's own formats. `None` when the id is refused.
pub(crate) fn refine_names(
    scheme: Scheme,
    body: Option<&serde_json::Value>,
    id: Option<String>,
    event_type: Option<String>,
) -> Option<(Option<String>, Option<String>)> {
    match scheme {
        Scheme::Twitch => {
            let revocation = body.and_then(twitch::revocation_type);
            Some((id, revocation.or(event_type)))
        }
        Scheme::Twilio if id.as_deref().is_some_and(|id| !twilio::id_is_canonical(id)) => None,
        _ => Some((id, event_type)),
    }
}

/// The prepared model of `scheme`'s preset, built once per process; `None` for
/// [`Scheme::GenericHmac`] (configured per source).
///
/// A preset's model is checked by the tests of this module: one that did not validate would
/// be `None` here, and [`crate::Verifier::new`] reports it.
pub(crate) fn prepared(scheme: Scheme) -> Option<&'static Prepared> {
    static PREPARED: OnceLock<Vec<(Scheme, Prepared)>> = OnceLock::new();
    PREPARED
        .get_or_init(|| {
            Scheme::ALL
                .iter()
                .filter_map(|scheme| Some((*scheme, preset(*scheme)?.prepare().ok()?)))
                .collect()
        })
        .iter()
        .find(|(each, _)| *each == scheme)
        .map(|(_, prepared)| prepared)
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
