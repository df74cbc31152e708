//! Square: `x-square-hmacsha256-signature`, base64 of HMAC-SHA256 keyed with the subscription's
//! signature key over the notification URL followed by the raw body (Square docs, "Validate
//! webhook notifications", <https://developer.squareup.com/docs/webhooks/step3validate>; squareup
//! `WebhooksHelper.verify_signature`).
//!
//! - No timestamp is signed; the id and type are in the signed body (`event_id`, `type`).
//! - The notification URL is the one registered with Square: set `public_url` behind a proxy.
//! - Retries: up to 24 hours (<https://developer.squareup.com/docs/webhooks/troubleshooting>).

use super::Preset;
use crate::generic::{Encoding, GenericHmac};
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Square,
        provider: "Square",
        model: Some(GenericHmac {
            signature_header: Some("x-square-hmacsha256-signature".into()),
            encoding: Encoding::Base64,
            signed_payload: Some("{url}{body}".into()),
            event_id_pointer: Some("/event_id".into()),
            event_type_pointer: Some("/type".into()),
            ..GenericHmac::default()
        }),
        signed: "HMAC-SHA256 of the notification URL and the body (base64)",
        event_id: "body `event_id`",
        event_type: "body `type`",
        retry_horizon_hours: 24,
        default_tolerance_secs: None,
        handshake: None,
        batch: false,
        replay: false,
        source: "https://developer.squareup.com/docs/webhooks/step3validate",
    }
}
