//! Settings and source configuration: the only reader of the process environment.
//!
//! Environment variables (all read once, at cold start): every variable, what it means, its
//! default and which functions use it is in one place, the book's configuration reference
//! (`docs/reference/configuration.md`; a test in `tests/tests/api/docs.rs` keeps that page and
//! the variables this crate and the others read the same set).
//!
//! `HOOKLEDGER_DB_HOST`, `HOOKLEDGER_DB_PORT` and `HOOKLEDGER_DB_NAME` are refused together with
//! `DATABASE_URL` (rather than ignored): a URL already names its host, port and database, and a
//! setting that silently does nothing would leave a function pointed at the wrong server.
//!
//! Everything fails closed: a source without a secret, an unknown scheme or mode, an unknown
//! field, or malformed JSON is a start-up error that names the problem.
//!
//! # Rotating a signing secret
//!
//! The sources are read at cold start, but the receiver does not need a redeploy to see a new
//! signing secret. When a delivery's signature matches none of its source's secrets, the
//! receiver re-reads `HOOKLEDGER_SOURCES_SECRET_ARN` (or `HOOKLEDGER_SOURCES_FILE`) and verifies
//! once more against what it read ([`crate::sources_refresh`]). It re-reads at most once per
//! `HOOKLEDGER_SOURCES_REFRESH_SECS` per execution environment, whatever the number of failures,
//! and one re-read at a time; a re-read that fails, or that finds JSON which does not validate,
//! is logged without values and the sources already loaded stay in force. It also re-reads
//! once its sources are `HOOKLEDGER_SOURCES_MAX_AGE_SECS` old (default 300 s), before the
//! delivery that finds them so is verified: a secret removed from the sources stops verifying
//! within that age even when no signature fails. `HOOKLEDGER_SOURCES`
//! itself is never re-read (it is the function's environment). Rotate in two steps, because
//! a warm environment may not have re-read yet and a new environment reads whatever is current:
//! first put a version whose source lists the new secret before the old one
//! (`"secrets": ["new", "old"]`), switch the provider to the new secret, and once the log's
//! `key_index` stays 0, put a version without the old one. The worker does not re-read: it
//! verifies nothing.

mod audit;
mod compatibility;
mod console;
mod database;
mod env;
mod error;
mod github_hook;
mod provider_api;
mod settings;
mod sources;
pub mod sql_handlers;
mod sweep;
pub mod targets;
#[cfg(test)]
mod test_support;
mod worker;

pub use audit::AuditSettings;
pub use compatibility::{check_compatible, check_dispatch_fits_lease};
pub use console::{ConsoleAllow, ConsoleSettings};
pub use database::{DatabaseSettings, CLIENT_DEADLINE_MARGIN_MS, POSTGRES_MAX_TIMEOUT_MS};
pub use env::db_endpoint;
pub use error::ConfigError;
pub use github_hook::{
    GithubHook, GithubHookError, GithubHookSpec, GithubHookTarget, GITHUB_API_BASE_URL,
};
pub use provider_api::{
    default_api_base_url, ProviderApi, PADDLE_API_BASE_URL, STRIPE_API_BASE_URL,
};
pub use settings::{
    Settings, SourcesOrigin, SourcesReload, DEFAULT_MIN_REFRESH_INTERVAL, DEFAULT_SOURCES_MAX_AGE,
    MAX_SOURCES_MAX_AGE,
};
pub use sources::{
    Mode, SourceConfig, SourceSpec, Sources, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_BODY_BYTES,
    MAX_SOURCE_NAME_LEN,
};
pub use sweep::SweepSettings;
pub use worker::{Backoff, WorkerSettings};
