//! The throwaway database: the bench's own admin session, and the schema migrated with the
//! receiver's limits set on the database.

use anyhow::{Context, Result};
use shared::config::DatabaseSettings;

/// The bench's own session on `url`, with the receiver's statement and lock timeouts lifted.
///
/// # Errors
/// When it cannot connect or lift the limits.
pub async fn admin(url: &str) -> Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connecting to DATABASE_URL")?;
    tokio::spawn(connection);
    // The bench's own sessions (bulk loads, index rebuilds, CHECKPOINT) are not the receiver:
    // the receiver's limits set on the database (`bench::DEPLOYED_LIMITS`) do not apply to them.
    client
        .batch_execute("SET statement_timeout = 0; SET lock_timeout = 0")
        .await
        .context("lifting the limits for the bench's own session")?;
    Ok(client)
}

/// Migrates `url` (the shared schema and the handlers' tables) and sets the receiver's limits
/// on the database ([`bench::DEPLOYED_LIMITS`]).
///
/// # Errors
/// When a migration or the `ALTER DATABASE` fails.
pub async fn migrate(url: &str) -> Result<()> {
    let settings = DatabaseSettings::with_url(url.to_owned());
    shared::db::migrate_with(&settings, &handlers::examples::migrations())
        .await
        .context("migrating")?;
    // The receiver as deployed: its limits on the database side (the deploy sets them on the
    // receiver's login; here on the database, for every session), and the receiver sends no
    // SET LOCAL (`transaction_limits` off in `receiver` below).
    admin(url)
        .await?
        .batch_execute(bench::DEPLOYED_LIMITS)
        .await
        .context("setting the receiver's limits on the database")?;
    Ok(())
}
