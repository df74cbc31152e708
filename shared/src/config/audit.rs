//! [`AuditSettings`]: the auditor's thresholds.

/// The auditor's thresholds (see `crate::audit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditSettings {
    /// A `claimed` row older than this is a stuck claim, seconds (default 300).
    pub stuck_after_secs: u64,
    /// A database session `idle in transaction` for longer than this is counted, seconds
    /// (default 30).
    pub idle_in_transaction_after_secs: u64,
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            stuck_after_secs: 300,
            idle_in_transaction_after_secs: 30,
        }
    }
}
