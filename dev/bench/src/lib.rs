//! Helpers shared by the benchmark binaries (issue 12): process CPU from /proc, latency
//! percentiles, signed Stripe deliveries, the in-process receiver, facts about the machine.
//! Each part's own helpers live in a module file beside this one, declared here with one line.

pub mod common;
pub mod delivery;
pub mod privacy;

pub use common::*;
pub use delivery::*;
