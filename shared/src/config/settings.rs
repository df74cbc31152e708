//! [`Settings`]: everything a function needs from its environment, and where its sources came
//! from ([`SourcesReload`]). Reading them is `config::env`'s.

use std::path::PathBuf;

use super::audit::AuditSettings;
use super::database::DatabaseSettings;
use super::sources::Sources;
use super::sweep::SweepSettings;
use super::worker::WorkerSettings;

/// Where the sources JSON came from: what the receiver can re-read after a failed verification
/// (see [`crate::sources_refresh`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SourcesOrigin {
    /// `HOOKLEDGER_SOURCES`, or built in code: nothing to re-read.
    #[default]
    Inline,
    /// `HOOKLEDGER_SOURCES_FILE`: the path, re-read as is.
    File(PathBuf),
    /// `HOOKLEDGER_SOURCES_SECRET_ARN`: the secret's ARN (or name), whose current version is
    /// re-read.
    Secret(String),
}

/// Least time between two re-reads of the sources in one execution environment, unless
/// `HOOKLEDGER_SOURCES_REFRESH_SECS` says otherwise: 60 s.
pub const DEFAULT_MIN_REFRESH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// Oldest the sources in force may get in one execution environment before a delivery re-reads
/// them, unless `HOOKLEDGER_SOURCES_MAX_AGE_SECS` says otherwise: 300 s (5 minutes). Bounds how
/// long a secret removed from the sources keeps verifying on a warm receiver.
pub const DEFAULT_SOURCES_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(300);

/// Longest `HOOKLEDGER_SOURCES_MAX_AGE_SECS` may be: 3600 s (an hour).
pub const MAX_SOURCES_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// How the receiver re-reads its sources: after a signature matched none of the secrets, and
/// once they are older than a maximum age.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcesReload {
    /// Where the sources came from.
    pub origin: SourcesOrigin,
    /// Least time between two re-reads in one execution environment
    /// (`HOOKLEDGER_SOURCES_REFRESH_SECS`, default
    /// [`DEFAULT_MIN_REFRESH_INTERVAL`], 60 s).
    pub min_interval: std::time::Duration,
    /// Oldest the sources in force may get before a delivery re-reads them
    /// (`HOOKLEDGER_SOURCES_MAX_AGE_SECS`, 1 to 3600, default [`DEFAULT_SOURCES_MAX_AGE`],
    /// 300 s).
    pub max_age: std::time::Duration,
}

impl Default for SourcesReload {
    fn default() -> Self {
        Self {
            origin: SourcesOrigin::Inline,
            min_interval: DEFAULT_MIN_REFRESH_INTERVAL,
            max_age: DEFAULT_SOURCES_MAX_AGE,
        }
    }
}

/// Everything a function needs from its environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Database connection settings.
    pub database: DatabaseSettings,
    /// The configured sources, as read at cold start.
    pub sources: Sources,
    /// Where the sources came from and how often the receiver may re-read them.
    pub sources_reload: SourcesReload,
    /// The worker (deferred mode).
    pub worker: WorkerSettings,
    /// The worker function the receiver rings after a deferred accept; `None` turns the
    /// doorbell off (the worker's schedule still drains).
    pub worker_function: Option<String>,
    /// The sweeper's bounds.
    pub sweep: SweepSettings,
    /// The auditor's thresholds.
    pub audit: AuditSettings,
    /// Payload encryption's master key and keyring (`HOOKLEDGER_KMS_KEY_ID`,
    /// `HOOKLEDGER_PAYLOAD_KEYS` or `HOOKLEDGER_PAYLOAD_KEYS_FILE`), shared by everything the
    /// execution environment seals or opens; `None` when none is configured (then no source
    /// may set `encrypt_payload`).
    pub payload_keys: Option<std::sync::Arc<crate::privacy::keys::PayloadKeys>>,
}
