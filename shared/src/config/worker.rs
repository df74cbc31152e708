//! [`WorkerSettings`]: the worker's leases, batches, margins and handler deadline, and the retry
//! schedule of deferred events and outbox messages ([`Backoff`]).

/// The worker's settings (deferred mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSettings {
    /// How long a leased event belongs to a worker, seconds. Longer than the handler timeout.
    pub lease_secs: u64,
    /// Events leased per statement.
    pub batch: i64,
    /// Start no event with less invocation time than this plus the handler timeout left,
    /// milliseconds.
    pub margin_ms: u64,
    /// A handler's deadline, milliseconds; past it the attempt fails with "handler timed out".
    pub handler_timeout_ms: u64,
    /// Retry delays: `base_secs * 2^(attempt - 1)`, capped at `cap_secs`, with jitter.
    pub backoff: Backoff,
    /// Outbox messages leased per statement and dispatched at once (default 16): a batch's
    /// dispatches all run together, so the batch takes about its slowest target's time.
    pub outbox_concurrency: u32,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            lease_secs: 120,
            batch: 3,
            margin_ms: 10_000,
            handler_timeout_ms: 30_000,
            backoff: Backoff::default(),
            outbox_concurrency: 16,
        }
    }
}

/// The retry schedule of deferred events (see [`Backoff::delay`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay after the first failed attempt, seconds (default 30).
    pub base_secs: u64,
    /// Longest delay, seconds (default 3600).
    pub cap_secs: u64,
}

impl Backoff {
    /// The delay before the attempt after failed attempt `attempts` (1-based) of the event or
    /// message `key`: exponential from `base_secs`, capped at `cap_secs`, with deterministic
    /// "equal jitter" (half the step fixed, half spread by a hash of `key` and `attempts`), so
    /// that events failing together do not retry together and a test can predict the delay.
    #[must_use]
    pub fn delay(&self, attempts: u32, key: &str) -> std::time::Duration {
        use std::hash::{Hash, Hasher};
        let exponent = attempts.saturating_sub(1).min(32);
        let full = self
            .base_secs
            .saturating_mul(1u64 << exponent)
            .min(self.cap_secs);
        let half = full / 2;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (key, attempts).hash(&mut hasher);
        let jitter = if full > half {
            hasher.finish() % (full - half + 1)
        } else {
            0
        };
        std::time::Duration::from_secs(half + jitter)
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base_secs: 30,
            cap_secs: 3_600,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_schedule_matches_its_documentation() {
        let policy = Backoff::default();
        let documented = [30, 60, 120, 240, 480, 960, 1920, 3600, 3600];
        for (n, full) in documented.iter().enumerate() {
            let attempt = n as u32 + 1;
            for key in ["stripe/evt_1", "stripe/evt_2", "github/abc"] {
                let delay = policy.delay(attempt, key).as_secs();
                assert!(
                    (full / 2..=*full).contains(&delay),
                    "attempt {attempt}: {delay}s outside {}..={full}",
                    full / 2
                );
                assert_eq!(delay, policy.delay(attempt, key).as_secs(), "reproducible");
            }
        }
        // Jitter spreads a burst: many events failing together do not retry together.
        let delays: std::collections::HashSet<u64> = (0..50)
            .map(|i| policy.delay(3, &format!("stripe/evt_{i}")).as_secs())
            .collect();
        assert!(delays.len() > 10, "{delays:?}");
        // Huge attempt numbers stay capped instead of overflowing.
        assert!(policy.delay(1000, "k").as_secs() <= policy.cap_secs);
    }
}
