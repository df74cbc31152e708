//! `bench-limit` (issue 12, parts 2 and 6): what PostgreSQL itself allows, next to what the
//! receiver asks of it.
//!
//! - `bench-limit limit`: pgbench custom scripts `dev/bench/pgbench/{a-receiver,b-seeds,
//!   c-one-statement}.sql` at 1, 8, 32, 64 clients (`-M prepared`, `-j 2`, `--duration` s
//!   each), and the database work per event (statements from `pg_stat_statements`, round trips
//!   through a turn-counting proxy, WAL bytes from `pg_stat_wal`, heap and index tuples from
//!   `pg_stat_user_tables`) for the real receive path (`shared::Receiver::receive`
//!   in-process: new events, then duplicates of them) and for each script. Checks that (a)
//!   issues the statements the receiver issues. Writes `dev/bench/results/limit.{json,md}`.
//! - `bench-limit scale`: new-event receive latency (p50/p99 of `Receiver::receive`, at
//!   concurrency 1 and 8) with the ledger holding 10k, 1M and 10M rows (grown in place with
//!   `INSERT ... SELECT generate_series`), plus the sweeper's and auditor's figures quoted from
//!   `dev/bench/SWEEP.md`. Writes `dev/bench/results/scale.{json,md}`.
//!
//! Needs `DATABASE_URL` (a throwaway server: the schema is migrated, tables are filled, stats
//! reset) started with `pg_stat_statements` preloaded and `track_utility` on (see
//! `scripts/postgres.sh`, `HOOKLEDGER_PG_OPTIONS`), and `pgbench` on PATH. Run from the
//! repository root. The receiver's metrics go to stdout (one EMF line per delivery): redirect
//! it; progress goes to stderr.

use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;

mod args;
mod database;
mod deliveries;
mod limit;
mod machine;
mod pgbench;
mod pgstat;
mod scale;
mod work;

use args::{Args, Command};
use limit::limit;
use scale::scale;

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let url = args
        .database_url
        .clone()
        .context("DATABASE_URL (or --database-url) is required")?;
    std::fs::create_dir_all(&args.out_dir)?;
    let started = Instant::now();
    match args.command {
        Command::Limit {
            duration,
            clients,
            events,
            scripts,
        } => limit(&url, &args.out_dir, duration, &clients, events, &scripts).await?,
        Command::Scale {
            sizes,
            claims,
            concurrency,
            sweep_md,
        } => scale(&url, &args.out_dir, &sizes, claims, &concurrency, &sweep_md).await?,
    }
    eprintln!(
        "bench-limit done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
