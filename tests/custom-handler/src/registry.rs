//! The registry: one line per handler, as `handlers/src/registry.rs` has it.

use shared::prelude::*;

use crate::refunds;

/// The handlers of this crate for the configured `sources` (the same shape as
/// `handlers::registry`): the refund handler for the source named `stripe`.
pub fn registry(_sources: &Sources) -> Registry {
    let mut registry = Registry::new();
    registry.register(
        "stripe",
        "charge.refunded",
        handler_fn!(refunds::charge_refunded),
    );
    registry
}
