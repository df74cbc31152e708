//! `hookledger migrate` and `hookledger check-config`: what a deploy runs first.

use anyhow::Context;
use shared::config::DatabaseSettings;
use shared::coverage::Coverage;
use shared::App;
use shared::Settings;

/// Options of `hookledger migrate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print `{"applied": [...]}` (the migrations applied by this run) instead of a line.
    #[arg(long)]
    json: bool,
}

/// A stand-in for the sources, which migrating does not read (its signing secret signs nothing).
const NO_SOURCES: &str = r#"[{"name": "migrate", "scheme": "github", "secrets": ["unused"]}]"#;

/// The database settings exactly as the functions read them (`DATABASE_URL` or
/// `HOOKLEDGER_DB_SECRET_ARN`, `HOOKLEDGER_DB_CA_FILE`, ...), without needing the sources.
async fn database_settings() -> anyhow::Result<DatabaseSettings> {
    let settings = Settings::from_lookup_with_secrets(|name| match name {
        "HOOKLEDGER_SOURCES" => Some(NO_SOURCES.to_owned()),
        "HOOKLEDGER_SOURCES_FILE" | "HOOKLEDGER_SOURCES_SECRET_ARN" => None,
        other => std::env::var(other).ok(),
    })
    .await
    .map_err(crate::config_error)?;
    Ok(settings.database)
}

/// Applies the pending migrations, the ledger's then the handlers' sets for the features this
/// build has (`shared::db::migrate_with` with `handlers::migrations()`), and prints their names,
/// or that the database is up to date.
///
/// # Errors
/// When the database settings are missing or invalid, the database is unreachable, or a
/// migration fails.
pub async fn run(app: App, args: Args) -> anyhow::Result<()> {
    let database = database_settings().await?;
    let applied = shared::db::migrate_with(&database, &(app.migrations)())
        .await
        .context("migrating")?;
    if args.json {
        println!("{}", serde_json::json!({ "applied": applied }));
    } else if applied.is_empty() {
        println!("migrations: up to date");
    } else {
        println!("migrations applied: {}", applied.join(", "));
    }
    Ok(())
}

/// `hookledger check-config` arguments.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Fail (exit 1) when a handler is registered for a source that is not configured, a
    /// configured source has no handler and no built-in target, or SQL handlers' statements
    /// could not be prepared because no database answered (for CI: give it one).
    #[arg(long)]
    pub strict: bool,
}

/// Reads the configuration exactly as the functions do at cold start and prints the sources
/// found (`configuration: sources a, b`), then what runs for each (`source a: handlers for
/// ...; targets ...`) and a `warning:` line per gap (`shared::coverage`). With SQL handlers
/// (`shared::sql_handler`) it prepares their statements against the database when one is
/// reachable (`SQL handlers: statements prepared against the database (N)`), and says so when
/// none is (`SQL handlers: statements not prepared (...)`): `make check` has no database.
///
/// # Errors
/// The start-up error the functions would stop with (a SQL handler's statement the database
/// refuses included, naming source, handler, patterns and statement); with `--strict`, any
/// gap, and SQL handlers whose statements no database was there to prepare.
pub async fn check_config(app: App, args: CheckArgs) -> anyhow::Result<()> {
    let settings = Settings::from_env().await.map_err(crate::config_error)?;
    let mut names: Vec<&str> = settings.sources.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    println!("configuration: sources {}", names.join(", "));
    let handlers = app.handlers(&settings.sources)?;
    let coverage = Coverage::of(&handlers, &settings.sources);
    print!("{}", coverage.text());
    let sql = shared::sql_handler::build_all(&settings.sources)?;
    let prepared = sql.is_empty() || prepare_sql_handlers(&settings, &sql).await?;
    if args.strict && !coverage.gaps.is_empty() {
        anyhow::bail!(
            "--strict: {} warning(s) in the configuration (above)",
            coverage.gaps.len()
        );
    }
    if args.strict && !prepared {
        anyhow::bail!(
            "--strict: the SQL handlers' statements were not checked against the schema: \
             point DATABASE_URL at a database with your tables"
        );
    }
    Ok(())
}

/// Prepares the SQL handlers' statements against the configured database, if it answers:
/// whether they were prepared.
///
/// # Errors
/// The first statement the database refuses.
async fn prepare_sql_handlers(
    settings: &Settings,
    handlers: &[std::sync::Arc<shared::sql_handler::SqlHandlers>],
) -> anyhow::Result<bool> {
    use shared::sql_handler::{prepare::prepare_all, PrepareFailure};
    let not_prepared = |why: &str| println!("SQL handlers: statements not prepared ({why})");
    let Ok(client) = shared::db::connect(&settings.database).await else {
        not_prepared("no database reachable");
        return Ok(false);
    };
    match prepare_all(&client, "BEGIN", handlers).await {
        Ok(n) => {
            println!("SQL handlers: statements prepared against the database ({n})");
            Ok(true)
        }
        Err(PrepareFailure::Refused(error)) => anyhow::bail!("{error}"),
        Err(PrepareFailure::Unchecked(_)) => {
            not_prepared("the database did not answer");
            Ok(false)
        }
    }
}
