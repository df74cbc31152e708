//! SendGrid Event Webhook: `X-Twilio-Email-Event-Webhook-Signature`, base64 of a DER ECDSA
//! P-256 signature over SHA-256 of `{X-Twilio-Email-Event-Webhook-Timestamp}{body}`, verified
//! with the webhook's verification key (base64 of its DER SubjectPublicKeyInfo, as the
//! settings page shows it) (Twilio SendGrid docs, "Getting Started with the Event Webhook
//! Security Features",
//! <https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features>;
//! sendgrid-python `EventWebhook.verify_signature`).
//!
//! - A batch: the body is a JSON array of events; each is its own ledger row, named by its
//!   `sg_event_id` and typed by its `event` (`delivered`, `open`, `bounce`...), both signed.
//! - Retries: for up to 24 hours. SendGrid's library checks no timestamp window, and whether a
//!   retry is signed anew is not documented: the preset's default tolerance is the retry horizon
//!   (a replayed batch can only repeat events the ledger already has, as every id is signed).

use super::Preset;
use crate::generic::{Algorithm, Batch, Encoding, GenericHmac};
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Sendgrid,
        provider: "SendGrid Event Webhook",
        model: Some(GenericHmac {
            signature_header: Some("X-Twilio-Email-Event-Webhook-Signature".into()),
            algorithm: Algorithm::EcdsaP256Sha256,
            encoding: Encoding::Base64,
            timestamp_header: Some("X-Twilio-Email-Event-Webhook-Timestamp".into()),
            signed_payload: Some("{timestamp}{body}".into()),
            event_id_pointer: Some("/sg_event_id".into()),
            event_type_pointer: Some("/event".into()),
            batch: Some(Batch::default()),
            ..GenericHmac::default()
        }),
        signed: "ECDSA P-256 of `{timestamp}{body}` (base64 DER)",
        event_id: "each item's `sg_event_id`",
        event_type: "each item's `event`",
        retry_horizon_hours: 24,
        default_tolerance_secs: Some(24 * 3600),
        handshake: None,
        batch: true,
        replay: false,
        source: "https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features",
    }
}
