//! Adyen standard webhooks: a batch (`notificationItems`), each `NotificationRequestItem`
//! signed on its own: `additionalData.hmacSignature`, base64 of HMAC-SHA256 keyed with the
//! hex-decoded HMAC key over `pspReference:originalReference:merchantAccountCode:
//! merchantReference:amount.value:amount.currency:eventCode:success` (an absent field signs as
//! empty) (Adyen docs, "Verify HMAC signatures",
//! <https://docs.adyen.com/development-resources/webhooks/secure-webhooks/verify-hmac-signatures>;
//! Adyen's Python library `is_valid_hmac_notification`).
//!
//! - Only those fields are signed: the rest of an item (`additionalData`, `reason`,
//!   `eventDate`...) is not covered, and the top-level `live` flag neither.
//! - The id is `pspReference:eventCode:success` (Adyen: "the combination of pspReference,
//!   eventCode and success identifies a webhook"), the type `eventCode`, all signed.
//! - Answered `[accepted]` once every item is durable, as Adyen expects.
//! - Retries: three times at once, then from a retry queue for up to 30 days.

use super::Preset;
use crate::generic::{Batch, Encoding, GenericHmac, SecretEncoding};
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Adyen,
        provider: "Adyen (standard webhooks)",
        model: Some(GenericHmac {
            signature_pointer: Some("/additionalData/hmacSignature".into()),
            encoding: Encoding::Base64,
            secret_encoding: SecretEncoding::Hex,
            signed_payload: Some(
                "{field:/pspReference}:{field:/originalReference}:{field:/merchantAccountCode}:\
                 {field:/merchantReference}:{field:/amount/value}:{field:/amount/currency}:\
                 {field:/eventCode}:{field:/success}"
                    .into(),
            ),
            absent_fields_empty: true,
            event_id: Some("{field:/pspReference}:{field:/eventCode}:{field:/success}".into()),
            event_type_pointer: Some("/eventCode".into()),
            batch: Some(Batch {
                items_pointer: "/notificationItems".into(),
                event_pointer: Some("/NotificationRequestItem".into()),
                signed_per_item: true,
                answer: Some("[accepted]".into()),
            }),
            ..GenericHmac::default()
        }),
        signed: "HMAC-SHA256 of 8 fields of each item (`hmacSignature`, base64, hex key)",
        event_id: "each item's `pspReference:eventCode:success`",
        event_type: "each item's `eventCode`",
        retry_horizon_hours: 30 * 24,
        default_tolerance_secs: None,
        handshake: None,
        batch: true,
        replay: false,
        source: "https://docs.adyen.com/development-resources/webhooks/secure-webhooks/verify-hmac-signatures",
    }
}
