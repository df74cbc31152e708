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
//! [`REGISTRY`] is the authoritative list (the table abridges the auditor's rows).

use std::time::Duration;

use tracing_subscriber::EnvFilter;

/// Installs the functions' JSON subscriber ([`subscriber`] on stdout) once; later calls do
/// nothing (tests call it freely). The level comes from `RUST_LOG` (default `info`).
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // `try_init` also routes the `log` crate's records into tracing, as the builder's did.
    let _ =
        tracing_subscriber::util::SubscriberInitExt::try_init(subscriber(std::io::stdout, filter));
}

/// The functions' subscriber, writing each event as one JSON line ([`LogLines`]) to `writer`
/// (stdout in [`init`]), filtered by `filter`. Public so tests read exactly what a function
/// writes.
pub fn subscriber<W>(writer: W, filter: EnvFilter) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'writer> tracing_subscriber::fmt::MakeWriter<'writer> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
        .event_format(LogLines::default())
        .with_env_filter(filter)
        .with_writer(writer)
        .finish()
}

/// The field of the receive path's `delivery` log event carrying its `deliveries` metric value
/// (1) when the line is also the delivery's EMF document ([`LogLines`]).
pub const DELIVERIES_FIELD: &str = "deliveries";

/// The field of the receive path's `delivery` log event carrying its `delivery_latency` metric
/// value (whole milliseconds, [`whole_ms`]): recorded, it makes [`LogLines`] write the line as
/// the delivery's EMF document too.
pub const DELIVERY_LATENCY_FIELD: &str = "delivery_latency";

/// The event formatter of [`subscriber`]: tracing-subscriber's JSON with the event's fields
/// flattened (`{"timestamp":..,"level":..,<fields>,"message":..}`, no target, no spans), one
/// object and a newline per event, written in one `write` (tracing-subscriber formats into a
/// buffer first). An event that recorded [`DELIVERY_LATENCY_FIELD`] (the `delivery` line, when
/// [`delivery_metrics_in_log_line`] allowed it) gets one more member, last:
/// `"_aws":{"Timestamp":<ms>,"CloudWatchMetrics":[{"Namespace":"hookledger","Dimensions":
/// [["source","outcome"]],"Metrics":[{"Name":"deliveries","Unit":"Count"},{"Name":
/// "delivery_latency","Unit":"Milliseconds"}]}]}` (the directive of [`delivery_document`]).
///
/// So one line per delivery is both its log line and its metrics. That is a valid EMF document:
/// the specification wants `_aws` at the root and each dimension (`source`, `outcome`, which
/// the log line carries already) and metric value (`deliveries`, `delivery_latency`) as a root
/// member, and leaves any other member alone (docs.aws.amazon.com/AmazonCloudWatch/latest/
/// monitoring/CloudWatch_Embedded_Metric_Format_Specification.html). With the template's
/// `LoggingConfig: LogFormat: JSON`, Lambda passes an application line that is a JSON object
/// through unchanged: "Lambda doesn't double-encode any logs that are already JSON encoded"
/// (docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-logformat.html), which the
/// separate EMF lines rely on too.
#[derive(Debug)]
pub struct LogLines {
    inner: tracing_subscriber::fmt::format::Format<tracing_subscriber::fmt::format::Json>,
}

impl Default for LogLines {
    fn default() -> Self {
        Self {
            inner: tracing_subscriber::fmt::format()
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_span_list(false)
                .with_target(false),
        }
    }
}

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for LogLines
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'writer> tracing_subscriber::fmt::FormatFields<'writer> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        // The callsite's field set first (static, no visiting) for every other event.
        if event
            .metadata()
            .fields()
            .field(DELIVERY_LATENCY_FIELD)
            .is_none()
        {
            return self.inner.format_event(ctx, writer, event);
        }
        let mut recorded = RecordedU64 {
            name: DELIVERY_LATENCY_FIELD,
            value: None,
        };
        event.record(&mut recorded);
        if recorded.value.is_none() {
            return self.inner.format_event(ctx, writer, event);
        }
        let mut line = String::with_capacity(640);
        self.inner.format_event(
            ctx,
            tracing_subscriber::fmt::format::Writer::new(&mut line),
            event,
        )?;
        // One JSON object and a newline: reopen the object for the `_aws` member.
        let Some(open) = line.trim_end().strip_suffix('}') else {
            return writer.write_str(&line);
        };
        let timestamp_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        writer.write_str(open)?;
        writeln!(
            writer,
            ",\"_aws\":{{\"Timestamp\":{timestamp_ms},\"CloudWatchMetrics\":{}}}}}",
            delivery_directives()
        )
    }
}

/// The `CloudWatchMetrics` array of every per-delivery EMF document (the one
/// [`delivery_document`] writes), serialised once.
fn delivery_directives() -> &'static str {
    static DIRECTIVES: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIRECTIVES.get_or_init(|| {
        delivery_document("", "", Duration::ZERO, std::time::UNIX_EPOCH)["_aws"]
            ["CloudWatchMetrics"]
            .to_string()
    })
}

/// Finds one `u64` field of an event.
struct RecordedU64 {
    name: &'static str,
    value: Option<u64>,
}

impl tracing::field::Visit for RecordedU64 {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == self.name {
            self.value = Some(value);
        }
    }

    fn record_debug(&mut self, _field: &tracing::field::Field, _value: &dyn std::fmt::Debug) {}
}

/// Whether the receive path's `delivery` line may carry the delivery's metrics (so that
/// [`emit_delivery`]'s separate EMF line is left out): true when the current subscriber
/// formats with [`LogLines`] (the functions' [`init`]). The caller also checks that its line's
/// level is enabled (`tracing::enabled!` at its own callsite's module): a filtered-out line
/// would take the metrics with it.
pub fn delivery_metrics_in_log_line() -> bool {
    tracing::dispatcher::get_default(|dispatch| dispatch.is::<LogLines>())
}

/// CloudWatch namespace of hookledger's metrics.
pub const METRIC_NAMESPACE: &str = "hookledger";

/// The `source` dimension value of a delivery whose source is not configured (an unknown path
/// segment, or none): a fixed value, so that requests to made-up sources cannot create
/// metrics (each distinct dimension value is a billed custom metric). No source name can be
/// `(unknown)` (names are `[a-z0-9_-]`).
pub const UNKNOWN_SOURCE: &str = "(unknown)";

/// The unit of an EMF metric (CloudWatch's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// `Count`: a number of things.
    Count,
    /// `Seconds`: a duration or an age.
    Seconds,
    /// `Milliseconds`: a short duration (a delivery's latency).
    Milliseconds,
}

impl Unit {
    /// CloudWatch's name for the unit (`Count`, `Seconds`, `Milliseconds`).
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Seconds => "Seconds",
            Unit::Milliseconds => "Milliseconds",
        }
    }
}

/// Dimensions `source` (the configured source name; `*` for the auditor's database-wide
/// figures).
pub const BY_SOURCE: &[&str] = &["source"];

/// Dimensions `source` and `outcome` (the per-delivery metrics).
pub const BY_SOURCE_AND_OUTCOME: &[&str] = &["source", "outcome"];

/// One registered metric: its name in CloudWatch, unit, dimension names (in EMF order), what
/// emits it and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricSpec {
    /// The metric.
    pub metric: MetricName,
    /// Its CloudWatch name (snake_case), e.g. `stuck_claims`.
    pub name: &'static str,
    /// Its unit.
    pub unit: Unit,
    /// Its dimension names, e.g. `["source"]`.
    pub dimensions: &'static [&'static str],
    /// What emits it (a function, and the module).
    pub emitted_by: &'static str,
    /// What one datum means.
    pub meaning: &'static str,
}

/// Declares [`MetricName`] and [`REGISTRY`] from one list, so they cannot disagree.
macro_rules! registry {
    ($( $variant:ident = $name:literal, $unit:ident, $dimensions:ident, $by:literal, $meaning:literal; )+) => {
        /// Every metric hookledger emits (see [`REGISTRY`] for each one's unit, dimensions
        /// and emitter).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum MetricName {
            $(
                #[doc = concat!("`", $name, "` (", stringify!($unit), "): ", $meaning)]
                $variant,
            )+
        }

        /// Every metric hookledger emits, in [`MetricName`] order.
        pub const REGISTRY: &[MetricSpec] = &[
            $(
                MetricSpec {
                    metric: MetricName::$variant,
                    name: $name,
                    unit: Unit::$unit,
                    dimensions: $dimensions,
                    emitted_by: $by,
                    meaning: $meaning,
                },
            )+
        ];
    };
}

registry! {
    Deliveries = "deliveries", Count, BY_SOURCE_AND_OUTCOME, "receiver (crate::receive)",
        "one delivery (value 1), by the outcome its `delivery` log line names (processed, replayed, accepted, duplicate, unauthorized, unavailable, ...); source `(unknown)` for a source not configured";
    DeliveryLatency = "delivery_latency", Milliseconds, BY_SOURCE_AND_OUTCOME, "receiver (crate::receive)",
        "the delivery's time in the receive path (verify, claim, apply, answer), whole milliseconds";
    SignatureFailed = "signature_failed", Count, BY_SOURCE, "receiver (crate::receive)",
        "a delivery whose signature matched no secret (401): a rotated or wrong secret, or probing";
    DigestMismatch = "digest_mismatch", Count, BY_SOURCE, "receiver, replay (crate::receive)",
        "an event id seen again with a different body (409)";
    HandlerFatal = "handler_fatal", Count, BY_SOURCE, "receiver, replay (crate::receive)",
        "a handler refused an event for good: it is kept `dead` for an operator";
    DoorbellFailed = "doorbell_failed", Count, BY_SOURCE, "receiver (crate::receive)",
        "the asynchronous invoke of the worker after a deferred accept failed (the schedule drains it)";
    ShadowDuplicate = "shadow_duplicate", Count, BY_SOURCE, "receiver, replay (crate::receive)",
        "shadow mode processed a duplicate that enforcement would skip";
    ExpiredKeyReclaimed = "expired_key_reclaimed", Count, BY_SOURCE, "receiver, replay (crate::ledger::claim)",
        "a key past its retention claimed again as a new event: the retention is shorter than what arrives";
    OrderingTie = "ordering_tie", Count, BY_SOURCE, "handlers (crate::ordering)",
        "two events of one entity carry the same version (recorded in ordering_tie)";
    LeaseLost = "lease_lost", Count, BY_SOURCE, "worker (crate::work)",
        "a completion refused because the lease expired and another worker took the event over";
    SecretsRefreshed = "secrets_refreshed", Count, BY_SOURCE, "every function (crate::sources_refresh)",
        "a re-read of the sources after a failed verification; the dimension names the triggering source";
    Swept = "swept", Count, BY_SOURCE, "sweeper (crate::sweep)",
        "expired keys and messages one sweep deleted";
    OutboxDelivered = "outbox_delivered", Count, BY_SOURCE, "worker (crate::work::drain)",
        "outbox messages a target accepted, per dispatch step";
    OutboxRetried = "outbox_retried", Count, BY_SOURCE, "worker (crate::work::drain)",
        "failed outbox dispatches to be retried, per dispatch step";
    OutboxDeadLettered = "outbox_dead_lettered", Count, BY_SOURCE, "worker (crate::work::drain)",
        "outbox messages dead-lettered (a fatal answer, or max_attempts used), per dispatch step";
    OutboxLost = "outbox_lost", Count, BY_SOURCE, "worker (crate::work::drain)",
        "outbox outcomes refused because the message's lease had been taken over";
    StuckClaims = "stuck_claims", Count, BY_SOURCE, "auditor (crate::audit)",
        "claimed rows older than the stuck threshold plus processing rows whose lease expired";
    StuckOldestAge = "stuck_oldest_age", Seconds, BY_SOURCE, "auditor (crate::audit)",
        "the oldest stuck claim or expired lease; 0 when none";
    OldestKeyAge = "oldest_key_age", Seconds, BY_SOURCE, "auditor (crate::audit)",
        "the oldest key still in the ledger (absent for a source without keys)";
    PastRetention = "past_retention", Count, BY_SOURCE, "auditor (crate::audit)",
        "keys the sweeper should have deleted (completed past retention, dead past dead-letter retention)";
    PastRetentionOverdue = "past_retention_overdue", Count, BY_SOURCE, "auditor (crate::audit)",
        "the part of past_retention more than an hour past its cutoff (crate::audit::SWEEP_GRACE): the sweep stalled or falls behind";
    DeadLetters = "dead_letters", Count, BY_SOURCE, "auditor (crate::audit)",
        "dead rows";
    DeadLettersNew = "dead_letters_new", Count, BY_SOURCE, "auditor (crate::audit)",
        "rows that went dead since the last recorded audit run";
    DeadLetterOldestAge = "dead_letter_oldest_age", Seconds, BY_SOURCE, "auditor (crate::audit)",
        "since the oldest dead row went dead; 0 when none";
    OrderingTiesNew = "ordering_ties_new", Count, BY_SOURCE, "auditor (crate::audit)",
        "ordering ties seen since the last recorded run";
    BacklogDue = "backlog_due", Count, BY_SOURCE, "auditor (crate::audit)",
        "deferred claimed and failed rows whose next attempt has come";
    BacklogOldestAge = "backlog_oldest_age", Seconds, BY_SOURCE, "auditor (crate::audit)",
        "since the oldest due next attempt; 0 when none";
    OutboxBacklog = "outbox_backlog", Count, BY_SOURCE, "auditor (crate::audit)",
        "outbox messages neither delivered nor dead";
    OutboxBacklogOldestAge = "outbox_backlog_oldest_age", Seconds, BY_SOURCE, "auditor (crate::audit)",
        "since the oldest undelivered outbox message was committed; 0 when none";
    OutboxDead = "outbox_dead", Count, BY_SOURCE, "auditor (crate::audit)",
        "dead outbox messages";
    OutboxDeadNew = "outbox_dead_new", Count, BY_SOURCE, "auditor (crate::audit)",
        "outbox messages that went dead since the last recorded run";
    OutboxDeadOldestAge = "outbox_dead_oldest_age", Seconds, BY_SOURCE, "auditor (crate::audit)",
        "since the oldest dead outbox message went dead; 0 when none";
    SourceQuiet = "source_quiet", Count, BY_SOURCE, "auditor (crate::audit)",
        "1 when a source with expected_interval_minutes has no key newer than that, else 0";
    IdleInTransactionSessions = "idle_in_transaction_sessions", Count, BY_SOURCE, "auditor (crate::audit)",
        "database sessions idle in a transaction past the threshold (source `*`); one datum per audit run, so also the auditor's heartbeat";
    IdleInTransactionLongest = "idle_in_transaction_longest", Seconds, BY_SOURCE, "auditor (crate::audit)",
        "the longest of them, seconds (source `*`)";
}

impl MetricName {
    /// The metric's registry entry.
    pub fn spec(self) -> &'static MetricSpec {
        // REGISTRY is declared in MetricName order (the macro), so the discriminant indexes it.
        &REGISTRY[self as usize]
    }

    /// The metric's CloudWatch name, e.g. `stuck_claims`.
    pub fn as_str(self) -> &'static str {
        self.spec().name
    }

    /// The metric's unit.
    pub fn unit(self) -> Unit {
        self.spec().unit
    }

    /// The registered metric named `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        REGISTRY
            .iter()
            .find(|spec| spec.name == name)
            .map(|spec| spec.metric)
    }
}

impl std::fmt::Display for MetricName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for MetricName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for MetricName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_is_in_enum_order_with_unique_snake_case_names_and_known_dimensions() {
        let mut names = std::collections::BTreeSet::new();
        for (index, spec) in REGISTRY.iter().enumerate() {
            assert_eq!(spec.metric as usize, index, "{}", spec.name);
            assert_eq!(spec.metric.as_str(), spec.name);
            assert_eq!(MetricName::from_name(spec.name), Some(spec.metric));
            assert!(names.insert(spec.name), "{} is registered twice", spec.name);
            assert!(
                !spec.name.is_empty()
                    && spec
                        .name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{}",
                spec.name
            );
            assert!(
                spec.dimensions == BY_SOURCE || spec.dimensions == BY_SOURCE_AND_OUTCOME,
                "{}",
                spec.name
            );
            assert!(!spec.meaning.is_empty() && !spec.emitted_by.is_empty());
        }
        assert_eq!(MetricName::from_name("no_such_metric"), None);
    }

    /// Every `.rs` file under `dir`, recursively.
    fn sources(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }

    /// Emission takes a [`MetricName`], so every emitted metric is registered by construction;
    /// this also holds the log lines that name a metric (`metric = "..."`) and any metric
    /// still named by a string at an emit call to the registry.
    #[test]
    fn every_metric_named_in_the_workspace_sources_is_registered() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_owned();
        let mut files = Vec::new();
        for dir in ["shared/src", "functions", "handlers/src", "cli/src"] {
            let dir = root.join(dir);
            if dir.is_dir() {
                sources(&dir, &mut files);
            }
        }
        assert!(files.len() > 20, "{} files", files.len());
        let mut named = 0;
        for (path, text) in &files {
            if path.ends_with("shared/src/telemetry.rs") {
                continue; // this scan's own patterns
            }
            for pattern in [
                "metric = \"",
                "telemetry::count(\"",
                "emit_metrics(\"",
                "Metric::new(\"",
            ] {
                for (at, _) in text.match_indices(pattern) {
                    let rest = &text[at + pattern.len()..];
                    let name = &rest[..rest.find('"').unwrap()];
                    assert!(
                        pattern == "metric = \"" && MetricName::from_name(name).is_some(),
                        "{}: {pattern}{name}\" is not an emission through a registered MetricName",
                        path.display()
                    );
                    named += 1;
                }
            }
        }
        assert!(named >= 4, "the scan found the log lines naming metrics");
    }

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

    /// A `MakeWriter` into memory.
    #[derive(Clone, Default)]
    struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Lines {
        type Writer = Lines;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    impl Lines {
        fn parsed(&self) -> Vec<serde_json::Value> {
            String::from_utf8(self.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect()
        }
    }

    #[test]
    fn a_line_with_the_delivery_metric_fields_is_also_their_emf_document() {
        let lines = Lines::default();
        assert!(!delivery_metrics_in_log_line(), "no subscriber of ours yet");
        let subscriber = subscriber(lines.clone(), EnvFilter::new("info"));
        tracing::subscriber::with_default(subscriber, || {
            assert!(delivery_metrics_in_log_line());
            tracing::info!(
                source = "stripe",
                outcome = "processed",
                latency_ms = 12.5,
                deliveries = Some(1u64),
                delivery_latency = Some(13u64),
                "delivery"
            );
            // Not recorded (None): a plain log line.
            tracing::info!(
                source = "made-up",
                outcome = "unknown_source",
                deliveries = None::<u64>,
                delivery_latency = None::<u64>,
                "delivery"
            );
            tracing::info!(other = 1, "something else");
        });
        let parsed = lines.parsed();
        assert_eq!(parsed.len(), 3, "{parsed:?}");
        let merged = &parsed[0];
        let reference = delivery_document(
            "stripe",
            "processed",
            Duration::from_millis(13),
            std::time::UNIX_EPOCH,
        );
        assert_eq!(
            merged["_aws"]["CloudWatchMetrics"],
            reference["_aws"]["CloudWatchMetrics"]
        );
        assert!(merged["_aws"]["Timestamp"].as_u64().unwrap() > 1_700_000_000_000);
        for member in ["source", "outcome", "deliveries", "delivery_latency"] {
            assert_eq!(merged[member], reference[member], "{member}: {merged}");
        }
        // The log line's own members are all still there.
        assert_eq!(merged["message"], "delivery");
        assert_eq!(merged["level"], "INFO");
        assert_eq!(merged["latency_ms"], 12.5);
        assert!(merged["timestamp"].is_string());
        for plain in &parsed[1..] {
            assert!(plain.get("_aws").is_none(), "{plain}");
            assert!(plain.get("deliveries").is_none(), "{plain}");
        }
        assert_eq!(parsed[1]["source"], "made-up");
        assert_eq!(parsed[2]["other"], 1);
    }

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
