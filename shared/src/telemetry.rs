//! Logging: one JSON object per line on stdout (CloudWatch Logs reads it as structured), and
//! metrics: CloudWatch Embedded Metric Format (EMF) lines on the same stdout.
//!
//! The level comes from `RUST_LOG` (default `info`). Fields are flattened into the top-level
//! object, e.g. `{"timestamp":..,"level":"INFO","fields..":..,"message":"delivery"}`.
//!
//! **The metric registry.** Every metric hookledger emits is one [`MetricName`], and
//! [`REGISTRY`] lists them all with their unit, dimensions, emitter and meaning: the emitting
//! functions ([`count`], [`emit_metrics`], [`emit_delivery`]) take a [`MetricName`], so a metric
//! cannot be emitted without being registered, and the template's alarms and dashboard are
//! checked against the same list (`tests/tests/api/template.rs`). All metrics are in namespace
//! [`METRIC_NAMESPACE`] (`hookledger`).
//!
//! | metric | unit | dimensions | emitted by | meaning |
//! |---|---|---|---|---|
//! | `deliveries` | Count | source, outcome | receiver | one per delivery (value 1), by the outcome its `delivery` log line names |
//! | `delivery_latency` | Milliseconds | source, outcome | receiver | the delivery's time in the receive path, whole milliseconds |
//! | `signature_failed` | Count | source | receiver | a signature that matched no secret (401) |
//! | `digest_mismatch` | Count | source | receive path | an event id seen again with a different body (409) |
//! | `handler_fatal` | Count | source | receive path | a handler refused an event for good: it is `dead` |
//! | `doorbell_failed` | Count | source | receiver | the asynchronous invoke of the worker failed |
//! | `shadow_duplicate` | Count | source | receive path | shadow mode processed a duplicate enforcement would skip |
//! | `expired_key_reclaimed` | Count | source | claim | a key past its retention claimed again as new |
//! | `ordering_tie` | Count | source | handlers (`crate::ordering`) | two events of one entity with the same version |
//! | `lease_lost` | Count | source | worker | a completion refused: the lease was taken over |
//! | `secrets_refreshed` | Count | source | every function | a re-read of the sources, dimension = the triggering source |
//! | `swept` | Count | source | sweeper | expired keys deleted by one run |
//! | `outbox_delivered`, `outbox_retried`, `outbox_dead_lettered`, `outbox_lost` | Count | source | worker | outbox messages per dispatch step: accepted, to retry, dead-lettered, outcome lost to a taken-over lease |
//! | `stuck_claims` ... `source_quiet` | Count, Seconds | source | auditor | the audit's figures (`crate::audit`) |
//! | `idle_in_transaction_sessions`, `idle_in_transaction_longest` | Count, Seconds | source = `*` | auditor | sessions idle in a transaction; one datum per run, so also the auditor's heartbeat |
//!
//!
//! By concept: `subscriber` (the JSON subscriber and its formatter, [`LogLines`]), `registry`
//! ([`MetricName`], [`REGISTRY`], [`Unit`]), `emf` (EMF documents and their emission) and
//! `delivery` (the per-delivery metrics, carried by the `delivery` log line or emitted alone).

mod delivery;
mod emf;
mod registry;
mod subscriber;

pub use delivery::{
    delivery_document, delivery_metrics_logged, emit_delivery, whole_ms, DELIVERIES_FIELD,
    DELIVERY_LATENCY_FIELD, UNKNOWN_SOURCE,
};
pub use emf::{count, emf_document, emf_document_with, emit_metrics, Metric, METRIC_NAMESPACE};
pub use registry::{MetricName, MetricSpec, Unit, BY_SOURCE, BY_SOURCE_AND_OUTCOME, REGISTRY};
pub use subscriber::{
    cap, delivery_metrics_in_log_line, filter_from_env, init, subscriber, LogLines, CAPPED_TARGETS,
};
