//! A configurable HMAC scheme for providers without a dedicated module: the [`GenericHmac`]
//! configuration, its validation, the prepared form a [`crate::Verifier`] holds, verify and sign.
//!
//! What can be configured covers the common shapes of HMAC webhooks (GitHub-, Shopify- and
//! Slack-like signatures can all be written as a [`GenericHmac`]):
//!
//! - one signature header, one signature per delivery (no list, no version entries);
//! - HMAC-SHA256 or HMAC-SHA512 ([`Algorithm`]), keyed with the secret's UTF-8 bytes;
//! - the digest in hex or base64 ([`Encoding`]), optionally after a fixed prefix (`sha256=`);
//! - optionally a timestamp header (unix seconds), signed through the `signed_payload`
//!   template and checked against the tolerance in both directions;
//! - where the event id and type are found (carried for the extraction module, validated here).
//!
//! A source with anything else (several signatures, a version list, an asymmetric signature)
//! gets its own module.
//!
//! By concept: `config` (the configuration, its validation, the prepared form), `template`
//! (the `signed_payload` template) and `verify` (verify and sign one delivery).

mod config;
mod template;
#[cfg(test)]
mod tests;
mod verify;

pub(crate) use config::Prepared;
pub use config::{Algorithm, Encoding, GenericHmac, CONFIGURED_HEADER};
pub use template::{BODY_PLACEHOLDER, DEFAULT_SIGNED_PAYLOAD, TIMESTAMP_PLACEHOLDER};
pub(crate) use verify::{sign, verify};
