//! Intercom: `X-Hub-Signature: sha1=<hex>`, HMAC-SHA1 of the raw body keyed with the app's
//! client secret (Intercom docs, "Webhooks: signed notifications",
//! <https://developers.intercom.com/docs/references/webhooks/webhook-models>).
//!
//! - No timestamp is signed; the notification's `id` and `topic` are in the signed body.
//! - Retries: one retry after a minute, then the subscription may be paused; the horizon is one
//!   hour.

use super::Preset;
use crate::generic::{Algorithm, GenericHmac};
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Intercom,
        provider: "Intercom",
        model: Some(GenericHmac {
            signature_header: Some("X-Hub-Signature".into()),
            prefix: Some("sha1=".into()),
            algorithm: Algorithm::Sha1,
            event_id_pointer: Some("/id".into()),
            event_type_pointer: Some("/topic".into()),
            ..GenericHmac::default()
        }),
        signed: "HMAC-SHA1 of the body (`sha1=` hex)",
        event_id: "body `id`",
        event_type: "body `topic`",
        retry_horizon_hours: 1,
        default_tolerance_secs: None,
        handshake: None,
        batch: false,
        replay: false,
        source: "https://developers.intercom.com/docs/references/webhooks/webhook-models",
    }
}
