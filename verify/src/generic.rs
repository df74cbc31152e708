//! The scheme model: every scheme as data ([`GenericHmac`]), its validation, the prepared form a
//! [`crate::Verifier`] holds, verify and sign. A `generic-hmac` source configures it in the
//! sources JSON; the presets ([`crate::presets`]) fill it for the providers we know.
//!
//! What the model expresses:
//!
//! - where the signature is: a header, or a JSON body field; its format: one value after an
//!   optional prefix, `key=value` pairs (with the timestamp among them), or a version list
//!   ([`SignatureFormat`]);
//! - the algorithm ([`Algorithm`]): HMAC over SHA-1, SHA-256 or SHA-512, Ed25519, ECDSA P-256
//!   over SHA-256, RSA PKCS#1 v1.5 over SHA-256; the encoding: hex, base64 or base64url
//!   ([`Encoding`]); how secrets are written ([`SecretEncoding`], an optional key prefix);
//! - what is signed: a template over the body, the timestamp, the URL, the method, headers,
//!   body fields and the sorted form fields ([`template`]);
//! - where the timestamp is (header, body field, signature entry) and its unit
//!   ([`TimestampUnit`]), checked against the tolerance before any cryptography;
//! - where the event id and type are (header, body pointer, or a template of those and form
//!   fields), and whether the signature covers them.
//!
//! By concept: `config` (the configuration, its validation, the prepared form), `template`
//! (the templates), `timestamp` (units) and `verify` (verify and sign one delivery).

pub(crate) mod batch;
mod config;
pub mod template;
#[cfg(test)]
mod tests;
mod timestamp;
mod unique_keys;
mod verify;

#[allow(unused_imports)]
pub(crate) use config::Parsed;
pub use config::{
    Algorithm, Batch, BodyFormat, Encoding, GenericHmac, SecretEncoding, SignatureFormat,
    TimestampUnit, CONFIGURED_HEADER, MAX_BATCH_ITEMS,
};
pub(crate) use config::{Naming, Prepared};
pub(crate) use template::Segment;
pub use template::{BODY_PLACEHOLDER, DEFAULT_SIGNED_PAYLOAD, TIMESTAMP_PLACEHOLDER};
#[cfg(test)]
pub(crate) use verify::decode_signature;
pub(crate) use verify::{aliased, sign_with_id, verify};
pub use verify::{sign, Signer};
