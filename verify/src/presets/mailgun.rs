//! Mailgun: the signature is inside the JSON body: `signature.signature`, hex HMAC-SHA256 keyed
//! with the account's webhook signing key over `signature.timestamp` followed by
//! `signature.token` (Mailgun docs, "Securing webhooks",
//! <https://documentation.mailgun.com/docs/mailgun/user-manual/events/webhooks/#securing-webhooks>).
//!
//! - Mailgun signs the timestamp and a random token, **not the event**: whoever captures one
//!   delivery can change its `event-data` within the tolerance. The ledger's replay guard keeps one
//!   event per signature for such a source; treat the event as a notice and fetch what matters
//!   from Mailgun's API when it decides money or access.
//! - The id is `event-data.id`, the type `event-data.event`.
//! - Retries: for 8 hours (10 min, 10 min, 15 min, 30 min, 1 h, 2 h, 4 h).

use super::Preset;
use crate::generic::GenericHmac;
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Mailgun,
        provider: "Mailgun",
        model: Some(GenericHmac {
            signature_pointer: Some("/signature/signature".into()),
            timestamp_pointer: Some("/signature/timestamp".into()),
            signed_payload: Some("{timestamp}{field:/signature/token}".into()),
            event_id_pointer: Some("/event-data/id".into()),
            event_type_pointer: Some("/event-data/event".into()),
            ..GenericHmac::default()
        }),
        signed: "HMAC-SHA256 of body `signature.timestamp` + `signature.token` (not the event)",
        event_id: "body `event-data.id` (not signed; the timestamp is)",
        event_type: "body `event-data.event`",
        retry_horizon_hours: 8,
        default_tolerance_secs: None,
        handshake: None,
        batch: false,
        replay: false,
        source: "https://documentation.mailgun.com/docs/mailgun/user-manual/events/webhooks/",
    }
}
