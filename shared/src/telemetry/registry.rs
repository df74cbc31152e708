//! The metric registry: every metric hookledger emits is one [`MetricName`], and [`REGISTRY`]
//! lists them all with their [`Unit`], dimensions, emitter and meaning.

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
    TargetFilterFailed = "target_filter_failed", Count, BY_SOURCE, "receiver, worker, replay (crate::apply)",
        "a built-in target's filter failed to evaluate for an event (a JMESPath runtime error): no message was queued for that target; the `warn` line names the event, the target and the reason";
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
            if path.ends_with("shared/src/telemetry/registry.rs") {
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
}
