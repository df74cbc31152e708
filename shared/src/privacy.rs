//! What the ledger keeps of a payload, and for whom (issue 28): field redaction at rest
//! ([`redact`]), the per-subject keyed hash that erasure looks up ([`subject`]), and
//! envelope encryption ([`seal`], its key wrappers in [`wrap`]).
//!
//! Below `config` (a source's settings hold these types) and above nothing of ours.

pub mod keys;
pub mod redact;
pub mod response;
pub mod seal;
pub mod seal_error;
pub mod subject;
pub mod wrap;
