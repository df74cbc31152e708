//! CloudWatch Embedded Metric Format: the [`Metric`] of a document, the documents
//! ([`emf_document`], [`emf_document_with`]) and their emission on stdout ([`emit_metrics`],
//! [`count`]).

use super::registry::{MetricName, Unit};

/// CloudWatch namespace of hookledger's metrics.
pub const METRIC_NAMESPACE: &str = "hookledger";

/// One metric of an EMF document: a registered name and its value (in the name's unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// The metric, e.g. [`MetricName::StuckClaims`].
    pub name: MetricName,
    /// Its value: a count, whole seconds or whole milliseconds (the name's [`Unit`]).
    pub value: u64,
}

impl Metric {
    /// The metric `name` with `value` (in `name`'s unit).
    pub fn new(name: MetricName, value: u64) -> Self {
        Self { name, value }
    }

    /// Its unit (the registry's).
    pub fn unit(&self) -> Unit {
        self.name.unit()
    }
}

/// The CloudWatch Embedded Metric Format document for `metrics` of `source` at `timestamp`: one
/// JSON object naming every metric (with its unit) under `_aws.CloudWatchMetrics`, dimension
/// `source`, and each value at top level, e.g.
/// `{"_aws":{"Timestamp":..,"CloudWatchMetrics":[{"Namespace":"hookledger","Dimensions":[["source"]],
/// "Metrics":[{"Name":"ordering_tie","Unit":"Count"}]}]},"source":"stripe","ordering_tie":1}`.
/// `Timestamp` is milliseconds since the Unix epoch. Every metric must be registered with
/// dimensions [`BY_SOURCE`] (checked in debug builds).
pub fn emf_document(
    source: &str,
    metrics: &[Metric],
    timestamp: std::time::SystemTime,
) -> serde_json::Value {
    emf_document_with(&[("source", source)], metrics, timestamp)
}

/// [`emf_document`] with any `dimensions` (`(name, value)` pairs, in the registry's order):
/// every metric's registered dimensions must be exactly these names (checked in debug builds).
pub fn emf_document_with(
    dimensions: &[(&str, &str)],
    metrics: &[Metric],
    timestamp: std::time::SystemTime,
) -> serde_json::Value {
    let timestamp_ms = timestamp
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let dimension_names: Vec<&str> = dimensions.iter().map(|(name, _)| *name).collect();
    for metric in metrics {
        debug_assert_eq!(
            metric.name.spec().dimensions,
            dimension_names.as_slice(),
            "{} is registered with other dimensions",
            metric.name
        );
    }
    let names: Vec<serde_json::Value> = metrics
        .iter()
        .map(|m| serde_json::json!({ "Name": m.name.as_str(), "Unit": m.unit().as_str() }))
        .collect();
    let mut line = serde_json::json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": METRIC_NAMESPACE,
                "Dimensions": [dimension_names],
                "Metrics": names,
            }],
        },
    });
    for (name, value) in dimensions {
        line[*name] = serde_json::json!(value);
    }
    for metric in metrics {
        line[metric.name.as_str()] = serde_json::json!(metric.value);
    }
    line
}

/// Emits `metrics` of `source` as one EMF line on stdout ([`emf_document`], timestamped now),
/// which CloudWatch Logs turns into one metric per entry with dimension `source`; each metric
/// is also a debug tracing event `emf_metric` (name, source, value, unit). Nothing is printed
/// for an empty list.
pub fn emit_metrics(source: &str, metrics: &[Metric]) {
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
            emf_metric = metric.name.as_str(),
            source,
            value = metric.value,
            unit = metric.unit().as_str(),
            "metric counted"
        );
    }
}

/// Emits one count metric `name` of `source` (see [`emit_metrics`]); `name` must be registered
/// with dimensions [`BY_SOURCE`].
pub fn count(name: MetricName, source: &str, value: u64) {
    emit_metrics(source, &[Metric::new(name, value)]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_documents_take_units_from_the_registry() {
        let document = emf_document(
            "stripe",
            &[
                Metric::new(MetricName::StuckClaims, 2),
                Metric::new(MetricName::StuckOldestAge, 600),
            ],
            std::time::UNIX_EPOCH,
        );
        assert_eq!(
            document["_aws"]["CloudWatchMetrics"][0]["Metrics"],
            serde_json::json!([
                {"Name": "stuck_claims", "Unit": "Count"},
                {"Name": "stuck_oldest_age", "Unit": "Seconds"}
            ])
        );
        assert_eq!(
            (&document["stuck_claims"], &document["stuck_oldest_age"]),
            (&2.into(), &600.into())
        );
    }

    #[test]
    #[should_panic(expected = "registered with other dimensions")]
    fn a_metric_in_a_document_of_other_dimensions_is_refused_in_debug_builds() {
        emf_document(
            "stripe",
            &[Metric::new(MetricName::Deliveries, 1)],
            std::time::UNIX_EPOCH,
        );
    }
}
