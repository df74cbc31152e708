//! Logging: one JSON object per line on stdout (CloudWatch Logs reads it as structured).
//!
//! The level comes from `RUST_LOG` (default `info`). Fields are flattened into the top-level
//! object, e.g. `{"timestamp":..,"level":"INFO","fields..":..,"message":"delivery"}`.

use tracing_subscriber::EnvFilter;

/// Installs the JSON subscriber once; later calls do nothing (tests call it freely).
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .with_env_filter(filter)
        .try_init();
}
