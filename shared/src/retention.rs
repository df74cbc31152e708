//! Retention: how long a ledger key is kept, per source, and the one rule that says a key has
//! expired.
//!
//! A key must outlive every delivery that can still arrive for it: the provider's retries (its
//! **retry horizon**, counted from the first delivery) and whatever replay may pull back from
//! the provider's API (the source's **replay look-back**). So a source's `retention_days` may not
//! be shorter than horizon + look-back; [`SourceRetention::from_spec`] refuses it at start-up.
//!
//! | provider (scheme) | retry horizon | source |
//! |---|---|---|
//! | Stripe | 3 days | Stripe retries live-mode deliveries for up to three days |
//! | GitHub | 3 days | GitHub does not retry; its manual redelivery reaches 3 days back |
//! | Paddle | 3 days | Paddle Billing retries for about three days |
//! | Standard Webhooks (Svix) | 76 hours | the specification's recommended schedule (Svix's own ends after about 28 h) |
//! | Shopify | 4 hours | Shopify retries 8 times over 4 hours |
//! | Slack | 1 hour | Slack retries three times within the hour |
//! | generic HMAC | `retry_horizon_hours`, required | the sender's documentation |
//!
//! Whether a key still present counts as a duplicate depends only on its age, never on whether
//! the sweeper has run ([`Retention::is_expired`]): a key past retention is treated exactly as one
//! already deleted, so a late redelivery is processed as new (and logged as
//! `expired_key_reclaimed`) before and after the sweep alike.

use std::time::{Duration, SystemTime};

use crate::status::Status;
use hookledger_verify::Scheme;

/// Seconds in a day.
const DAY_SECS: u64 = 24 * 60 * 60;

/// Default retention of a completed key, days.
pub const DEFAULT_RETENTION_DAYS: u32 = 30;

/// Default retention of a dead letter, days (counted from when it went `dead`).
pub const DEFAULT_DEAD_RETENTION_DAYS: u32 = 90;

/// Default retention of the counts of rejected deliveries (`crate::rejected`), days, counted
/// from the start of each hour's bucket (`HOOKLEDGER_REJECTED_RETENTION_DAYS`).
pub const DEFAULT_REJECTED_RETENTION_DAYS: u32 = 30;

/// Longest retention accepted, days (ten years: anything longer is a typo).
pub const MAX_RETENTION_DAYS: u32 = 3650;

/// The built-in retry horizon of `scheme`'s provider (see the module's table); `None` for
/// [`Scheme::GenericHmac`], whose sources must state `retry_horizon_hours`.
pub fn builtin_retry_horizon(scheme: Scheme) -> Option<Duration> {
    let hours = match scheme {
        Scheme::Stripe | Scheme::Github | Scheme::Paddle => 72,
        Scheme::StandardWebhooks => 76,
        Scheme::Shopify => 4,
        Scheme::Slack => 1,
        Scheme::GenericHmac => return None,
        // The presets: their files give the hours and the provider's source.
        preset => hookledger_verify::presets::preset(preset)?.retry_horizon_hours,
    };
    Some(Duration::from_secs(hours * 60 * 60))
}

/// How long a source's keys are kept once finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// A `completed` key, counted from `claimed_at` (the first delivery, where the provider's
    /// retry horizon starts too).
    pub completed: Duration,
    /// A `dead` key, counted from `dead_at`.
    pub dead: Duration,
}

impl Default for Retention {
    /// 30 days completed, 90 days dead: what rows of a source no longer configured get.
    fn default() -> Self {
        Self::days(DEFAULT_RETENTION_DAYS, DEFAULT_DEAD_RETENTION_DAYS)
    }
}

impl Retention {
    /// `completed_days` and `dead_days`, in days.
    pub fn days(completed_days: u32, dead_days: u32) -> Self {
        Self {
            completed: Duration::from_secs(u64::from(completed_days) * DAY_SECS),
            dead: Duration::from_secs(u64::from(dead_days) * DAY_SECS),
        }
    }

    /// A `completed` key claimed before this instant has expired.
    pub fn completed_cutoff(&self, now: SystemTime) -> SystemTime {
        now.checked_sub(self.completed)
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }

    /// A `dead` key that went dead before this instant has expired.
    pub fn dead_cutoff(&self, now: SystemTime) -> SystemTime {
        now.checked_sub(self.dead).unwrap_or(SystemTime::UNIX_EPOCH)
    }

    /// Whether a row has expired at `now`: `completed` and claimed before
    /// [`Self::completed_cutoff`], or `dead` and dead before [`Self::dead_cutoff`]. `claimed`,
    /// `processing` and `failed` rows never expire (they are unfinished work). The sweeper
    /// deletes by exactly these cutoffs (strictly before), so a key judged here is judged the
    /// same whether or not the sweeper has run.
    pub fn is_expired(
        &self,
        status: Status,
        claimed_at: SystemTime,
        dead_at: Option<SystemTime>,
        now: SystemTime,
    ) -> bool {
        match status {
            Status::Completed => claimed_at < self.completed_cutoff(now),
            Status::Dead => dead_at.is_some_and(|at| at < self.dead_cutoff(now)),
            Status::Claimed | Status::Processing | Status::Failed => false,
        }
    }
}

/// A source's retention settings, validated ([`SourceRetention::from_spec`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceRetention {
    /// How long finished keys are kept.
    pub retention: Retention,
    /// The provider's retry horizon: how long after the first delivery retries still arrive.
    pub retry_horizon: Duration,
    /// How far back replay may fetch events from the provider's API: `retention - horizon`
    /// unless configured (so a replayed event always finds its key if it was delivered).
    pub replay_lookback: Duration,
    /// When set, no verified delivery for longer than this makes the source "quiet" for the
    /// auditor.
    pub expected_interval: Option<Duration>,
    /// When set, how long after its claim a completed event keeps its raw payload and the
    /// response it stored; past it the sweeper drops both (the key, status, digests and times
    /// stay). Shorter than `retention`. `None`: as long as the key.
    pub payload_retention: Option<Duration>,
}

/// The retention fields of one source as written in the sources JSON (all optional).
#[derive(Debug, Clone, Copy, Default)]
pub struct RetentionSpec {
    /// `retention_days`: completed keys, days (default 30).
    pub retention_days: Option<u32>,
    /// `dead_retention_days`: dead letters, days (default 90; at least `retention_days`).
    pub dead_retention_days: Option<u32>,
    /// `retry_horizon_hours`: required for `generic-hmac`; overrides the built-in horizon.
    pub retry_horizon_hours: Option<u32>,
    /// `replay_lookback_days`: how far back replay may reach (default: retention - horizon).
    pub replay_lookback_days: Option<u32>,
    /// `expected_interval_minutes`: the auditor's "source gone quiet" threshold.
    pub expected_interval_minutes: Option<u32>,
    /// `payload_retention_hours`: how long a completed event keeps its payload and stored
    /// response (default: as long as the key).
    pub payload_retention_hours: Option<u32>,
}

impl SourceRetention {
    /// Validates `spec` for a source of `scheme`.
    ///
    /// # Errors
    /// A short problem naming the setting: a value out of range, a `generic-hmac` source without
    /// `retry_horizon_hours`, a dead-letter retention shorter than the retention, or a
    /// retention shorter than the retry horizon plus the replay look-back (naming the minimum in
    /// days), or a payload retention that is not shorter than the retention.
    pub fn from_spec(scheme: Scheme, spec: RetentionSpec) -> Result<Self, String> {
        let retention_days = spec.retention_days.unwrap_or(DEFAULT_RETENTION_DAYS);
        let dead_days = spec
            .dead_retention_days
            .unwrap_or(DEFAULT_DEAD_RETENTION_DAYS.max(retention_days));
        if !(1..=MAX_RETENTION_DAYS).contains(&retention_days) {
            return Err(format!(
                "retention_days must be 1 to {MAX_RETENTION_DAYS}, got {retention_days}"
            ));
        }
        if !(1..=MAX_RETENTION_DAYS).contains(&dead_days) {
            return Err(format!(
                "dead_retention_days must be 1 to {MAX_RETENTION_DAYS}, got {dead_days}"
            ));
        }
        if dead_days < retention_days {
            return Err(format!(
                "dead_retention_days ({dead_days}) must be at least retention_days \
                 ({retention_days}): a dead letter is kept longer than a completed key"
            ));
        }
        let retry_horizon = match (spec.retry_horizon_hours, builtin_retry_horizon(scheme)) {
            (Some(0), _) => return Err("retry_horizon_hours must be positive".to_owned()),
            (Some(hours), _) => Duration::from_secs(u64::from(hours) * 60 * 60),
            (None, Some(horizon)) => horizon,
            (None, None) => {
                return Err(
                    "retry_horizon_hours must be set for a generic-hmac source: how \
                            long the sender keeps retrying a delivery"
                        .to_owned(),
                )
            }
        };
        let retention = Retention::days(retention_days, dead_days);
        let replay_lookback = match spec.replay_lookback_days {
            Some(days) => Duration::from_secs(u64::from(days) * DAY_SECS),
            None => retention.completed.saturating_sub(retry_horizon),
        };
        let minimum = retry_horizon + replay_lookback;
        if retention.completed < minimum {
            let minimum_days = minimum.as_secs().div_ceil(DAY_SECS);
            return Err(format!(
                "retention_days is {retention_days}, below the minimum of {minimum_days}: the \
                 retry horizon ({} h) plus the replay look-back ({} h), in whole days",
                retry_horizon.as_secs() / 3600,
                replay_lookback.as_secs() / 3600,
            ));
        }
        let expected_interval = match spec.expected_interval_minutes {
            Some(0) => return Err("expected_interval_minutes must be positive".to_owned()),
            Some(minutes) => Some(Duration::from_secs(u64::from(minutes) * 60)),
            None => None,
        };
        let payload_retention = match spec.payload_retention_hours {
            // At least an hour: the sweep walks rows by their claim time, which is set when the
            // claiming transaction starts; a row committed later than its claim by more than
            // the retention could fall behind the sweep's watermark. No transaction lives an
            // hour (the functions' statement and Lambda time limits).
            Some(0) => {
                return Err("payload_retention_hours must be at least 1".to_owned());
            }
            Some(hours) if u64::from(hours) >= u64::from(retention_days) * 24 => {
                return Err(format!(
                    "payload_retention_hours ({hours}) must be shorter than retention_days \
                     ({retention_days} days): omit it to keep payloads as long as keys"
                ));
            }
            Some(hours) => Some(Duration::from_secs(u64::from(hours) * 60 * 60)),
            None => None,
        };
        Ok(Self {
            retention,
            retry_horizon,
            replay_lookback,
            expected_interval,
            payload_retention,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Duration = Duration::from_secs(1_800_000_000);

    fn at(secs_ago: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + NOW - Duration::from_secs(secs_ago)
    }

    #[test]
    fn a_key_expires_just_past_its_retention_and_unfinished_work_never_does() {
        let retention = Retention::default();
        let now = at(0);
        let thirty_days = 30 * DAY_SECS;
        assert!(!retention.is_expired(Status::Completed, at(thirty_days - 1), None, now));
        assert!(!retention.is_expired(Status::Completed, at(thirty_days), None, now));
        assert!(retention.is_expired(Status::Completed, at(thirty_days + 1), None, now));
        for status in [Status::Claimed, Status::Processing, Status::Failed] {
            assert!(!retention.is_expired(status, at(10 * thirty_days), None, now));
        }
        // Dead letters count from when they died, against their own retention.
        let ninety_days = 90 * DAY_SECS;
        let old = at(10 * ninety_days);
        assert!(!retention.is_expired(Status::Dead, old, Some(at(ninety_days - 1)), now));
        assert!(retention.is_expired(Status::Dead, old, Some(at(ninety_days + 1)), now));
    }

    #[test]
    fn defaults_fit_every_built_in_horizon() {
        for scheme in [
            Scheme::Stripe,
            Scheme::Github,
            Scheme::Paddle,
            Scheme::StandardWebhooks,
            Scheme::Shopify,
            Scheme::Slack,
        ] {
            let source = SourceRetention::from_spec(scheme, RetentionSpec::default()).unwrap();
            assert_eq!(source.retention, Retention::default());
            assert_eq!(
                source.retry_horizon + source.replay_lookback,
                source.retention.completed
            );
        }
        let stripe = SourceRetention::from_spec(Scheme::Stripe, RetentionSpec::default()).unwrap();
        assert_eq!(stripe.retry_horizon, Duration::from_secs(72 * 3600));
        assert_eq!(stripe.replay_lookback, Duration::from_secs(27 * DAY_SECS));
    }

    #[test]
    fn a_retention_below_horizon_plus_look_back_is_refused_naming_the_minimum() {
        let short = RetentionSpec {
            retention_days: Some(2),
            ..RetentionSpec::default()
        };
        let error = SourceRetention::from_spec(Scheme::Stripe, short).unwrap_err();
        assert!(error.contains("retention_days is 2"), "{error}");
        assert!(error.contains("minimum of 3"), "{error}");
        let long_look_back = RetentionSpec {
            replay_lookback_days: Some(30),
            ..RetentionSpec::default()
        };
        let error = SourceRetention::from_spec(Scheme::Stripe, long_look_back).unwrap_err();
        assert!(error.contains("minimum of 33"), "{error}");
        // Slack's one-hour horizon fits in a day.
        let day = RetentionSpec {
            retention_days: Some(1),
            replay_lookback_days: Some(0),
            ..RetentionSpec::default()
        };
        assert!(SourceRetention::from_spec(Scheme::Slack, day).is_ok());
    }

    #[test]
    fn a_generic_source_must_state_its_horizon_and_bad_values_are_refused() {
        let error =
            SourceRetention::from_spec(Scheme::GenericHmac, RetentionSpec::default()).unwrap_err();
        assert!(error.contains("retry_horizon_hours"), "{error}");
        let stated = RetentionSpec {
            retry_horizon_hours: Some(24),
            ..RetentionSpec::default()
        };
        let generic = SourceRetention::from_spec(Scheme::GenericHmac, stated).unwrap();
        assert_eq!(generic.retry_horizon, Duration::from_secs(24 * 3600));
        for bad in [
            RetentionSpec {
                retention_days: Some(0),
                ..RetentionSpec::default()
            },
            RetentionSpec {
                retention_days: Some(40),
                dead_retention_days: Some(35),
                ..RetentionSpec::default()
            },
            RetentionSpec {
                expected_interval_minutes: Some(0),
                ..RetentionSpec::default()
            },
        ] {
            assert!(SourceRetention::from_spec(Scheme::Stripe, bad).is_err());
        }
        // A retention above 90 days raises the dead-letter default with it.
        let long = RetentionSpec {
            retention_days: Some(120),
            ..RetentionSpec::default()
        };
        let long = SourceRetention::from_spec(Scheme::Stripe, long).unwrap();
        assert_eq!(long.retention, Retention::days(120, 120));
    }
}
