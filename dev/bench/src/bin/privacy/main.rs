//! `bench-privacy` (`make bench PARTS=privacy`): receiver CPU, p50/p99 and throughput per
//! delivery with payload encryption off and on (and redaction), interleaved in one run on
//! `DATABASE_URL` (migrated here), the stored bytes per row and the master key's wrapper calls
//! (issue 28; what is measured: `bench::privacy`). Writes `dev/bench/results/privacy.json` and
//! `privacy.md` (the section `bench-report` puts into `dev/bench/RESULTS.md`) and prints the
//! section on stderr. Every delivery is logged as the function logs it, on stdout: redirect it
//! to discard it.

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    about = "receiver CPU and latency per delivery with payload encryption off and on: \
                   dev/bench/results/privacy.*"
)]
struct Args {
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// Interleaved rounds (every variant measured once per round).
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// New deliveries per variant and round.
    #[arg(long, default_value_t = 10000)]
    n: usize,
    /// Deliveries in flight at once (and pool connections).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Measure the redacting source too.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    redact: bool,
    /// Where privacy.json and privacy.md are written.
    #[arg(long, default_value = "dev/bench/results")]
    out: PathBuf,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let plan = bench::privacy::Plan {
        rounds: args.rounds,
        n: args.n,
        concurrency: args.concurrency,
        redact: args.redact,
    };
    let measured = bench::privacy::run(&args.database_url, plan).await?;
    let command = format!(
        "make bench PARTS=privacy, which runs HOOKLEDGER_PG_DURABLE=1 scripts/with-postgres.sh \
         <target>/release/bench-privacy --rounds {} --n {} --concurrency {} --redact {}",
        args.rounds, args.n, args.concurrency, args.redact
    );
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(
        args.out.join("privacy.json"),
        serde_json::to_string_pretty(&measured.json(&command))? + "\n",
    )?;
    let md = measured.markdown(&command);
    std::fs::write(args.out.join("privacy.md"), &md)?;
    eprint!("{md}");
    eprintln!(
        "bench-privacy: wrote {}/privacy.json and privacy.md",
        args.out.display()
    );
    Ok(())
}
