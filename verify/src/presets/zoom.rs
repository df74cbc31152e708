//! Zoom: `x-zm-signature: v0=<hex>`, HMAC-SHA256 keyed with the app's secret token over
//! `v0:{x-zm-request-timestamp}:{body}` (Zoom docs, "Using webhooks: verify webhook events",
//! <https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events>).
//!
//! - Handshake: the signed `endpoint.url_validation` event is answered `{"plainToken": ...,
//!   "encryptedToken": hex(HMAC-SHA256(secret token, plainToken))}` and never recorded (Zoom
//!   sends it when the URL is saved and every 72 hours).
//! - Zoom gives no event id: the id is the event name and its `event_ts` (milliseconds), both
//!   signed, e.g. `meeting.started:1796302800123`.
//! - Retries: three, after 5, 30 and 90 minutes: the horizon is 3 hours.

use super::{Handshake, Preset};
use crate::generic::GenericHmac;
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Zoom,
        provider: "Zoom",
        model: Some(GenericHmac {
            signature_header: Some("x-zm-signature".into()),
            prefix: Some("v0=".into()),
            timestamp_header: Some("x-zm-request-timestamp".into()),
            signed_payload: Some("v0:{timestamp}:{body}".into()),
            event_id: Some("{field:/event}:{field:/event_ts}".into()),
            event_type_pointer: Some("/event".into()),
            ..GenericHmac::default()
        }),
        signed: "HMAC-SHA256 of `v0:{timestamp}:{body}`",
        event_id: "body `event` + `:` + `event_ts`",
        event_type: "body `event`",
        retry_horizon_hours: 3,
        default_tolerance_secs: None,
        handshake: Some(Handshake::ZoomUrlValidation),
        batch: false,
        replay: false,
        source: "https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events",
    }
}
