//! [`SweepSettings`]: the sweeper's bounds.

/// The sweeper's bounds (see `crate::sweep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepSettings {
    /// Rows deleted per batch, each batch its own transaction (default 1,000: in
    /// dev/bench/SWEEP.md, 5,000-row batches raised the claims' p99 by several times, through the
    /// WAL each batch writes at once; 1,000-row batches left it unchanged).
    pub batch_size: i64,
    /// Batches per run at most (default 1,000: up to a million rows a run, about two minutes
    /// at the measured rate, inside the sweeper's five minutes).
    pub max_batches: u32,
    /// Least pause between two batches, milliseconds (default 100): lets autovacuum,
    /// replication and the receivers' claims through.
    pub pause_ms: u64,
    /// The most of the run's time spent inside batches, percent (default 25): after a batch
    /// that took `t`, the sweep pauses at least `t * (100 - duty) / duty`. Deleting writes a
    /// full page image per heap page first touched after a checkpoint, and every claim's COMMIT
    /// waits behind that WAL; bounding the duty cycle bounds the sweep's WAL rate (see
    /// dev/bench/SWEEP.md).
    pub duty_percent: u64,
    /// Start no batch with less invocation time left than this, milliseconds (default 10,000).
    pub margin_ms: u64,
    /// How long the counts of rejected deliveries are kept, days (default
    /// [`crate::retention::DEFAULT_REJECTED_RETENTION_DAYS`], 30; 1 to
    /// [`crate::retention::MAX_RETENTION_DAYS`]): an hour's bucket that started longer ago is
    /// deleted by the sweep (`crate::rejected`).
    pub rejected_retention_days: u32,
}

impl SweepSettings {
    /// [`Self::rejected_retention_days`] as a duration.
    pub fn rejected_retention(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(self.rejected_retention_days) * 24 * 60 * 60)
    }
}

impl Default for SweepSettings {
    fn default() -> Self {
        Self {
            batch_size: 1_000,
            max_batches: 1_000,
            pause_ms: 100,
            duty_percent: 25,
            margin_ms: 10_000,
            rejected_retention_days: crate::retention::DEFAULT_REJECTED_RETENTION_DAYS,
        }
    }
}
