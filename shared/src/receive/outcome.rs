//! What happened to a delivery or a replayed event: the [`Outcome`] a [`super::Reply`] carries,
//! named once here for the log lines and the metrics.

/// What happened to a delivery (or a replayed event): the `outcome` member of its `delivery`
/// (or `replay`) log line and the `outcome` dimension of its metrics, as [`Outcome::as_str`]
/// names it. The names are fixed (tests, dashboards and the book read them), so the metric's
/// dimension values stay bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// `processed`: the event's handler ran and its effect committed.
    Processed,
    /// `ignored`: the event type has no handler; the recorded no-op committed.
    Ignored,
    /// `replayed`: a completed duplicate; its stored response is sent again.
    Replayed,
    /// `dead`: a handler refused the event for good (inline); it is kept `dead` for an operator
    /// and answered with a 2xx.
    Dead,
    /// `accepted`: a new event stored for the worker (deferred, 202).
    Accepted,
    /// `duplicate`: a deferred duplicate (202), or a replayed event already in the ledger.
    Duplicate,
    /// `shadow_duplicate`: shadow mode processed a duplicate; the answer is enforcement's.
    ShadowDuplicate,
    /// `new`: a replay dry run's event whose key is absent (or past retention).
    New,
    /// `challenge`: Slack's `url_verification` handshake, answered.
    Challenge,
    /// `digest_mismatch`: the event id was seen with a different payload (409).
    DigestMismatch,
    /// `body_replayed`: a verified body already in the ledger under another event id, for a
    /// scheme that does not sign the id or type (GitHub, Shopify, a generic source reading a
    /// header): a captured delivery sent again as a new event. Nothing runs; it is answered
    /// like a duplicate of the first (its stored response, or 409 while it is in flight, or
    /// deferred mode's 202), and its `delivery` line is a warning naming the first event.
    BodyReplayed,
    /// `in_flight`: a duplicate still being processed (409 with `Retry-After`).
    InFlight,
    /// `unknown_source`: the path names no configured source (404).
    UnknownSource,
    /// `too_large`: the body is over the source's limit (413).
    TooLarge,
    /// `bad_request`: a body or request that cannot be read or identified (400).
    BadRequest,
    /// `unauthorized`: a bad, missing or stale signature (401).
    Unauthorized,
    /// `handler_failed`: a handler failure worth retrying (500, the claim rolled back).
    HandlerFailed,
    /// `unavailable`: the database is unavailable or outlived the client deadline (503).
    Unavailable,
    /// `internal_error`: our own fault, e.g. a source without an event id rule (500).
    InternalError,
    /// `not_found`: a path that names no source at all (404, the receiver function).
    NotFound,
    /// `method_not_allowed`: a method other than POST (405, the receiver function).
    MethodNotAllowed,
}

impl Outcome {
    /// The name in log lines and metrics, e.g. `processed`, `digest_mismatch`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Processed => "processed",
            Outcome::Ignored => "ignored",
            Outcome::Replayed => "replayed",
            Outcome::Dead => "dead",
            Outcome::Accepted => "accepted",
            Outcome::Duplicate => "duplicate",
            Outcome::ShadowDuplicate => "shadow_duplicate",
            Outcome::New => "new",
            Outcome::Challenge => "challenge",
            Outcome::DigestMismatch => "digest_mismatch",
            Outcome::BodyReplayed => "body_replayed",
            Outcome::InFlight => "in_flight",
            Outcome::UnknownSource => "unknown_source",
            Outcome::TooLarge => "too_large",
            Outcome::BadRequest => "bad_request",
            Outcome::Unauthorized => "unauthorized",
            Outcome::HandlerFailed => "handler_failed",
            Outcome::Unavailable => "unavailable",
            Outcome::InternalError => "internal_error",
            Outcome::NotFound => "not_found",
            Outcome::MethodNotAllowed => "method_not_allowed",
        }
    }
}

impl Outcome {
    /// The reason a refused delivery is counted under in `rejected_delivery`
    /// ([`crate::rejected`], by the same name): `unauthorized`, `unknown_source`, `too_large`,
    /// `digest_mismatch` and `bad_request`. `None` for every other outcome: an accepted or
    /// answered delivery (a duplicate, an in-flight retry, a replayed body, a challenge), our
    /// own faults (5xx), and a request that names no source at all (`not_found`,
    /// `method_not_allowed`: not a delivery).
    #[must_use]
    pub fn rejection(self) -> Option<crate::rejected::Reason> {
        use crate::rejected::Reason;
        match self {
            Outcome::Unauthorized => Some(Reason::Unauthorized),
            Outcome::UnknownSource => Some(Reason::UnknownSource),
            Outcome::TooLarge => Some(Reason::TooLarge),
            Outcome::DigestMismatch => Some(Reason::DigestMismatch),
            Outcome::BadRequest => Some(Reason::BadRequest),
            Outcome::Processed
            | Outcome::Ignored
            | Outcome::Replayed
            | Outcome::Dead
            | Outcome::Accepted
            | Outcome::Duplicate
            | Outcome::ShadowDuplicate
            | Outcome::New
            | Outcome::Challenge
            | Outcome::BodyReplayed
            | Outcome::InFlight
            | Outcome::HandlerFailed
            | Outcome::Unavailable
            | Outcome::InternalError
            | Outcome::NotFound
            | Outcome::MethodNotAllowed => None,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a handler ran for an applied event ([`crate::apply::Outcome`]) is the delivery's
/// outcome: `processed` or `ignored`.
impl From<crate::apply::Outcome> for Outcome {
    fn from(applied: crate::apply::Outcome) -> Self {
        match applied {
            crate::apply::Outcome::Processed => Outcome::Processed,
            crate::apply::Outcome::Ignored => Outcome::Ignored,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every outcome, once.
    const ALL: [Outcome; 21] = [
        Outcome::Processed,
        Outcome::Ignored,
        Outcome::Replayed,
        Outcome::Dead,
        Outcome::Accepted,
        Outcome::Duplicate,
        Outcome::ShadowDuplicate,
        Outcome::New,
        Outcome::Challenge,
        Outcome::DigestMismatch,
        Outcome::BodyReplayed,
        Outcome::InFlight,
        Outcome::UnknownSource,
        Outcome::TooLarge,
        Outcome::BadRequest,
        Outcome::Unauthorized,
        Outcome::HandlerFailed,
        Outcome::Unavailable,
        Outcome::InternalError,
        Outcome::NotFound,
        Outcome::MethodNotAllowed,
    ];

    #[test]
    fn every_outcome_has_its_own_snake_case_name() {
        let mut names = std::collections::BTreeSet::new();
        for outcome in ALL {
            let name = outcome.as_str();
            assert!(names.insert(name), "{name} is used twice");
            assert!(
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
            assert_eq!(outcome.to_string(), name);
        }
    }

    #[test]
    fn a_rejection_is_counted_under_its_own_name_and_only_refusals_are() {
        let mut counted = Vec::new();
        for outcome in ALL {
            if let Some(reason) = outcome.rejection() {
                assert_eq!(reason.as_str(), outcome.as_str());
                counted.push(reason);
            }
        }
        counted.sort();
        let mut all = crate::rejected::Reason::ALL;
        all.sort();
        assert_eq!(counted, all);
    }

    #[test]
    fn an_applied_outcome_names_the_same_outcome() {
        assert_eq!(
            Outcome::from(crate::apply::Outcome::Processed),
            Outcome::Processed
        );
        assert_eq!(
            Outcome::from(crate::apply::Outcome::Ignored),
            Outcome::Ignored
        );
        assert_eq!(Outcome::Processed.as_str(), "processed");
        assert_eq!(Outcome::Ignored.as_str(), "ignored");
    }
}
