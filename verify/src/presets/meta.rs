//! Meta (Facebook Pages, Instagram, WhatsApp Business): `X-Hub-Signature-256: sha256=<hex>`,
//! HMAC-SHA256 of the raw body keyed with the app secret (Meta docs, "Webhooks: event
//! notifications, validating payloads",
//! <https://developers.facebook.com/docs/graph-api/webhooks/getting-started#event-notifications>).
//!
//! - A batch: each item of `entry` (one object's changes) is its own event. Meta gives them no
//!   id: the id is the entry's `id` (the page or WhatsApp Business account) and the SHA-256 of
//!   the entry's bytes, all signed; a retry resends the same entries, so it is a duplicate. The
//!   type is the entry's first `changes[].field` (`messages` for WhatsApp), empty for a
//!   Messenger `messaging` entry.
//! - Handshake: Meta checks the endpoint with a GET `?hub.mode=subscribe&hub.verify_token=...
//!   &hub.challenge=...`, answered with the challenge (`text/plain`) when the token is the
//!   source's `verify_token`, 403 otherwise. This GET is not signed.
//! - Retries: with decreasing frequency for up to 36 hours.

use super::{Handshake, Preset};
use crate::generic::{Batch, GenericHmac};
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Meta,
        provider: "Meta (Pages, Instagram, WhatsApp)",
        model: Some(GenericHmac {
            signature_header: Some("X-Hub-Signature-256".into()),
            prefix: Some("sha256=".into()),
            event_id: Some("{field:/id}:{digest}".into()),
            event_type_pointer: Some("/changes/0/field".into()),
            batch: Some(Batch {
                items_pointer: "/entry".into(),
                ..Batch::default()
            }),
            ..GenericHmac::default()
        }),
        signed: "HMAC-SHA256 of the body (`X-Hub-Signature-256: sha256=...`)",
        event_id: "each entry's `id` + `:` + SHA-256 of the entry (signed)",
        event_type: "each entry's `changes[0].field`",
        retry_horizon_hours: 36,
        default_tolerance_secs: None,
        handshake: Some(Handshake::MetaSubscribe),
        batch: true,
        replay: false,
        source: "https://developers.facebook.com/docs/graph-api/webhooks/getting-started",
    }
}
