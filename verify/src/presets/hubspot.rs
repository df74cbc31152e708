//! HubSpot webhooks, signature v3: `X-HubSpot-Signature-v3`, base64 of HMAC-SHA256 keyed with
//! the app's client secret over the method, the URI, the body and
//! `X-HubSpot-Request-Timestamp` (unix milliseconds), concatenated; HubSpot rejects
//! timestamps older than five minutes (HubSpot docs, "Validating requests",
//! <https://developers.hubspot.com/docs/api/webhooks/validating-requests>; hubspot-api-client
//! `Signature.is_valid`).
//!
//! - A batch: the body is a JSON array of up to 100 events, each its own ledger row, named by
//!   its `eventId` and typed by its `subscriptionType` (`contact.creation`...), both signed.
//! - Each attempt carries its `attemptNumber` in the event: the payload identity leaves it out.
//! - The URI is signed as HubSpot called it: set `public_url` behind a proxy. HubSpot decodes a
//!   few percent-escapes of the URI before signing (`%3A`, `%2F`, `%3F`, `%40`, `%21`, `%24`,
//!   `%27`, `%28`, `%29`, `%2A`, `%2C`, `%3B`); a webhook URL with such escapes is not
//!   supported yet.
//! - Retries: up to 10 times over 24 hours.

use super::Preset;
use crate::generic::{Batch, Encoding, GenericHmac, TimestampUnit};
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Hubspot,
        provider: "HubSpot (signature v3)",
        model: Some(GenericHmac {
            signature_header: Some("X-HubSpot-Signature-v3".into()),
            encoding: Encoding::Base64,
            timestamp_header: Some("X-HubSpot-Request-Timestamp".into()),
            timestamp_unit: TimestampUnit::Milliseconds,
            signed_payload: Some("{method}{url}{body}{timestamp}".into()),
            event_id_pointer: Some("/eventId".into()),
            event_type_pointer: Some("/subscriptionType".into()),
            batch: Some(Batch::default()),
            ..GenericHmac::default()
        }),
        signed: "HMAC-SHA256 of method + URI + body + timestamp (ms), base64",
        event_id: "each item's `eventId`",
        event_type: "each item's `subscriptionType`",
        retry_horizon_hours: 24,
        default_tolerance_secs: None,
        handshake: None,
        batch: true,
        replay: false,
        source: "https://developers.hubspot.com/docs/api/webhooks/validating-requests",
    }
}
