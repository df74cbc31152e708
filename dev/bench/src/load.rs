//! `bench-load` (`make bench-load`): a rough throughput check of the inline receive path, not
//! a benchmark suite. Migrates `DATABASE_URL`, then sends `--n` new Stripe
//! `payment_intent.succeeded` deliveries, signed now, through `shared::Receiver::receive`
//! in-process at `--concurrency`, and prints deliveries/s and this process's CPU per delivery
//! (the first `--concurrency` deliveries warm the pool up and are not measured).
//!
//! Every delivery is logged as the function logs it, on stdout: redirect it to discard it. The
//! result goes to stderr.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use clap::Parser;
use shared::config::DatabaseSettings;

#[derive(Parser, Debug)]
#[command(about = "deliveries/s through the inline receive path, in-process")]
struct Args {
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// Deliveries sent (the first --concurrency of them warm up).
    #[arg(long, default_value_t = 5000)]
    n: usize,
    /// Deliveries in flight at once (and pool connections).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Send the limits as SET LOCAL with every BEGIN (HOOKLEDGER_DB_TRANSACTION_LIMITS).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    transaction_limits: bool,
    /// Named statements prepared once per connection (HOOKLEDGER_DB_STATEMENT_CACHE).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    statement_cache: bool,
}

/// One inline Stripe source; the secret only signs and verifies this run's deliveries.
const SOURCES_JSON: &str = r#"[
  {"name": "stripe", "scheme": "stripe", "secrets": ["whsec_bench_load_placeholder"], "mode": "inline"}
]"#;

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.concurrency > 0 && args.n > args.concurrency,
        "--n must exceed --concurrency (the first --concurrency deliveries only warm up)"
    );
    let mut database = DatabaseSettings::with_url(args.database_url);
    database.pool_size = args.concurrency;
    database.transaction_limits = args.transaction_limits;
    database.statement_cache = args.statement_cache;
    shared::db::migrate_with(&database, &handlers::examples::migrations())
        .await
        .context("migrating")?;
    load(database, args.n, args.concurrency).await
}

/// User + system CPU time of this process, from /proc/self/stat (Linux), in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command name.
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    ticks / 100.0
}

async fn load(database: DatabaseSettings, n: usize, concurrency: usize) -> Result<()> {
    let (receiver, stripe) =
        bench::in_process_receiver(database, SOURCES_JSON, "stripe", true, None)?;
    // Log every delivery as the function does (redirect stdout to discard it); results go to
    // stderr.
    shared::telemetry::init();
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    let run = format!("{now}");
    let deliveries = bench::signed_deliveries(&stripe, &format!("load_{run}"), n, now);
    // Warm up the pool's connections and their prepared statements.
    let warm: Vec<_> = deliveries.iter().take(concurrency).cloned().collect();
    let deliveries = std::sync::Arc::new(deliveries);
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(concurrency));
    let mut tasks = Vec::new();
    for (headers, body) in warm {
        let receiver = receiver.clone();
        tasks.push(tokio::spawn(async move {
            receiver
                .receive("stripe", &headers, &body, now)
                .await
                .status
        }));
    }
    for task in tasks {
        task.await?;
    }
    let (cpu_start, wall_start) = (cpu_seconds(), std::time::Instant::now());
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (receiver, deliveries, next) = (receiver.clone(), deliveries.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut ok = 0usize;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((headers, body)) = deliveries.get(i) else {
                    return ok;
                };
                if receiver.receive("stripe", headers, body, now).await.status == 200 {
                    ok += 1;
                }
            }
        }));
    }
    let mut ok = 0;
    for task in tasks {
        ok += task.await?;
    }
    let wall = wall_start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_start;
    let measured = n - concurrency;
    eprintln!(
        "{measured} deliveries at concurrency {concurrency}: {ok} answered 200, {:.0} deliveries/s, \
         {:.0} us of this process's CPU per delivery",
        measured as f64 / wall,
        cpu * 1e6 / measured as f64
    );
    Ok(())
}
