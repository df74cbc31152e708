//! `hookledger`: the operator's tools, running the same `shared` code as the functions against
//! any `DATABASE_URL` (and the same sources: `HOOKLEDGER_SOURCES`, `HOOKLEDGER_SOURCES_FILE` or
//! `HOOKLEDGER_SOURCES_SECRET_ARN`, for each source's retention).
//!
//! Each command prints a readable summary, or with `--json` the same report the function
//! returns. Log lines go to stderr (`RUST_LOG`, default `warn`).

use clap::{Parser, Subcommand};

mod audit;
mod sweep;

/// hookledger's operator CLI.
#[derive(Debug, Parser)]
#[command(name = "hookledger", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Delete expired ledger keys now, in bounded batches (what the sweeper function does).
    Sweep(sweep::Args),
    /// Report stuck claims, idle transactions, retention, dead letters, backlog and quiet
    /// sources (what the auditor function reports).
    Audit(audit::Args),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .init();
    let cli = Cli::parse();
    let settings = shared::Settings::from_env().await?;
    let pool = shared::db::pool(&settings.database)?;
    match cli.command {
        Command::Sweep(args) => sweep::run(&settings, &pool, args).await,
        Command::Audit(args) => audit::run(&settings, &pool, args).await,
    }
}
