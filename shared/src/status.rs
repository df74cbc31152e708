//! The ledger row's status: the `event_status` enum, in the design's words. A leaf: it depends
//! on nothing of this crate, and everything that speaks of a row's status uses it.

/// The ledger row's status, mirrored from PostgreSQL's `event_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Durably accepted, not processed. In: the receiver's claim. Out: inline completion in the
    /// same transaction, or a worker's lease.
    Claimed,
    /// Leased by a worker until `lease_expires_at`, under `lease_token`. Out: complete, fail,
    /// release, or an expired lease taken over by another worker.
    Processing,
    /// The effect and the response are durable. Terminal (until the sweeper deletes the row).
    Completed,
    /// A retryable handler error; retried at `next_attempt_at`. In/out: the worker.
    Failed,
    /// Attempts exhausted, or a fatal handler error (the payload can never be processed); kept
    /// for a human. In: the worker, or the receiver for an inline fatal error. Out: re-drive.
    Dead,
}

impl Status {
    /// The enum label in PostgreSQL.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Claimed => "claimed",
            Status::Processing => "processing",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Dead => "dead",
        }
    }

    /// Parses the PostgreSQL enum label.
    ///
    /// # Errors
    /// [`UnknownStatus`] for a label this build does not know (the schema is ahead of the code).
    pub fn parse(label: &str) -> Result<Self, UnknownStatus> {
        Ok(match label {
            "claimed" => Status::Claimed,
            "processing" => Status::Processing,
            "completed" => Status::Completed,
            "failed" => Status::Failed,
            "dead" => Status::Dead,
            other => return Err(UnknownStatus(other.to_owned())),
        })
    }
}

/// A status label this build does not know (the database's schema is ahead of the code); it
/// carries the label. Not retryable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown event_status {0:?}")]
pub struct UnknownStatus(pub String);
