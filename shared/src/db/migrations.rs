//! Migration sets beside the ledger's own: the handlers' business tables (and the examples'),
//! each with its own refinery history table, applied after the ledger's.
//!
//! Every set is versioned on its own (`V1__...` in each), so the sets never collide on version
//! numbers, and a production database gets only the sets its build asks for.

use super::{connect, embedded, DbError};
use crate::config::DatabaseSettings;

/// The ledger's own history table (refinery's default name, kept so databases migrated before
/// the sets existed keep their history).
pub const LEDGER_HISTORY_TABLE: &str = "refinery_schema_history";

/// A set of forward-only migrations (refinery naming `V<n>__<verb>_<object>.sql`) with its own
/// history table `hookledger_{name}_schema_history`.
///
/// Build one from a refinery runner embedded in the crate that owns the tables:
///
/// ```text
/// mod embedded {
///     refinery::embed_migrations!("migrations");
/// }
/// let set = MigrationSet::new("handlers", embedded::migrations::runner());
/// ```
#[derive(Debug, Clone)]
pub struct MigrationSet {
    name: &'static str,
    table: String,
    migrations: Vec<refinery::Migration>,
}

impl MigrationSet {
    /// The set `name` (lowercase letters, digits and `_`: it becomes part of the history
    /// table's name, which refinery writes into its SQL unquoted) with `runner`'s migrations.
    pub fn new(name: &'static str, runner: refinery::Runner) -> Self {
        Self::from_runner(name, format!("hookledger_{name}_schema_history"), runner)
    }

    fn from_runner(name: &'static str, table: String, runner: refinery::Runner) -> Self {
        let mut migrations = runner.get_migrations().clone();
        // Embedded in file-name order (V10 before V2); applied in version order.
        migrations.sort();
        Self {
            name,
            table,
            migrations,
        }
    }

    /// The ledger's own migrations (`migrations/` in the repository), in refinery's default
    /// history table [`LEDGER_HISTORY_TABLE`].
    pub fn ledger() -> Self {
        Self::from_runner(
            "ledger",
            LEDGER_HISTORY_TABLE.to_owned(),
            embedded::migrations::runner(),
        )
    }

    /// The set's name, e.g. `examples`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The set's history table, e.g. `hookledger_examples_schema_history`.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The set's migrations, in version order.
    pub fn migrations(&self) -> &[refinery::Migration] {
        &self.migrations
    }

    /// The migrations' names (`V1__create_orders`); other sets than the ledger's are prefixed
    /// with the set's name (`examples/V1__create_orders`).
    pub fn names(&self) -> Vec<String> {
        self.migrations.iter().map(|m| self.label(m)).collect()
    }

    fn label(&self, migration: &refinery::Migration) -> String {
        if self.table == LEDGER_HISTORY_TABLE {
            migration.to_string()
        } else {
            format!("{}/{migration}", self.name)
        }
    }
}

/// Applies every pending migration of the ledger's set, then of each of `sets` in order, each
/// set recorded in its own history table. Safe to run repeatedly; returns the names applied
/// this time ([`MigrationSet::names`]' form).
///
/// # Errors
/// [`DbError::Connect`] when the database is unreachable, [`DbError::Migrate`] when a
/// migration fails or a set's applied history diverges from its embedded files (the sets
/// applied before the failing one stay applied).
pub async fn migrate_with(
    settings: &DatabaseSettings,
    sets: &[MigrationSet],
) -> Result<Vec<String>, DbError> {
    let mut client = connect(settings).await?;
    let mut applied = Vec::new();
    for set in std::iter::once(&MigrationSet::ledger()).chain(sets) {
        let mut runner = refinery::Runner::new(&set.migrations);
        runner.set_migration_table_name(&set.table);
        let report = runner.run_async(&mut client).await?;
        applied.extend(report.applied_migrations().iter().map(|m| set.label(m)));
    }
    Ok(applied)
}
