//! The registry: one line per handler.

use std::sync::Arc;

use shared::handlers::Registry;

use crate::refunds;

/// The handlers of this crate for the source `source` (a Stripe source).
pub fn registry(source: &str) -> Registry {
    let mut registry = Registry::new();
    registry.register(source, "charge.refunded", Arc::new(refunds::ChargeRefunded));
    registry
}
