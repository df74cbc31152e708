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

/// CloudWatch namespace of hookledger's metrics.
pub const METRIC_NAMESPACE: &str = "hookledger";

/// Emits a count metric in CloudWatch Embedded Metric Format: one JSON line on stdout that
/// CloudWatch Logs turns into the metric `name` (unit Count) with dimension `source`, e.g.
/// `{"_aws":{"Timestamp":..,"CloudWatchMetrics":[{"Namespace":"hookledger","Dimensions":[["source"]],
/// "Metrics":[{"Name":"ordering_tie","Unit":"Count"}]}]},"source":"stripe","ordering_tie":1}`.
/// Names used: `ordering_tie`, `shadow_duplicate`, `doorbell_failed`, `digest_mismatch`, `handler_fatal`, `lease_lost`,
/// `signature_failed`, `secrets_refreshed` (one per re-read of the sources, see
/// `crate::sources_refresh`).
pub fn count(name: &str, source: &str, value: u64) {
    let timestamp_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let mut line = serde_json::json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": METRIC_NAMESPACE,
                "Dimensions": [["source"]],
                "Metrics": [{ "Name": name, "Unit": "Count" }],
            }],
        },
        "source": source,
    });
    line[name] = serde_json::json!(value);
    println!("{line}");
    // The same count as a debug event (off at the default `info`): tests and local debugging
    // observe every metric through tracing, which the stdout line cannot offer in-process.
    tracing::debug!(emf_metric = name, source, value, "metric counted");
}

/// `error` and its causes, outermost first, joined with `: ` (what `last_error` and log lines
/// carry, since a `Display` alone drops the cause).
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let next = inner.to_string();
        // thiserror's `transparent` and `#[error("{0}")]` wrappers repeat their cause's text.
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        cause = inner.source();
    }
    text
}

/// `at` as RFC 3339 in UTC with milliseconds, e.g. `2026-12-01T10:54:05.123Z`.
pub fn rfc3339(at: std::time::SystemTime) -> String {
    let at = time::OffsetDateTime::from(at);
    let at = at
        .replace_nanosecond(at.millisecond() as u32 * 1_000_000)
        .unwrap_or(at);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
