//! hookledger's webhook verification: pure functions over the raw body bytes and the headers.
//!
//! This crate depends on nothing of hookledger's and does no I/O: no tokio, PostgreSQL or AWS
//! (a test in the workspace checks its dependency tree). It owns three things:
//!
//! - signature verification (this page): the [`Scheme`] dispatch and the schemes' files;
//! - [`extract`]: the event id, type and timestamp of a verified delivery;
//! - [`identity`]: the payload identity behind the 409 rule (same id, different payload).
//!
//! The crate root owns the [`Scheme`] dispatch, the prepared [`Verifier`] (one per source, built at
//! start-up), the prepared [`SigningKey`], the outcome [`Verified`] and the errors
//! [`VerifierError`], [`KeyError`] and [`VerifyError`]. Each scheme's header format and signed
//! content live in its own file: [`stripe`], [`github`], [`standard_webhooks`], [`shopify`],
//! [`slack`], [`paddle`] and [`generic`] (a configurable HMAC, [`GenericHmac`]).
//!
//! Rules shared by every scheme:
//!
//! - the body is the exact raw bytes received; nothing is re-serialised;
//! - the keys of a source (secret rotation) are tried in configuration order until one
//!   matches, and [`Verified::key_index`] says which; a delivery that matches none is tried
//!   against every key;
//! - MACs are compared in constant time ([`subtle::ConstantTimeEq`] on the 32-byte HMAC-SHA256
//!   or 64-byte HMAC-SHA512 output), after decoding the provided hex or base64 once;
//! - a header value longer than [`MAX_HEADER_LEN`] bytes, not visible ASCII, or present more than
//!   once is [`VerifyError::MalformedHeader`]; at most [`MAX_SIGNATURES`] signatures of one
//!   header are considered, so a hostile header cannot cause unbounded work;
//! - where the scheme signs a timestamp, it is checked against the injected clock in both
//!   directions before any HMAC is computed.
//!
//! No I/O, no clock, no logging: the caller passes `now` and logs the outcome.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod algorithm;
pub mod asymmetric;
mod dispatch;
pub mod extract;
pub mod generic;
mod header;
pub mod identity;
mod key;
mod limits;
mod outcome;
pub mod presets;
mod request;
mod scheme;
mod tag;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
mod verifier;

pub use algorithm::Algorithm;
pub use asymmetric::{PrivateKey, PublicKeyError};
pub use dispatch::{sign, verify};
pub use generic::{Encoding, GenericHmac, Signer};
pub use key::{KeyError, SecretEncoding, SigningKey};
pub use limits::{DEFAULT_TOLERANCE_SECS, MAX_HEADER_LEN, MAX_SIGNATURES};
pub use outcome::{Verified, VerifyError};
pub use presets::{github, paddle, shopify, slack, standard_webhooks, stripe};
pub use request::Request;
pub use scheme::Scheme;
pub use verifier::{Verifier, VerifierError};
