//! Twilio: `X-Twilio-Signature`, base64 of HMAC-SHA1 keyed with the account's Auth Token over
//! the URL Twilio requested followed by the POST fields sorted by name, each name then value
//! (Twilio docs, "Webhooks security", <https://www.twilio.com/docs/usage/webhooks/webhooks-security>;
//! twilio-python `RequestValidator.compute_signature`).
//!
//! - No timestamp is signed, but the id is: it is read from the signed form fields, the
//!   resource's SID and its status (`MessageSid` / `CallSid` and `MessageStatus` / `CallStatus` /
//!   `SmsStatus`), so each status callback of one message is its own event.
//! - The URL must be the one configured in Twilio, scheme and host included: set the source's
//!   `public_url` when the receiver sits behind a custom domain or a proxy.
//! - Retries: Twilio does not retry a webhook unless the URL carries connection overrides
//!   (`#rc=`, at most 5 retries within seconds); the horizon is one hour
//!   (<https://www.twilio.com/docs/usage/webhooks/webhooks-connection-overrides>).
//! - Twilio joins the signed fields without separators, so the fields of a captured delivery
//!   could be re-split into other values under the same signature. The id's parts are held to
//!   Twilio's own formats (a SID is two capital letters then lowercase hex digits, a status a
//!   lowercase word), which no field name fits into; the other fields a handler reads are not
//!   so protected.
//! - JSON bodies (Event Streams, `bodySHA256` in the URL) are not covered by this preset.

use super::Preset;
use crate::generic::{Algorithm, BodyFormat, Encoding, GenericHmac};
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Twilio,
        provider: "Twilio",
        model: Some(GenericHmac {
            signature_header: Some("X-Twilio-Signature".into()),
            algorithm: Algorithm::Sha1,
            encoding: Encoding::Base64,
            signed_payload: Some("{url}{form}".into()),
            body: BodyFormat::Form,
            event_id: Some(
                "{form:MessageSid|CallSid}:{form:MessageStatus|CallStatus|SmsStatus}".into(),
            ),
            event_type: Some("{form:MessageStatus|CallStatus|SmsStatus}".into()),
            ..GenericHmac::default()
        }),
        signed: "HMAC-SHA1 of the URL and the sorted form fields (base64)",
        event_id: "form `MessageSid`/`CallSid` + `:` + its status (signed)",
        event_type: "form `MessageStatus`/`CallStatus`/`SmsStatus`",
        retry_horizon_hours: 1,
        default_tolerance_secs: None,
        handshake: None,
        batch: false,
        replay: false,
        source: "https://www.twilio.com/docs/usage/webhooks/webhooks-security",
    }
}

/// Whether `id` is `SID:status` as Twilio writes them: `^[A-Z]{2}[0-9a-f]{1,32}:[a-z-]+$`.
///
/// Twilio signs its form fields end to end without separators, so a captured delivery's fields
/// can be re-split (`MessageSid=SM1&MessageStatus=sent` and `MessageSid=SM1MessageStatussent`
/// sign alike). Its ids are Twilio's SIDs (two capital letters, then lowercase hex: 32 digits in
/// Twilio's own) and its statuses lowercase words, which no field name (they have capitals)
/// fits into: an id of any other form is refused.
pub(crate) fn id_is_canonical(id: &str) -> bool {
    let Some((sid, status)) = id.split_once(':') else {
        return false;
    };
    if !sid.is_ascii() {
        return false;
    }
    let (prefix, hex) = sid.split_at(sid.len().min(2));
    (3..=34).contains(&sid.len())
        && prefix.bytes().all(|b| b.is_ascii_uppercase())
        && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && !status.is_empty()
        && status.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
}
