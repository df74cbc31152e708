//! The functions' logging: the JSON subscriber on stdout ([`init`], [`subscriber`]) and its event
//! formatter [`LogLines`], which writes the receive path's `delivery` line as the delivery's EMF
//! document too.

use std::time::Duration;

use tracing_subscriber::filter::{filter_fn, FilterFn, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;

use super::delivery::{delivery_document, DELIVERY_LATENCY_FIELD};

/// Targets capped at `info` whatever `RUST_LOG` asks for: tokio-postgres logs every
/// statement's parameters at `debug` (`executing statement .. with parameters: [..]`, target
/// `tokio_postgres::query`), i.e. the payload, its values and the rows a handler writes. No
/// payload value reaches a log line, even with `RUST_LOG=debug`.
pub const CAPPED_TARGETS: [&str; 1] = ["tokio_postgres"];

/// Whether the cap lets an event or span with `metadata` through: not when its target is one of
/// [`CAPPED_TARGETS`] or under one (`tokio_postgres::query`) and its level is below `info`.
fn within_cap(metadata: &tracing::Metadata<'_>) -> bool {
    *metadata.level() <= tracing::Level::INFO
        || !CAPPED_TARGETS.iter().any(|capped| {
            metadata
                .target()
                .strip_prefix(capped)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
        })
}

/// The cap of [`CAPPED_TARGETS`] as a filter layer, for any subscriber (the functions' in
/// [`subscriber`], the CLI's): it passes everything else, so added beside a level filter it only
/// ever lowers what that filter lets through. A separate layer, not a directive inside the
/// level filter, because a more specific directive (`tokio_postgres::query=debug`, a field
/// directive) would win over `tokio_postgres=info` there.
pub fn cap() -> FilterFn<fn(&tracing::Metadata<'_>) -> bool> {
    filter_fn(within_cap as fn(&tracing::Metadata<'_>) -> bool)
}

/// The functions' level filter: `RUST_LOG` as a list of `target=level` directives and a bare
/// default level (`info`, `debug`, `shared=debug,warn`; tracing-subscriber's `Targets` syntax;
/// a target not named is off unless a default level is given). An unset, blank or unreadable
/// `RUST_LOG` means `info`. [`subscriber`] adds the [`cap`].
///
/// `Targets`, not `EnvFilter`: `EnvFilter`'s span and field directives compile regular
/// expressions, and the regex engine, its Unicode tables and `EnvFilter` were 0.34 MiB of every
/// zipped function (issue 29).
pub fn filter_from_env() -> Targets {
    filter_from(std::env::var("RUST_LOG").ok().as_deref())
}

/// [`filter_from_env`] for the value `rust_log` of `RUST_LOG`. Empty directives (`debug,`) are
/// left out: `Targets` would read one as `error`.
fn filter_from(rust_log: Option<&str>) -> Targets {
    let directives: Vec<&str> = rust_log
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|directive| !directive.is_empty())
        .collect();
    if directives.is_empty() {
        return Targets::new().with_default(LevelFilter::INFO);
    }
    directives
        .join(",")
        .parse::<Targets>()
        .unwrap_or_else(|_| Targets::new().with_default(LevelFilter::INFO))
}

/// Installs the functions' JSON subscriber ([`subscriber`] on stdout) once; later calls do
/// nothing (tests call it freely). The level comes from `RUST_LOG` ([`filter_from_env`]).
pub fn init() {
    // `try_init` also routes the `log` crate's records into tracing, as the builder's did.
    let _ = tracing_subscriber::util::SubscriberInitExt::try_init(subscriber(
        std::io::stdout,
        filter_from_env(),
    ));
}

/// The functions' subscriber, writing each event as one JSON line ([`LogLines`]) to `writer`
/// (stdout in [`init`]), filtered by `filter` and the [`cap`]. Public so tests read exactly what
/// a function writes.
pub fn subscriber<W>(writer: W, filter: Targets) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'writer> tracing_subscriber::fmt::MakeWriter<'writer> + Send + Sync + 'static,
{
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
                .event_format(LogLines::default())
                .with_writer(writer),
        )
        .with(filter)
        .with(cap())
}

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
/// [`super::emit_delivery`]'s separate EMF line is left out): true when the current subscriber
/// formats with [`LogLines`] (the functions' [`init`]). The caller also checks that its line's
/// level is enabled (`tracing::enabled!` at its own callsite's module): a filtered-out line
/// would take the metrics with it.
pub fn delivery_metrics_in_log_line() -> bool {
    tracing::dispatcher::get_default(|dispatch| dispatch.is::<LogLines>())
}

#[cfg(test)]
mod tests {
    use super::super::delivery::delivery_document;
    use super::*;

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
    fn rust_log_sets_levels_per_target_with_info_when_unset_or_unreadable() {
        use tracing::Level;
        let unset = filter_from(None);
        assert!(unset.would_enable("shared::receive", &Level::INFO));
        assert!(!unset.would_enable("shared::receive", &Level::DEBUG));
        for blank in ["", "  ", ",", " , "] {
            assert_eq!(
                filter_from(Some(blank)).to_string(),
                unset.to_string(),
                "{blank:?}"
            );
        }

        let debug = filter_from(Some("debug"));
        assert!(debug.would_enable("shared::receive", &Level::DEBUG));
        // An empty directive is left out, not read as `error`.
        assert_eq!(filter_from(Some("debug,")).to_string(), debug.to_string());

        let per_target = filter_from(Some("shared=debug,warn"));
        assert!(per_target.would_enable("shared::work", &Level::DEBUG));
        assert!(!per_target.would_enable("receiver", &Level::INFO));
        assert!(per_target.would_enable("receiver", &Level::WARN));

        // Not a directive list at all: the default.
        let unreadable = filter_from(Some("shared=loud"));
        assert_eq!(unreadable.to_string(), unset.to_string());
    }

    /// What reaches the lines through [`subscriber`] with `RUST_LOG=rust_log`: a statement's
    /// parameters at debug (as tokio-postgres logs them, through the `log` crate, target
    /// `tokio_postgres::query`), its info line, and one info line of ours.
    fn written_with(rust_log: &str) -> String {
        let lines = Lines::default();
        let subscriber = subscriber(lines.clone(), filter_from(Some(rust_log)));
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "tokio_postgres::query", "parameters: [PARAMETER_VALUE]");
            tracing::debug!(target: "tokio_postgres", "parameters: [PARAMETER_VALUE]");
            tracing::info!(target: "tokio_postgres::connection", "postgres notice");
            tracing::info!(target: "shared::receive", "ours");
        });
        let bytes = lines.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn no_rust_log_directive_opens_tokio_postgres_debug_however_specific() {
        for rust_log in [
            "debug",
            "trace",
            "tokio_postgres=trace",
            "tokio_postgres::query=debug",
            "tokio_postgres::query",
            "tokio_postgres::=trace",
            "tokio_postgres::q=debug",
            "tokio_postgres[{message}]=debug",
            "tokio_postgres::query[{message}]=trace,debug",
        ] {
            let written = written_with(rust_log);
            assert!(
                !written.contains("PARAMETER_VALUE"),
                "RUST_LOG={rust_log} let a statement's parameters through: {written}"
            );
        }
        let debug = written_with("debug");
        assert!(
            debug.contains("postgres notice") && debug.contains("ours"),
            "{debug}"
        );
        // Off is off, tokio-postgres included (the cap lowers, never raises).
        assert_eq!(written_with("off"), "");
        assert!(!written_with("warn").contains("postgres notice"));
    }

    #[test]
    fn a_line_with_the_delivery_metric_fields_is_also_their_emf_document() {
        let lines = Lines::default();
        assert!(!delivery_metrics_in_log_line(), "no subscriber of ours yet");
        let subscriber = subscriber(
            lines.clone(),
            Targets::new().with_default(LevelFilter::INFO),
        );
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
}
