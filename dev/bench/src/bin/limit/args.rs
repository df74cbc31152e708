//! The command line of `bench-limit` (`bench-limit --help`): the `limit` and `scale`
//! subcommands.

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(about = "pgbench limit, per-event database work, and claim latency at scale")]
pub struct Args {
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, global = true)]
    pub database_url: Option<String>,
    /// Where limit/scale .json and .md go.
    #[arg(long, default_value = "dev/bench/results", global = true)]
    pub out_dir: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// pgbench (a)/(b)/(c) throughput and per-event database work.
    Limit {
        /// Seconds per pgbench run.
        #[arg(long, default_value_t = 10)]
        duration: u64,
        /// pgbench client counts.
        #[arg(long, value_delimiter = ',', default_value = "1,8,32,64")]
        clients: Vec<usize>,
        /// Events per per-event measurement.
        #[arg(long, default_value_t = 2000)]
        events: u64,
        /// The pgbench scripts' directory.
        #[arg(long, default_value = "dev/bench/pgbench")]
        scripts: String,
    },
    /// Claim latency with the ledger at each size.
    Scale {
        /// Ledger sizes, rows, grown in this order.
        #[arg(long, value_delimiter = ',', default_value = "10000,1000000,10000000")]
        sizes: Vec<u64>,
        /// Measured deliveries per size and concurrency.
        #[arg(long, default_value_t = 2000)]
        claims: usize,
        /// Concurrencies measured at each size.
        #[arg(long, value_delimiter = ',', default_value = "1,8")]
        concurrency: Vec<usize>,
        /// dev/bench/SWEEP.md, quoted.
        #[arg(long, default_value = "dev/bench/SWEEP.md")]
        sweep_md: String,
    },
}
