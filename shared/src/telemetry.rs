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

/// The unit of an EMF metric (CloudWatch's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// `Count`: a number of things.
    Count,
    /// `Seconds`: a duration or an age.
    Seconds,
}

impl Unit {
    /// CloudWatch's name for the unit (`Count`, `Seconds`).
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Seconds => "Seconds",
        }
    }
}

/// One metric of an EMF document: `name` (snake_case), its unit and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric<'a> {
    /// The metric's name, e.g. `stuck_claims`.
    pub name: &'a str,
    /// Its unit.
    pub unit: Unit,
    /// Its value (a count, or whole seconds).
    pub value: u64,
}

impl<'a> Metric<'a> {
    /// A `Count` metric.
    pub fn count(name: &'a str, value: u64) -> Self {
        Self {
            name,
            unit: Unit::Count,
            value,
        }
    }

    /// A `Seconds` metric.
    pub fn seconds(name: &'a str, value: u64) -> Self {
        Self {
            name,
            unit: Unit::Seconds,
            value,
        }
    }
}

/// The CloudWatch Embedded Metric Format document for `metrics` of `source` at `timestamp`: one
/// JSON object naming every metric (with its unit) under `_aws.CloudWatchMetrics`, dimension
/// `source`, and each value at top level, e.g.
/// `{"_aws":{"Timestamp":..,"CloudWatchMetrics":[{"Namespace":"hookledger","Dimensions":[["source"]],
/// "Metrics":[{"Name":"ordering_tie","Unit":"Count"}]}]},"source":"stripe","ordering_tie":1}`.
/// `Timestamp` is milliseconds since the Unix epoch.
pub fn emf_document(
    source: &str,
    metrics: &[Metric<'_>],
    timestamp: std::time::SystemTime,
) -> serde_json::Value {
    let timestamp_ms = timestamp
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let names: Vec<serde_json::Value> = metrics
        .iter()
        .map(|m| serde_json::json!({ "Name": m.name, "Unit": m.unit.as_str() }))
        .collect();
    let mut line = serde_json::json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": METRIC_NAMESPACE,
                "Dimensions": [["source"]],
                "Metrics": names,
            }],
        },
        "source": source,
    });
    for metric in metrics {
        line[metric.name] = serde_json::json!(metric.value);
    }
    line
}

/// Emits `metrics` of `source` as one EMF line on stdout ([`emf_document`], timestamped now),
/// which CloudWatch Logs turns into one metric per entry with dimension `source`; each metric
/// is also a debug tracing event `emf_metric` (name, source, value, unit). Nothing is printed
/// for an empty list.
pub fn emit_metrics(source: &str, metrics: &[Metric<'_>]) {
    if metrics.is_empty() {
        return;
    }
    println!(
        "{}",
        emf_document(source, metrics, std::time::SystemTime::now())
    );
    // The same values as debug events (off at the default `info`): tests and local debugging
    // observe every metric through tracing, which the stdout line cannot offer in-process.
    for metric in metrics {
        tracing::debug!(
            emf_metric = metric.name,
            source,
            value = metric.value,
            unit = metric.unit.as_str(),
            "metric counted"
        );
    }
}

/// Emits a count metric in CloudWatch Embedded Metric Format: one JSON line on stdout that
/// CloudWatch Logs turns into the metric `name` (unit Count) with dimension `source` (see
/// [`emit_metrics`]). Names used: `ordering_tie`, `shadow_duplicate`, `doorbell_failed`,
/// `digest_mismatch`, `handler_fatal`, `lease_lost`, `signature_failed`, `swept`,
/// `expired_key_reclaimed`, `secrets_refreshed` (one per re-read of the sources, see
/// `crate::sources_refresh`); the worker's outbox dispatch emits `outbox_delivered`,
/// `outbox_retried`, `outbox_dead` and `outbox_lost` (`crate::outbox::drain`); the auditor's are
/// listed in `crate::audit`.
pub fn count(name: &str, source: &str, value: u64) {
    emit_metrics(source, &[Metric::count(name, value)]);
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

/// Parses an RFC 3339 timestamp such as `2026-12-01T09:30:00Z` (the operator's `since` and
/// `until`).
///
/// # Errors
/// A short reason naming the value when it is not RFC 3339.
pub fn parse_rfc3339(value: &str) -> Result<std::time::SystemTime, String> {
    time::OffsetDateTime::parse(value, &time::format_description::well_known::Rfc3339)
        .map(std::time::SystemTime::from)
        .map_err(|_| format!("{value:?} is not an RFC 3339 time such as 2026-12-01T09:30:00Z"))
}
