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

    /// The relations in schema `public` this set's migrations create, by name
    /// ([`super::grants::created_relations`]): the ones `hookledger_handlers` is granted after
    /// the set ran, and no others.
    pub fn relations(&self) -> Vec<String> {
        super::grants::created_relations(self.migrations.iter().filter_map(|m| m.sql()))
    }

    fn label(&self, migration: &refinery::Migration) -> String {
        if self.table == LEDGER_HISTORY_TABLE {
            migration.to_string()
        } else {
            format!("{}/{migration}", self.name)
        }
    }
}

/// What one run of the migrations did: the migrations it applied, and those the database has
/// that this build does not know (it is ahead: a newer build migrated it, e.g. before a
/// CloudFormation rollback brought this one back). Names in [`MigrationSet::names`]' form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrationReport {
    /// Applied by this run, in order.
    pub applied: Vec<String>,
    /// Recorded in the database's history but unknown to this build (forward-only schema:
    /// migrations are additive, so this build runs on it; nothing was applied to that set).
    pub ahead: Vec<String>,
}

/// A refinery failure as a cause ([`DbError::Migrate`]): refinery's own words ("error applying
/// migration V3__create_orders"), and for a statement PostgreSQL refused, its SQLSTATE and
/// message as [`super::describe`] words them (refinery's text alone says "`...`, `db error`", and
/// the statement's error would print PostgreSQL's DETAIL). Fatal until the migration or the
/// database is fixed (a divergent history, a broken migration, a missing privilege), except a
/// lock timeout behind another deploy's migration, which the next deploy gets past.
#[derive(Debug)]
pub struct MigrationError(refinery::Error);

impl MigrationError {
    /// refinery's error (its kind, and the report of what was applied before the failure).
    pub fn inner(&self) -> &refinery::Error {
        &self.0
    }
}

impl From<refinery::Error> for MigrationError {
    fn from(error: refinery::Error) -> Self {
        Self(error)
    }
}

impl std::fmt::Display for MigrationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.kind() {
            refinery::error::Kind::Connection(doing, cause) => {
                match cause.downcast_ref::<tokio_postgres::Error>() {
                    Some(pg) => write!(f, "{doing}: {}", super::describe(pg)),
                    None => f.write_str(doing),
                }
            }
            other => std::fmt::Display::fmt(other, f),
        }
    }
}

impl std::error::Error for MigrationError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self.0.kind() {
            // Said in full above (never PostgreSQL's DETAIL).
            refinery::error::Kind::Connection(_, cause)
                if cause.downcast_ref::<tokio_postgres::Error>().is_some() =>
            {
                None
            }
            refinery::error::Kind::Connection(_, cause) => Some(cause.as_ref()),
            other => other.source(),
        }
    }
}

/// Applies every pending migration of the ledger's set, then of each of `sets` in order, each
/// set recorded in its own history table. Safe to run repeatedly; returns the names applied
/// this time ([`MigrationSet::names`]' form). A database ahead of this build is not an error
/// (see [`migrate_client`]).
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
    let report = migrate_client(&mut client, sets).await?;
    Ok(report.applied)
}

/// Takes the database's schema advisory lock for the session (re-entrant; released when the
/// session ends): one migration run at a time per database, whether from a deploy (the migrate
/// function), the operator CLI's `hookledger migrate`, or both at once. Concurrent runs on a
/// fresh database otherwise collide on the catalog's unique indexes (`CREATE TYPE`, ...).
pub const SCHEMA_LOCK: &str = "SELECT pg_advisory_lock(hashtext('hookledger.schema'))";

/// [`migrate_with`] over an open connection, with the full report. Waits for the
/// [`SCHEMA_LOCK`] first (under the session's `lock_timeout`, if any).
///
/// Refinery runs strictly (`abort_divergent` and `abort_missing`, its defaults), with one
/// exception decided here first: when a set's history holds versions this build does not have
/// and every migration this build has is applied with the same name and checksum, the database
/// is ahead (a newer build migrated it): nothing is applied to that set and its unknown
/// migrations are reported in [`MigrationReport::ahead`] (and logged). A divergent migration
/// (same version, another name or checksum) and a gap (a migration of this build not applied
/// below the database's latest) still fail. After each set other than the ledger's (applied now,
/// before, or ahead), `hookledger_handlers` is granted exactly the relations the set creates
/// ([`MigrationSet::relations`], [`super::grants`]): no other table of the database.
///
/// # Errors
/// [`DbError::Migrate`] as [`migrate_with`]; [`DbError::Statement`] when a statement of the
/// check or a grant fails.
pub async fn migrate_client(
    client: &mut tokio_postgres::Client,
    sets: &[MigrationSet],
) -> Result<MigrationReport, DbError> {
    client
        .batch_execute(SCHEMA_LOCK)
        .await
        .map_err(|e| DbError::Statement(e.into()))?;
    let mut report = MigrationReport::default();
    for set in std::iter::once(&MigrationSet::ledger()).chain(sets) {
        let mut runner = refinery::Runner::new(&set.migrations);
        runner.set_migration_table_name(&set.table);
        let ahead = ahead_of_build(client, &runner, set).await?;
        if ahead.is_empty() {
            let run = runner.run_async(client).await?;
            report
                .applied
                .extend(run.applied_migrations().iter().map(|m| set.label(m)));
        } else {
            tracing::warn!(
                set = set.name,
                ahead = ?ahead,
                "the database has migrations this build does not know: left as it is"
            );
            report.ahead.extend(ahead);
        }
        if set.table != LEDGER_HISTORY_TABLE {
            let relations = set.relations();
            super::grants::grant_to_handlers(client, &relations).await?;
        }
    }
    Ok(report)
}

/// The labels of `set`'s applied migrations unknown to this build, when every migration of
/// the build is applied unchanged (the database is ahead); else empty (refinery then decides,
/// strictly: nothing pending, pending migrations, a divergence or a gap).
async fn ahead_of_build(
    client: &mut tokio_postgres::Client,
    runner: &refinery::Runner,
    set: &MigrationSet,
) -> Result<Vec<String>, DbError> {
    let exists = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&set.table])
        .await
        .map_err(|e| DbError::Statement(e.into()))?;
    if !exists.get::<_, bool>(0) {
        return Ok(Vec::new());
    }
    let applied = runner.get_applied_migrations_async(client).await?;
    let unknown: Vec<String> = applied
        .iter()
        .filter(|a| !set.migrations.iter().any(|m| m.version() == a.version()))
        .map(|a| set.label(a))
        .collect();
    let all_known_applied = set
        .migrations
        .iter()
        .all(|m| applied.iter().any(|a| a == m));
    if unknown.is_empty() || !all_known_applied {
        return Ok(Vec::new());
    }
    Ok(unknown)
}
