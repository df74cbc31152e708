//! `bench-sweep` (`make bench-sweep`): what the retention sweep costs the receivers' claims.
//!
//! On its own throwaway PostgreSQL (`DATABASE_URL`), in one run:
//! 1. loads a ledger of `--expired-rows` expired `completed` keys (one `INSERT ... SELECT
//!    generate_series`, 1.0-1.8 KB payloads, two sources, claimed 60 to 31 days ago, in time
//!    order as a ledger is appended) and `--live-rows` recent ones, then `VACUUM ANALYZE`;
//! 2. `EXPLAIN (ANALYZE, BUFFERS)` of the sweep's batch statement after 10 batches;
//! 3. paced live claim traffic (`--connections` tasks, `--rate` claims/s in all, through
//!    `shared::ledger::claim` and `Tx::complete`, ~10% duplicates) in phases, in this order:
//!    no sweep, during `shared::sweep::run` (default settings), during each
//!    `--sweep-variants` sweep (ledger reloaded first), during one unbatched `DELETE` of the
//!    same rows (reloaded first), and no sweep again as a noise control. Before every phase:
//!    `CHECKPOINT` and wait until no autovacuum worker runs and the server writes no WAL
//!    ([`Bench::settle`]), so each phase starts from the same state. A sweep phase is measured
//!    only while the sweep runs (it ends the phase when it finishes early);
//! 4. the hot duplicate through `claim` (with the expiry check) interleaved with the lookup as
//!    it was before retention (BASELINE, `baseline.rs`);
//! 5. the auditor: every statement of `shared::audit::sql` (and the sweep's two it reuses)
//!    and the whole `shared::audit::peek`, timed warm on a ledger of `--audit-rows` rows in a
//!    realistic mix, then on 10,000,000 rows (`--ten-million false` skips that), with each plan;
//! 6. writes the Markdown report (`--out`, default `dev/bench/SWEEP.md`), with findings computed
//!    from the numbers, and prints a summary.
//!
//! Not a test: it asserts nothing, it measures.

use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;

/// Prints a progress line to stderr with the time since start.
macro_rules! step {
    ($bench:expr, $($arg:tt)*) => {
        eprintln!("[{:>6.1} s] {}", $bench.t0.elapsed().as_secs_f64(), format!($($arg)*))
    };
}

mod args;
mod audit;
mod baseline;
mod claims;
mod facts;
mod findings;
mod load;
mod phases;
mod plan;
mod report;
mod run;
mod setup;
mod sources;
mod traffic;

use args::Args;
use setup::Bench;

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let started = Instant::now();
    let bench = Bench::new(args).await?;
    let report = bench.run().await?;
    if let Some(dir) = bench.args.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&bench.args.out, &report.markdown)
        .with_context(|| format!("writing {}", bench.args.out.display()))?;
    println!("{}", report.summary);
    println!(
        "report: {} (whole run {:.0} s)",
        bench.args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
