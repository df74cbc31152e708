//! Rejected deliveries, counted per source, reason and hour (table `rejected_delivery`,
//! migration V20): the trace a refused delivery leaves in the database, so "why is Stripe
//! failing since the rotation?" is answered by `hookledger rejected` and the console's Rejected
//! page, not only by the logs. The receive path counts ([`record`], after its answer is
//! decided); the operator reads ([`counts_since`]); the sweep deletes the buckets past
//! `HOOKLEDGER_REJECTED_RETENTION_DAYS` (`crate::sweep::sql::delete_rejected`).
//!
//! The table stays bounded: a row is `(source, reason, hour)`, where `source` is a configured
//! source's name or [`UNKNOWN_SOURCE`] for every name a path gave that is not configured (the
//! path segment is the sender's choice), and `reason` one of the five [`Reason`]s. Only
//! refusals are counted: an accepted delivery (new, duplicate, replayed, in flight) writes
//! nothing here, and neither does one of our own faults (5xx).

use std::time::SystemTime;

use tokio_postgres::types::Type;

use crate::db::Sql;
use crate::ledger::{Connection, LedgerError};

/// The `source` every unknown source's rejections are counted under: one row per reason and
/// hour whatever name the path gave. Not a possible source name (those are `[a-z0-9_-]`), and
/// the same value the per-delivery metrics use for an unknown source.
pub const UNKNOWN_SOURCE: &str = crate::telemetry::UNKNOWN_SOURCE;

/// Why a delivery was refused: the receive path's outcome of the refusal
/// (`crate::receive::Outcome`, by the same name) and the status it was answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// `unauthorized` (401): a bad, missing or stale signature.
    Unauthorized,
    /// `unknown_source` (404): the path names no configured source.
    UnknownSource,
    /// `too_large` (413): the body is over the source's limit.
    TooLarge,
    /// `digest_mismatch` (409): the event id was seen before with a different body.
    DigestMismatch,
    /// `bad_request` (400): a body or request that cannot be read or identified (no event id,
    /// invalid JSON or base64, a malformed header).
    BadRequest,
}

impl Reason {
    /// Every reason, in the order reports list them.
    pub const ALL: [Reason; 5] = [
        Reason::Unauthorized,
        Reason::UnknownSource,
        Reason::TooLarge,
        Reason::DigestMismatch,
        Reason::BadRequest,
    ];

    /// The name stored in `rejected_delivery.reason`, e.g. `unauthorized`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Unauthorized => "unauthorized",
            Reason::UnknownSource => "unknown_source",
            Reason::TooLarge => "too_large",
            Reason::DigestMismatch => "digest_mismatch",
            Reason::BadRequest => "bad_request",
        }
    }

    /// The reason named `name` ([`Self::as_str`]); `None` for any other text.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// The HTTP status the delivery was answered with.
    #[must_use]
    pub fn status(self) -> u16 {
        match self {
            Reason::Unauthorized => 401,
            Reason::UnknownSource => 404,
            Reason::TooLarge => 413,
            Reason::DigestMismatch => 409,
            Reason::BadRequest => 400,
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

static RECORD: Sql = Sql {
    text: "\
INSERT INTO rejected_delivery AS r (source, reason, bucket, count, last_at)
-- The hour in UTC, whatever the session's time zone (one with a half-hour offset would
-- otherwise cut other buckets).
VALUES ($1, $2, date_trunc('hour', $3, 'UTC'), 1, $3)
ON CONFLICT (source, reason, bucket) DO UPDATE
SET count = r.count + 1,
    -- Two receivers' clocks may disagree by a little: the bucket keeps the latest.
    last_at = greatest(r.last_at, EXCLUDED.last_at)",
    types: &[Type::TEXT, Type::TEXT, Type::TIMESTAMPTZ],
};

/// Counts one delivery of `source` refused for `reason` at `at`, in `at`'s hour (UTC): one
/// upsert, one round trip, committed on its own with the session's limits. `source` is a
/// configured source's name or [`UNKNOWN_SOURCE`] (the table's CHECK refuses anything else).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails (the caller logs it and answers as decided).
pub async fn record(
    conn: &Connection,
    source: &str,
    reason: Reason,
    at: SystemTime,
) -> Result<(), LedgerError> {
    conn.one_statement(&RECORD, &[&source, &reason.as_str(), &at])
        .await?;
    Ok(())
}

/// [`counts_since`]'s statement (public so the plan test explains the real text).
pub static COUNTS_SINCE: Sql = Sql {
    text: "\
SELECT source, reason, sum(count)::bigint, max(last_at)
FROM rejected_delivery
-- rejected_delivery_bucket_idx: the buckets of the window, from the hour `since` falls in.
WHERE bucket >= date_trunc('hour', $1, 'UTC')
GROUP BY source, reason
ORDER BY source, reason",
    types: &[Type::TIMESTAMPTZ],
};

/// One source's rejections for one reason over a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedCount {
    /// A configured source's name (or one configured when it was counted), or
    /// [`UNKNOWN_SOURCE`].
    pub source: String,
    /// Why they were refused.
    pub reason: Reason,
    /// Deliveries refused in the window.
    pub count: u64,
    /// The latest one.
    pub last_at: SystemTime,
}

impl RejectedCount {
    /// `{"source", "reason", "status", "count", "last_at"}`, `last_at` in RFC 3339 (UTC,
    /// milliseconds).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "source": self.source,
            "reason": self.reason.as_str(),
            "status": self.reason.status(),
            "count": self.count,
            "last_at": crate::timestamp::rfc3339(self.last_at),
        })
    }
}

/// The rejected deliveries counted since `since`, per source and reason, by source then
/// reason name. Counted by the hour: the window starts at the beginning of the hour (UTC)
/// `since` falls in.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails; [`LedgerError::UnknownStatus`] for a reason this
/// build does not know (the schema is ahead of the code).
pub async fn counts_since(
    conn: &Connection,
    since: SystemTime,
) -> Result<Vec<RejectedCount>, LedgerError> {
    let statement = conn.prepare(&COUNTS_SINCE).await?;
    conn.query(&statement, &[&since])
        .await?
        .iter()
        .map(|row| {
            let reason: &str = row.try_get(1)?;
            let count: i64 = row.try_get(2)?;
            Ok(RejectedCount {
                source: row.try_get(0)?,
                reason: Reason::parse(reason)
                    .ok_or_else(|| LedgerError::UnknownStatus(reason.to_owned()))?,
                count: count.unsigned_abs(),
                last_at: row.try_get(3)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_name_and_its_4xx() {
        let mut names = std::collections::BTreeSet::new();
        for reason in Reason::ALL {
            assert!(names.insert(reason.as_str()), "{reason} twice");
            assert_eq!(Reason::parse(reason.as_str()), Some(reason));
            assert!((400..500).contains(&reason.status()), "{reason}");
        }
        assert_eq!(Reason::parse("in_flight"), None);
    }

    #[test]
    fn the_unknown_source_key_is_no_possible_source_name() {
        assert!(UNKNOWN_SOURCE
            .bytes()
            .any(|b| !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')));
    }
}
