//! The command line of `bench-sweep` (`bench-sweep --help`).

use std::path::PathBuf;

use clap::Parser;

#[derive(Parser, Debug, Clone)]
#[command(about = "claim latency while the retention sweep deletes a large ledger")]
pub struct Args {
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Expired `completed` rows loaded (each delete phase faces all of them).
    #[arg(long, default_value_t = 1_000_000)]
    pub expired_rows: i64,
    /// Recent (not expired) `completed` rows loaded beside them.
    #[arg(long, default_value_t = 50_000)]
    pub live_rows: i64,
    /// Length of each measured phase, seconds.
    #[arg(long, default_value_t = 30)]
    pub phase_secs: u64,
    /// Concurrent claim tasks, one connection each.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Offered claims per second, all tasks together (paced, not a closed loop).
    #[arg(long, default_value_t = 200.0)]
    pub rate: f64,
    /// One claim in this many is a duplicate of an event completed earlier (10: ~10%).
    #[arg(long, default_value_t = 10)]
    pub duplicate_every: u64,
    /// More batched-sweep phases after the default one, as `batch_size:duty_percent` (the
    /// default `pause_ms` stays); a third field sets `wal_compression` server-wide for that
    /// phase (e.g. `5000:25:lz4`). Each on a freshly reloaded ledger (about 1.5 minutes each).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "5000:25,500:25,1000:25:lz4"
    )]
    pub sweep_variants: Vec<String>,
    /// Rows of the auditor's ledger (a realistic mix, loaded after the sweep phases).
    #[arg(long, default_value_t = 1_000_000)]
    pub audit_rows: i64,
    /// Also time the auditor on a 10,000,000-row ledger (about 6 minutes of the run; `--ten-million
    /// false` skips it).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub ten_million: bool,
    /// The Markdown report.
    #[arg(long, default_value = "dev/bench/SWEEP.md")]
    pub out: PathBuf,
}
