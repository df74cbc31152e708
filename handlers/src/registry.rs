//! **Your file.** The one place handlers are registered: every function that runs handlers
//! (receiver, worker, replay, `hookledger redrive --ignored`) is handed what [`registry`]
//! returns.
//!
//! To add a handler: write it in its own file next to this one (`src/refunds.rs`, with
//! `mod refunds;` in `lib.rs`, starting with `use shared::prelude::*;`), then add one
//! `registry.register(...)` line below. Its tables go in `migrations/`.

use shared::prelude::*;

/// The handlers by `(source, event_type)` for the configured `sources`. An event type with no
/// handler completes as a recorded no-op (`{"status": "ignored", ...}`).
pub fn registry(sources: &Sources) -> Registry {
    let mut registry = Registry::new();
    // The example Stripe handlers: only with the `examples` feature, and only on the sources
    // named in HOOKLEDGER_EXAMPLES (the demo's).
    crate::examples::register(&mut registry, sources);

    // Your handlers, one line each: source name (as configured), event type, handler. E.g.
    // registry.register(
    //     "stripe",
    //     "charge.refunded",
    //     handler_fn!(crate::refunds::charge_refunded),
    // );

    registry
}
