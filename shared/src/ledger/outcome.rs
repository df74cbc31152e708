//! An event's outcome: what became of a ledger row, derived from the row alone by one rule
//! written here once, from two conditions ([`crate::ignored_response_sql!`],
//! [`crate::stale_response_sql!`]): as a label ([`EVENT_OUTCOME_SQL`], which `inspect` and the
//! console's events list select) and as a filter ([`crate::event_outcome_is_sql!`], the
//! console's outcome filter). Re-drive's "ignored" selection uses the same ignored condition.
//!
//! A `completed` row is `processed`, `ignored` or `stale`; every other row's outcome is its
//! status (`claimed`, `processing`, `failed`, `dead`). Where the row came from (a delivery, or
//! replay from the provider's API: `replayed_at`) is not an outcome: callers show it beside.

/// The SQL condition, on a `webhook_event` row's unqualified columns, that a completed row
/// holds exactly the recorded no-op of an event type without a handler
/// (`crate::apply::ignored_effect`: `{"status": "ignored", "event_type": <its own type>}`, these
/// two members and no other). A handler's own answer that happens to say `ignored` does not
/// match. Expands to a string literal, for `concat!` in statement texts.
#[macro_export]
macro_rules! ignored_response_sql {
    () => {
        "response_body = jsonb_build_object('status', 'ignored', 'event_type', event_type)"
    };
}

/// The SQL condition, on a `webhook_event` row's unqualified columns, that a completed row's
/// response says `"status": "stale"`: the ordering guard's no-op as the handlers answer it
/// (`crate::ordering`; `handlers/src/examples/stripe_subscriptions.rs`). NULL for a response
/// without a string `status`. Expands to a string literal.
#[macro_export]
macro_rules! stale_response_sql {
    () => {
        "response_body ->> 'status' = 'stale'"
    };
}

/// The SQL expression (type `text`), on a `webhook_event` row's unqualified columns, naming its
/// [`EventOutcome`]: see [`EVENT_OUTCOME_SQL`]. Expands to a string literal, for `concat!` in
/// statement texts (`SELECT ..., <this> AS outcome`).
#[macro_export]
macro_rules! event_outcome_sql {
    () => {
        concat!(
            "CASE
    WHEN status <> 'completed' THEN status::text
    -- The recorded no-op of a type without a handler (apply::ignored_effect), exactly.
    WHEN ",
            $crate::ignored_response_sql!(),
            " THEN 'ignored'
    -- The ordering guard's no-op: the handler answered \"status\": \"stale\" (ordering).
    WHEN ",
            $crate::stale_response_sql!(),
            " THEN 'stale'
    ELSE 'processed'
END"
        )
    };
}

/// The SQL condition, on a `webhook_event` row's unqualified columns, that its outcome
/// ([`event_outcome_sql!`]) is the label `$param` holds (a parameter of type `text`, e.g.
/// `"$11::text"`): the same rule, one branch per outcome, so that with the label known when the
/// statement is planned (custom plans) the condition folds to that branch, whose parts the
/// planner can estimate (`processed`, most completed rows, is not the rare case a bare
/// `<expression> = $n` is taken for). Expands to a string literal.
#[macro_export]
macro_rules! event_outcome_is_sql {
    ($param:literal) => {
        concat!(
            "CASE ",
            $param,
            "
    WHEN 'processed' THEN status = 'completed' AND (",
            $crate::ignored_response_sql!(),
            ") IS NOT TRUE AND (",
            $crate::stale_response_sql!(),
            ") IS NOT TRUE
    WHEN 'ignored' THEN status = 'completed' AND (",
            $crate::ignored_response_sql!(),
            ") IS TRUE
    WHEN 'stale' THEN status = 'completed' AND (",
            $crate::ignored_response_sql!(),
            ") IS NOT TRUE AND (",
            $crate::stale_response_sql!(),
            ") IS TRUE
    ELSE status::text = ",
            $param,
            "
END"
        )
    };
}

/// The rule, as SQL: `CASE WHEN status <> 'completed' THEN status::text WHEN <ignored> THEN
/// 'ignored' WHEN <stale> THEN 'stale' ELSE 'processed' END` (`<ignored>`:
/// [`crate::ignored_response_sql!`]; `<stale>`: [`crate::stale_response_sql!`]). Its labels are
/// [`EventOutcome::as_str`]'s. [`crate::event_outcome_is_sql!`] is the same rule as a
/// condition, for filters.
pub const EVENT_OUTCOME_SQL: &str = event_outcome_sql!();

/// What became of an event, as an operator asks it ("did a handler run?"), derived from its
/// row by [`EVENT_OUTCOME_SQL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventOutcome {
    /// `processed`: completed with a handler's response (any other than the two below).
    Processed,
    /// `ignored`: completed as the recorded no-op of an event type without a handler
    /// (`crate::apply::ignored_effect`); `hookledger redrive --ignored` re-runs these once a
    /// handler exists.
    Ignored,
    /// `stale`: completed as the ordering guard's no-op (`crate::ordering`): the handler
    /// answered a body with `"status": "stale"` (an older version than the one applied; the
    /// state stayed).
    Stale,
    /// `claimed`: accepted, not processed yet (status `claimed`).
    Claimed,
    /// `processing`: leased by a worker (status `processing`).
    Processing,
    /// `failed`: a retryable error; the worker retries it (status `failed`).
    Failed,
    /// `dead`: attempts exhausted or a fatal error; kept for an operator (status `dead`).
    Dead,
}

impl EventOutcome {
    /// Every outcome, finished ones first, in the order the console's filter lists them.
    pub const ALL: [EventOutcome; 7] = [
        EventOutcome::Processed,
        EventOutcome::Ignored,
        EventOutcome::Stale,
        EventOutcome::Dead,
        EventOutcome::Failed,
        EventOutcome::Processing,
        EventOutcome::Claimed,
    ];

    /// The label [`EVENT_OUTCOME_SQL`] gives it, e.g. `processed`, `ignored`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EventOutcome::Processed => "processed",
            EventOutcome::Ignored => "ignored",
            EventOutcome::Stale => "stale",
            EventOutcome::Claimed => "claimed",
            EventOutcome::Processing => "processing",
            EventOutcome::Failed => "failed",
            EventOutcome::Dead => "dead",
        }
    }

    /// The outcome labelled `label` ([`Self::as_str`]); `None` for any other text.
    #[must_use]
    pub fn parse(label: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == label)
    }

    /// The status every row of this outcome has.
    #[must_use]
    pub fn status(self) -> crate::status::Status {
        use crate::status::Status;
        match self {
            EventOutcome::Processed | EventOutcome::Ignored | EventOutcome::Stale => {
                Status::Completed
            }
            EventOutcome::Claimed => Status::Claimed,
            EventOutcome::Processing => Status::Processing,
            EventOutcome::Failed => Status::Failed,
            EventOutcome::Dead => Status::Dead,
        }
    }
}

impl std::fmt::Display for EventOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_parses_from_its_label_and_names_its_status() {
        let mut labels = std::collections::BTreeSet::new();
        for outcome in EventOutcome::ALL {
            assert!(labels.insert(outcome.as_str()), "{outcome} twice");
            assert_eq!(EventOutcome::parse(outcome.as_str()), Some(outcome));
            assert_eq!(outcome.to_string(), outcome.as_str());
            // An unfinished or dead row's outcome is its status, by the same name.
            if outcome.status() != crate::status::Status::Completed {
                assert_eq!(outcome.as_str(), outcome.status().as_str());
            }
        }
        assert_eq!(EventOutcome::parse("completed"), None);
        assert_eq!(EventOutcome::parse("Ignored"), None);
    }

    #[test]
    fn the_sql_names_every_label_and_the_ignored_body() {
        for outcome in [
            EventOutcome::Processed,
            EventOutcome::Ignored,
            EventOutcome::Stale,
        ] {
            assert!(
                EVENT_OUTCOME_SQL.contains(&format!("'{}'", outcome.as_str())),
                "{outcome}"
            );
        }
        assert!(EVENT_OUTCOME_SQL.contains(crate::ignored_response_sql!()));
        assert!(EVENT_OUTCOME_SQL.contains(crate::stale_response_sql!()));
        let filter = crate::event_outcome_is_sql!("$1::text");
        for outcome in [
            EventOutcome::Processed,
            EventOutcome::Ignored,
            EventOutcome::Stale,
        ] {
            assert!(filter.contains(&format!("WHEN '{}' THEN", outcome.as_str())));
        }
    }
}
