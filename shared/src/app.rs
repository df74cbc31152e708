//! [`App`]: what a team hands hookledger's functions and its CLI, its handlers and their tables.
//!
//! A team's repository depends on hookledger by version and keeps only what is its own; each
//! of its function binaries is one call that hands its [`App`] to hookledger's runtime
//! (`hookledger::receiver::main(my_handlers::APP)`), as this repository's reference deployment
//! does with `handlers::APP`.

use crate::db::MigrationSet;
use crate::handler::Registry;
use crate::sql_handler::HandlersError;
use crate::Sources;

/// A team's handlers and their tables, as plain function pointers so that an `App` is a
/// `const` (`pub const APP: App = App { registry, migrations };`).
///
/// - The receiver, the worker, replay, the console's re-drive and `hookledger redrive` run the
///   handlers [`App::registry`] returns for the configured sources.
/// - The migrate function and `hookledger migrate` apply [`App::migrations`] after the ledger's
///   own, each set versioned on its own (`hookledger_{name}_schema_history`).
#[derive(Debug, Clone, Copy)]
pub struct App {
    /// The handlers by `(source, event_type)` for the configured sources. An event type with
    /// no handler completes as the recorded no-op (`{"status": "ignored", ...}`).
    pub registry: fn(&Sources) -> Registry,
    /// The migration sets for the handlers' tables, applied in order after the ledger's.
    pub migrations: fn() -> Vec<MigrationSet>,
}

impl App {
    /// The handlers every function and the CLI run for `sources`: [`App::registry`]'s Rust
    /// handlers joined by each source's SQL handlers (`"handlers"` in the sources JSON,
    /// `crate::sql_handler`). Every place that runs handlers builds them here.
    ///
    /// # Errors
    /// [`HandlersError`]: a SQL handler's statement whose `$n` count or kind is refused, or a
    /// SQL handler matching an event type a Rust handler is registered for on the same source
    /// (start-up errors naming source, handler and statement, or both handlers).
    pub fn handlers(&self, sources: &Sources) -> Result<Registry, HandlersError> {
        crate::sql_handler::with_sql_handlers((self.registry)(sources), sources)
    }

    /// An app with no handler and no table: every event completes as the recorded no-op. For
    /// a deployment that only forwards (built-in targets) or only records.
    pub const NONE: App = App {
        registry: |_| Registry::new(),
        migrations: Vec::new,
    };
}
