//! The receive path's log lines, one per delivery (`delivery`, with its metrics) and one per
//! replayed event (`replay`), from the fields the path gathered ([`Trace`]); never the body or a
//! signature.

use std::time::Duration;

use super::outcome::Outcome;
use super::reply::Reply;
use crate::sources_refresh::LiveSources;
use crate::telemetry::UNKNOWN_SOURCE;

/// Log fields gathered along the path; written once per delivery.
pub(super) struct Trace<'a> {
    /// The source named by the delivery (or the replayed source).
    pub(super) source: &'a str,
    /// The event id, once identified.
    pub(super) event_id: Option<String>,
    /// The event type, once identified.
    pub(super) event_type: Option<String>,
    /// Which of the source's secrets verified the signature.
    pub(super) key_index: Option<usize>,
    /// Why the delivery failed or was refused: the line's `error` or `reason`.
    pub(super) detail: Option<String>,
}

/// Writes the `delivery` line of a delivery answered `reply` after `elapsed` (source,
/// event_id, event_type, outcome, status, latency_ms, and the error, the reason or the key
/// index), at error level for a 5xx or a digest mismatch, warn for another 4xx or a body
/// replayed under another id (`body_replayed`, answered 2xx), info otherwise, and counts its metrics: in the line itself when it can carry them, else as an
/// EMF line of their own.
pub(super) fn delivery(sources: &LiveSources, trace: &Trace<'_>, reply: &Reply, elapsed: Duration) {
    let source = trace.source;
    // Microsecond resolution is plenty for a log line.
    let latency_ms = (elapsed.as_secs_f64() * 1e6).round() / 1e3;
    let event_id = trace.event_id.as_deref().unwrap_or("");
    let event_type = trace.event_type.as_deref().unwrap_or("");
    let (error, warn) = (
        reply.status >= 500 || reply.outcome == Outcome::DigestMismatch,
        reply.status >= 400 || reply.outcome == Outcome::BodyReplayed,
    );
    // One stdout line per delivery: the log line carries the delivery's metrics (an EMF
    // document, `telemetry::LogLines`) when the functions' subscriber writes it, the line
    // is not filtered out and the source is configured (an unknown source's metric counts
    // under a fixed dimension value the line, which logs the name sent, does not carry).
    let enabled = if error {
        tracing::enabled!(tracing::Level::ERROR)
    } else if warn {
        tracing::enabled!(tracing::Level::WARN)
    } else {
        tracing::enabled!(tracing::Level::INFO)
    };
    let in_line = enabled
        && crate::telemetry::delivery_metrics_in_log_line()
        && sources.get(source).is_some();
    let (deliveries, delivery_latency) = if in_line {
        (Some(1u64), Some(crate::telemetry::whole_ms(elapsed)))
    } else {
        (None, None)
    };
    if error {
        tracing::error!(
            source = trace.source,
            event_id,
            event_type,
            outcome = reply.outcome.as_str(),
            status = reply.status,
            latency_ms,
            error = trace.detail.as_deref().unwrap_or(""),
            deliveries,
            delivery_latency,
            "delivery"
        );
    } else if warn {
        tracing::warn!(
            source = trace.source,
            event_id,
            event_type,
            outcome = reply.outcome.as_str(),
            status = reply.status,
            latency_ms,
            reason = trace.detail.as_deref().unwrap_or(""),
            deliveries,
            delivery_latency,
            "delivery"
        );
    } else {
        tracing::info!(
            source = trace.source,
            event_id,
            event_type,
            outcome = reply.outcome.as_str(),
            status = reply.status,
            latency_ms,
            key_index = trace.key_index,
            deliveries,
            delivery_latency,
            "delivery"
        );
    }
    if in_line {
        crate::telemetry::delivery_metrics_logged(source, reply.outcome.as_str(), elapsed);
    } else {
        count_delivery(sources, source, reply.outcome, elapsed);
    }
}

/// The per-delivery metrics (`deliveries`, `delivery_latency` by source and outcome), with
/// an unconfigured source counted as [`UNKNOWN_SOURCE`]: the path segment is the sender's
/// choice, and every distinct dimension value would be a new custom metric.
fn count_delivery(sources: &LiveSources, source: &str, outcome: Outcome, latency: Duration) {
    let source = if sources.get(source).is_some() {
        source
    } else {
        UNKNOWN_SOURCE
    };
    crate::telemetry::emit_delivery(source, outcome.as_str(), latency);
}

/// Writes the `body replayed` line: a verified body already in the ledger as
/// `original_event_id` arrived again as `event` (another event id or type), for a scheme that
/// does not sign them; the operator sees both ids (never the body).
pub(super) fn body_replayed(event: &crate::ledger::NewEvent<'_>, original_event_id: &str) {
    tracing::warn!(
        source = event.source,
        event_id = event.event_id,
        event_type = event.event_type,
        original_event_id,
        outcome = Outcome::BodyReplayed.as_str(),
        "body replayed: a verified body arrived again under another event id or type (a \
         captured delivery sent again?); nothing ran, answered as the first event's duplicate"
    );
}

/// Writes the `delivery` line of a delivery the transport could not read (see
/// [`super::Receiver::refuse`]) and counts its metrics.
pub(super) fn refusal(
    sources: &LiveSources,
    source: &str,
    status: u16,
    outcome: Outcome,
    reason: &str,
) {
    tracing::warn!(
        source,
        event_id = "",
        event_type = "",
        outcome = outcome.as_str(),
        status,
        latency_ms = 0.0,
        reason,
        "delivery"
    );
    count_delivery(sources, source, outcome, Duration::ZERO);
}

/// Writes the `replay` line of an event the replay fetched and handed to
/// [`super::Receiver::replay`]: error level for a 4xx or 5xx, info otherwise.
pub(super) fn replay(trace: &Trace<'_>, reply: &Reply, dry_run: bool) {
    let event_id = trace.event_id.as_deref().unwrap_or("");
    let event_type = trace.event_type.as_deref().unwrap_or("");
    let error = trace.detail.as_deref().unwrap_or("");
    if reply.status >= 400 {
        tracing::error!(
            source = trace.source,
            event_id,
            event_type,
            outcome = reply.outcome.as_str(),
            status = reply.status,
            dry_run,
            error,
            "replay"
        );
    } else {
        tracing::info!(
            source = trace.source,
            event_id,
            event_type,
            outcome = reply.outcome.as_str(),
            status = reply.status,
            dry_run,
            replayed = true,
            "replay"
        );
    }
}
