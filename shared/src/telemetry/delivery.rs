//! The per-delivery metrics: the `delivery` log line's metric fields, the per-delivery EMF
//! document (dimensions `source` and `outcome`), and its emission when the log line cannot carry
//! it.

use std::time::Duration;

use super::emf::{emf_document_with, Metric};
use super::registry::MetricName;

/// The field of the receive path's `delivery` log event carrying its `deliveries` metric value
/// (1) when the line is also the delivery's EMF document ([`LogLines`]).
pub const DELIVERIES_FIELD: &str = "deliveries";

/// The field of the receive path's `delivery` log event carrying its `delivery_latency` metric
/// value (whole milliseconds, [`whole_ms`]): recorded, it makes [`LogLines`] write the line as
/// the delivery's EMF document too.
pub const DELIVERY_LATENCY_FIELD: &str = "delivery_latency";

/// The `source` dimension value of a delivery whose source is not configured (an unknown path
/// segment, or none): a fixed value, so that requests to made-up sources cannot create
/// metrics (each distinct dimension value is a billed custom metric). No source name can be
/// `(unknown)` (names are `[a-z0-9_-]`).
pub const UNKNOWN_SOURCE: &str = "(unknown)";

/// The per-delivery EMF document: dimensions `source` and `outcome`, `deliveries` 1 and
/// `delivery_latency` (whole milliseconds, rounded), e.g.
/// `{"_aws":{"Timestamp":..,"CloudWatchMetrics":[{"Namespace":"hookledger","Dimensions":[["source","outcome"]],
/// "Metrics":[{"Name":"deliveries","Unit":"Count"},{"Name":"delivery_latency","Unit":"Milliseconds"}]}]},
/// "source":"stripe","outcome":"processed","deliveries":1,"delivery_latency":12}` (308 bytes with
/// a 15-character source, newline included). A configured source's delivery carries it in its
/// log line instead ([`LogLines`]: about 260 bytes more on that line); the document is a line of
/// its own only for an unknown source or a filtered-out delivery line.
pub fn delivery_document(
    source: &str,
    outcome: &str,
    latency: Duration,
    timestamp: std::time::SystemTime,
) -> serde_json::Value {
    let latency_ms = whole_ms(latency);
    emf_document_with(
        &[("source", source), ("outcome", outcome)],
        &[
            Metric::new(MetricName::Deliveries, 1),
            Metric::new(MetricName::DeliveryLatency, latency_ms),
        ],
        timestamp,
    )
}

/// A latency in whole milliseconds, rounded to the nearest (what `delivery_latency` carries).
pub fn whole_ms(latency: Duration) -> u64 {
    (latency.as_micros() as u64 + 500) / 1000
}

/// Emits the per-delivery metrics ([`delivery_document`], timestamped now) as one EMF line on
/// stdout, and a debug tracing event `emf_metric = "deliveries"` (source, `emf_outcome`,
/// `latency_ms`, `in_log_line = false`). `source` must be a configured source's name or
/// [`UNKNOWN_SOURCE`]; `outcome` one of the receive path's fixed outcome names (so the
/// dimensions stay bounded).
pub fn emit_delivery(source: &str, outcome: &str, latency: Duration) {
    let document = delivery_document(source, outcome, latency, std::time::SystemTime::now());
    println!("{document}");
    delivery_counted(source, outcome, latency, false);
}

/// The per-delivery metrics went out in the delivery's log line ([`LogLines`]): only the debug
/// event [`emit_delivery`] also emits, with `in_log_line = true`.
pub fn delivery_metrics_logged(source: &str, outcome: &str, latency: Duration) {
    delivery_counted(source, outcome, latency, true);
}

/// The debug event mirroring a delivery's metrics (off at the default `info`): tests and local
/// debugging observe every metric through tracing.
fn delivery_counted(source: &str, outcome: &str, latency: Duration, in_log_line: bool) {
    tracing::debug!(
        emf_metric = MetricName::Deliveries.as_str(),
        source,
        // Not `outcome`: that field names the `delivery` log lines.
        emf_outcome = outcome,
        value = 1u64,
        latency_ms = whole_ms(latency),
        in_log_line,
        "metric counted"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_document_is_valid_emf_with_source_and_outcome_and_stays_small() {
        let at = std::time::UNIX_EPOCH + Duration::from_millis(1_764_600_000_123);
        let document = delivery_document(
            "stripe-deferred",
            "processed",
            Duration::from_micros(12_501),
            at,
        );
        let line = document.to_string();
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        let directive = &parsed["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(parsed["_aws"]["Timestamp"], 1_764_600_000_123u64);
        assert_eq!(directive["Namespace"], "hookledger");
        assert_eq!(
            directive["Dimensions"],
            serde_json::json!([["source", "outcome"]])
        );
        assert_eq!(
            directive["Metrics"],
            serde_json::json!([
                {"Name": "deliveries", "Unit": "Count"},
                {"Name": "delivery_latency", "Unit": "Milliseconds"}
            ])
        );
        assert_eq!(parsed["source"], "stripe-deferred");
        assert_eq!(parsed["outcome"], "processed");
        assert_eq!(parsed["deliveries"], 1);
        // Rounded to whole milliseconds.
        assert_eq!(parsed["delivery_latency"], 13);
        assert_eq!(
            delivery_document("s", "ignored", Duration::from_micros(499), at)["delivery_latency"],
            0
        );
        // What a delivery adds to stdout (CloudWatch Logs ingestion is billed by the byte):
        // the line plus its newline, here with a 15-character source.
        let bytes = line.len() + 1;
        assert!(bytes <= 320, "{bytes} bytes: {line}");
    }
}
