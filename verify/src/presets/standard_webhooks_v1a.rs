//! Standard Webhooks `v1a`: the asymmetric signature of the Standard Webhooks specification,
//! Ed25519 over `{webhook-id}.{webhook-timestamp}.{body}`, written `v1a,<base64>` in the
//! space-separated `webhook-signature` list, verified with the sender's public key
//! `whpk_<base64 of 32 bytes>` (spec/standard-webhooks.md, "Signature scheme",
//! <https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md>).
//!
//! - The id is `webhook-id`, signed; the type is the body's `type`.
//! - Retries: the specification's example schedule ends after about 76 hours.

use super::Preset;
use crate::generic::{Algorithm, Encoding, GenericHmac, SignatureFormat};
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::StandardWebhooksV1a,
        provider: "Standard Webhooks v1a (Ed25519)",
        model: Some(GenericHmac {
            signature_header: Some("webhook-signature".into()),
            signature_format: SignatureFormat::List {
                separator: " ".into(),
                version: "v1a,".into(),
            },
            algorithm: Algorithm::Ed25519,
            encoding: Encoding::Base64,
            key_prefix: Some("whpk_".into()),
            timestamp_header: Some("webhook-timestamp".into()),
            signed_payload: Some("{header:webhook-id}.{timestamp}.{body}".into()),
            event_id_header: Some("webhook-id".into()),
            event_type_pointer: Some("/type".into()),
            ..GenericHmac::default()
        }),
        signed: "Ed25519 of `{webhook-id}.{webhook-timestamp}.{body}` (`v1a,` base64)",
        event_id: "header `webhook-id` (signed)",
        event_type: "body `type`",
        retry_horizon_hours: 76,
        default_tolerance_secs: None,
        handshake: None,
        batch: false,
        replay: false,
        source: "https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md",
    }
}
