//! Linear: `Linear-Signature`, hex HMAC-SHA256 of the raw body keyed with the webhook's signing
//! secret; the body's `webhookTimestamp` (unix milliseconds) is signed with it and checked
//! against the tolerance (Linear docs, "Webhooks: securing webhooks",
//! <https://linear.app/developers/webhooks>).
//!
//! - The id is the `Linear-Delivery` header: not signed, but the timestamp is, so a captured
//!   delivery cannot come back later under another id.
//! - The type is the entity and the action, e.g. `Issue.create`.
//! - Retries: three, after 1 minute, 1 hour and 6 hours: the horizon is 8 hours.

use super::Preset;
use crate::generic::{GenericHmac, TimestampUnit};
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Linear,
        provider: "Linear",
        model: Some(GenericHmac {
            signature_header: Some("Linear-Signature".into()),
            timestamp_pointer: Some("/webhookTimestamp".into()),
            timestamp_unit: TimestampUnit::Milliseconds,
            event_id_header: Some("Linear-Delivery".into()),
            event_type: Some("{field:/type}.{field:/action}".into()),
            ..GenericHmac::default()
        }),
        signed: "HMAC-SHA256 of the body, whose `webhookTimestamp` (ms) is checked",
        event_id: "header `Linear-Delivery` (not signed; the timestamp is)",
        event_type: "body `type` + `.` + `action`",
        retry_horizon_hours: 8,
        default_tolerance_secs: None,
        handshake: None,
        batch: false,
        replay: false,
        source: "https://linear.app/developers/webhooks",
    }
}
