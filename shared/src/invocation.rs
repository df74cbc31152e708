//! A Lambda invocation's time budget, shared by the scheduled functions (worker, sweeper,
//! auditor): they stop starting work when too little of it is left.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The invocation's deadline from the runtime's `Lambda-Runtime-Deadline-Ms` (unix epoch,
/// milliseconds). cargo-lambda's local emulator sends the timeout itself (e.g. `600000`)
/// instead; a value before 2001 is read that way, as milliseconds from `now`.
pub fn deadline(deadline_ms: u64, now: SystemTime) -> SystemTime {
    const EPOCH_2001_MS: u64 = 1_000_000_000_000;
    if deadline_ms < EPOCH_2001_MS {
        now + Duration::from_millis(deadline_ms)
    } else {
        UNIX_EPOCH + Duration::from_millis(deadline_ms)
    }
}

/// Time left until `deadline` (zero once it has passed).
pub fn remaining(deadline: SystemTime) -> Duration {
    deadline
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_an_epoch_or_the_emulators_relative_timeout() {
        let now = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
        assert_eq!(
            deadline(1_750_000_060_000, now),
            UNIX_EPOCH + Duration::from_millis(1_750_000_060_000)
        );
        assert_eq!(deadline(600_000, now), now + Duration::from_secs(600));
        assert_eq!(remaining(now), Duration::ZERO);
    }
}
