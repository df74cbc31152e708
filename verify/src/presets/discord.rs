//! Discord interactions: `X-Signature-Ed25519` (hex) over `{X-Signature-Timestamp}{body}`,
//! verified with the application's public key, 64 hex digits as the developer portal shows it
//! (Discord docs, "Interactions: security and authorization",
//! <https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers>).
//!
//! - Handshake: an interaction of `"type": 1` (PING) is answered `{"type": 1}` (PONG) and never
//!   recorded; Discord sends it when the endpoint is saved, and also sends deliberately bad
//!   signatures, which get 401.
//! - The id is the interaction's `id`, the type its numeric `type` (2 is an application
//!   command), both signed.
//! - Discord does not retry an interaction (the user sees it fail): the horizon is one hour, the
//!   shortest retention accepts.

use super::{Handshake, Preset};
use crate::generic::{Algorithm, GenericHmac};
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Discord,
        provider: "Discord (interactions)",
        model: Some(GenericHmac {
            signature_header: Some("X-Signature-Ed25519".into()),
            algorithm: Algorithm::Ed25519,
            timestamp_header: Some("X-Signature-Timestamp".into()),
            signed_payload: Some("{timestamp}{body}".into()),
            event_id_pointer: Some("/id".into()),
            event_type_pointer: Some("/type".into()),
            ..GenericHmac::default()
        }),
        signed: "Ed25519 of `{timestamp}{body}` (hex)",
        event_id: "body `id`",
        event_type: "body `type`",
        retry_horizon_hours: 1,
        default_tolerance_secs: None,
        handshake: Some(Handshake::DiscordPing),
        batch: false,
        replay: false,
        source: "https://discord.com/developers/docs/interactions/overview",
    }
}
