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

mod pgstat;
mod turns;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use sha2::Digest;
use shared::config::DatabaseSettings;

use pgstat::Work;

#[derive(Parser, Debug)]
#[command(about = "pgbench limit, per-event database work, and claim latency at scale")]
struct Args {
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, global = true)]
    database_url: Option<String>,
    /// Where limit/scale .json and .md go.
    #[arg(long, default_value = "dev/bench/results", global = true)]
    out_dir: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
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

/// One inline Stripe source, as bench-load's.
const SOURCES_JSON: &str = r#"[
  {"name": "stripe", "scheme": "stripe", "secrets": ["whsec_bench_limit_placeholder"], "mode": "inline"}
]"#;

const SCRIPTS: [(&str, &str); 3] = [
    ("a", "a-receiver.sql"),
    ("b", "b-seeds.sql"),
    ("c", "c-one-statement.sql"),
];

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

// ---------------------------------------------------------------------------------------------
// Shared set-up

async fn admin(url: &str) -> Result<tokio_postgres::Client> {
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

async fn migrate(url: &str) -> Result<()> {
    let settings = DatabaseSettings::with_url(url.to_owned());
    shared::db::migrate_with(&settings, &handlers::migrations())
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

struct Bench {
    receiver: Arc<shared::Receiver>,
    stripe: Arc<shared::SourceConfig>,
}

fn receiver(url: &str, pool_size: usize) -> Result<Bench> {
    let mut database = DatabaseSettings::with_url(url.to_owned());
    database.pool_size = pool_size;
    // As template.yaml configures the receiver: the limits live on its login (`migrate`).
    database.transaction_limits = false;
    let (receiver, stripe) = bench::in_process_receiver(database, SOURCES_JSON, "stripe")?;
    Ok(Bench { receiver, stripe })
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A new `payment_intent.succeeded` event body (the shape bench-load sends).
fn body(tag: &str, i: usize, now: i64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": format!("evt_{tag}_{i}"), "object": "event", "created": now,
        "type": "payment_intent.succeeded",
        "data": {"object": {"id": format!("pi_{tag}_{i}"), "amount": 1000 + i,
            "amount_received": 1000 + i, "currency": "usd",
            "metadata": {"order_id": format!("ord_{tag}_{i}")}}}
    }))
    .unwrap_or_default()
}

type Delivery = (http::HeaderMap, Vec<u8>);

fn deliveries(bench: &Bench, tag: &str, n: usize, now: i64) -> Vec<Delivery> {
    (0..n)
        .map(|i| {
            let body = body(tag, i, now);
            let mut headers = http::HeaderMap::new();
            for (name, value) in bench.stripe.verifier.sign(0, "", now, &body) {
                if let (Ok(name), Ok(value)) = (
                    http::HeaderName::from_bytes(name.as_bytes()),
                    http::HeaderValue::from_str(&value),
                ) {
                    headers.insert(name, value);
                }
            }
            (headers, body)
        })
        .collect()
}

/// Delivers `list` at `concurrency`; returns each delivery's latency (ms) and how many were
/// answered 200.
async fn deliver(
    receiver: Arc<shared::Receiver>,
    list: Vec<Delivery>,
    concurrency: usize,
    now: i64,
) -> Result<(Vec<f64>, usize)> {
    let list = Arc::new(list);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (receiver, list, next) = (receiver.clone(), list.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            let mut ok = 0usize;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((headers, body)) = list.get(i) else {
                    return (times, ok);
                };
                let start = Instant::now();
                let reply = receiver.receive("stripe", headers, body, now).await;
                times.push(start.elapsed().as_secs_f64() * 1000.0);
                if reply.status == 200 {
                    ok += 1;
                }
            }
        }));
    }
    let (mut times, mut ok) = (Vec::new(), 0);
    for task in tasks {
        let (t, o) = task.await?;
        times.extend(t);
        ok += o;
    }
    Ok((times, ok))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn show(client: &tokio_postgres::Client, name: &str) -> String {
    match client.query_one(&format!("SHOW {name}"), &[]).await {
        Ok(row) => row.get(0),
        Err(_) => "?".to_owned(),
    }
}

async fn machine_md(client: &tokio_postgres::Client) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':').map(|(_, v)| v.trim().to_owned()))
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let version: String = client
        .query_one("SELECT version()", &[])
        .await
        .map(|r| r.get(0))
        .unwrap_or_default();
    let pgbench = std::process::Command::new("pgbench")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let build = if cfg!(debug_assertions) {
        "**debug** (unoptimised: the in-process receiver's own time is inflated; pgbench and the server-side counts are not)"
    } else {
        "release"
    };
    let mut md = format!(
        "| | |\n|---|---|\n| bench-limit build | {build} |\n| CPU | {cores} cores, {cpu} |\n| Load average at start | {} |\n\
         | PostgreSQL | {version} |\n| pgbench | {pgbench} |\n",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(", ")
    );
    for name in [
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "wal_level",
        "shared_buffers",
        "max_wal_size",
        "checkpoint_timeout",
        "autovacuum",
        "shared_preload_libraries",
        "pg_stat_statements.track",
        "pg_stat_statements.track_utility",
    ] {
        let _ = writeln!(md, "| `{name}` | {} |", show(client, name).await);
    }
    md
}

// ---------------------------------------------------------------------------------------------
// limit

/// The pgbench variables every script uses, from one real delivery's values.
fn pgbench_vars(run: u64) -> Vec<String> {
    // The same length as the receiver's per-event bodies (tag `limit_<10 digits>`, i >= 1000).
    let body = body("limit_0000000000", 1000, now_secs());
    let digest = sha2::Sha256::digest(&body);
    let identity = sha2::Sha256::digest(digest);
    let response = json!({"order_id": "ord_pgbench_000000000000", "status": "recorded"});
    [
        "n=0".to_owned(),
        format!("run={run}"),
        "source=stripe".to_owned(),
        "event_type=payment_intent.succeeded".to_owned(),
        format!("digest=\\x{}", hex(&digest)),
        format!("payload=\\x{}", hex(&body)),
        format!("identity=\\x{}", hex(&identity)),
        "replayed=false".to_owned(),
        "amount=1000".to_owned(),
        "currency=usd".to_owned(),
        "status=200".to_owned(),
        format!("response={response}"),
    ]
    .into_iter()
    .flat_map(|v| ["-D".to_owned(), v])
    .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// One pgbench run's parsed summary.
#[derive(Debug, Clone, Default)]
struct PgbenchRun {
    tps: f64,
    latency_avg_ms: f64,
    processed: u64,
    failed: u64,
}

static RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Runs pgbench with `mode` (`prepared` or `extended`), `clients`, and either `-T seconds` or
/// `-t transactions`, against `url`.
async fn pgbench(
    url: &str,
    script: &str,
    mode: &str,
    clients: usize,
    limit: (&str, u64),
) -> Result<PgbenchRun> {
    let run =
        RUN.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + now_secs() as u64 % 1000 * 100;
    let threads = clients.clamp(1, 2);
    let mut args: Vec<String> = vec![
        "-n".into(),
        "-M".into(),
        mode.into(),
        "-c".into(),
        clients.to_string(),
        "-j".into(),
        threads.to_string(),
        limit.0.into(),
        limit.1.to_string(),
    ];
    args.extend(pgbench_vars(run));
    args.extend(["-f".into(), script.into()]);
    let output = tokio::process::Command::new("pgbench")
        .args(&args)
        .arg(url)
        .output()
        .await
        .context("running pgbench (is it on PATH?)")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let field = |prefix: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .and_then(|rest| {
                rest.trim()
                    .split([' ', '/'])
                    .next()
                    .and_then(|v| v.parse().ok())
            })
    };
    let result = PgbenchRun {
        tps: field("tps =").unwrap_or(f64::NAN),
        latency_avg_ms: field("latency average =").unwrap_or(f64::NAN),
        processed: field("number of transactions actually processed:").unwrap_or(0.0) as u64,
        failed: field("number of failed transactions:").unwrap_or(0.0) as u64,
    };
    if !output.status.success() || result.tps.is_nan() {
        bail!("pgbench failed ({}):\n{text}", output.status);
    }
    Ok(result)
}

/// `url` with its host and port replaced by 127.0.0.1:`port` (the proxy), and the upstream
/// `host:port`.
fn proxied(url: &str, port: u16) -> Result<(String, String)> {
    let config: tokio_postgres::Config = url.parse().context("parsing DATABASE_URL")?;
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => bail!("DATABASE_URL must name a TCP host"),
    };
    let upstream_port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres");
    let db = config.get_dbname().unwrap_or("postgres");
    let password = config
        .get_password()
        .map(|p| format!(":{}", String::from_utf8_lossy(p)))
        .unwrap_or_default();
    Ok((
        format!("postgres://{user}{password}@127.0.0.1:{port}/{db}?sslmode=disable"),
        format!("{host}:{upstream_port}"),
    ))
}

/// Lets the warm-up's pending stats reach the shared counters before a measurement: a
/// backend flushes them when it goes idle at least a second after its last flush, so wait
/// past that second and run one more (read-only: a duplicate) delivery on the connection.
async fn settle(bench: &Bench, warmed: &[Delivery], now: i64) -> Result<()> {
    tokio::time::sleep(Duration::from_millis(1200)).await;
    deliver(bench.receiver.clone(), warmed[..1].to_vec(), 1, now).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}

/// Measures the work of `action` (which handles `events` events): CHECKPOINT, reset
/// pg_stat_statements, snapshot, run, wait for the backends' stats to flush, snapshot.
async fn measure<T>(
    admin: &tokio_postgres::Client,
    proxy: &turns::TurnProxy,
    events: u64,
    action: impl std::future::Future<Output = Result<T>>,
    finish: impl Sized,
) -> Result<(Work, T)> {
    admin.batch_execute("CHECKPOINT").await?;
    pgstat::reset_statements(admin).await?;
    let before = pgstat::snapshot(admin).await?;
    let turns_before = proxy.turns();
    let value = action.await?;
    let turns = proxy.turns() - turns_before;
    // Close the receiver's pool (if any): a backend flushes its table and WAL stats when it
    // exits (an idle one may hold them for a while).
    drop(finish);
    // Backends flush their pending table and WAL stats when idle, at most once a second, and
    // when they exit.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let statements = pgstat::statements(admin).await?;
    let after = pgstat::snapshot(admin).await?;
    Ok((
        pgstat::work(&before, &after, &statements, turns, events),
        value,
    ))
}

fn work_json(w: &Work) -> Value {
    json!({
        "statements": round3(w.statements),
        "round_trips": round3(w.round_trips),
        "wal_bytes": round3(w.wal_bytes),
        "heap_tuples": round3(w.heap_tuples),
        "index_tuples": round3(w.index_tuples),
        "events": w.events,
        "wal_records": round3(w.wal_records),
        "wal_fpi": round3(w.wal_fpi),
        "statement_list": w.statement_list.iter().map(|(k, kind, calls, rows, id)| json!({
            "text": k, "queryid": id, "kind": kind, "calls_per_event": round3(*calls), "rows_per_call": round3(*rows)
        })).collect::<Vec<_>>(),
        "tables": w.table_list.iter().map(|(name, ins, upd, hot, idx)| json!({
            "table": name, "inserts": round3(*ins), "updates": round3(*upd),
            "hot_updates": round3(*hot), "indexes": idx
        })).collect::<Vec<_>>(),
    })
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn short(text: &str, max: usize) -> String {
    let t: String = text.chars().take(max).collect();
    let t = t.replace('|', "\\|");
    if text.chars().count() > max {
        format!("`{t}...`")
    } else {
        format!("`{t}`")
    }
}

fn work_md(label: &str, w: &Work, md: &mut String) {
    let _ = writeln!(
        md,
        "\n**{label}** ({} events): {:.2} statements, {:.2} round trips, {:.0} WAL bytes \
         ({:.2} records, {:.3} full-page images), {:.2} heap tuples, {:.2} index entries per event.\n",
        w.events, w.statements, w.round_trips, w.wal_bytes, w.wal_records, w.wal_fpi,
        w.heap_tuples, w.index_tuples
    );
    let _ = writeln!(
        md,
        "| statement | kind | calls per event | rows per call |\n|---|---|---:|---:|"
    );
    for (key, kind, calls, rows, _) in &w.statement_list {
        let _ = writeln!(
            md,
            "| {} | {kind} | {calls:.3} | {rows:.2} |",
            short(key, 110)
        );
    }
    if !w.table_list.is_empty() {
        let _ = writeln!(
            md,
            "\n| table | inserts | updates | of which HOT | indexes |\n|---|---:|---:|---:|---:|"
        );
        for (name, ins, upd, hot, idx) in &w.table_list {
            let _ = writeln!(md, "| `{name}` | {ins:.3} | {upd:.3} | {hot:.3} | {idx} |");
        }
    }
}

/// Compares the receiver's statements per new event with script (a)'s per transaction.
/// Returns (matches, markdown table).
fn compare(receiver: &Work, a: &Work) -> (bool, String) {
    // The same statement: for DML the text with every constant and parameter replaced by `?`
    // (pg_stat_statements keeps a statement prepared before its reset with its literals, and
    // pgbench numbers its parameters in order of appearance, the receiver by position, which
    // changes the queryid but not the statement); utility statements by their exact text.
    let key = |s: &(String, &'static str, f64, f64, i64)| {
        if s.1 == "dml" {
            pgstat::canonical(&s.0)
        } else {
            s.0.clone()
        }
    };
    let mut ids: Vec<String> = receiver
        .statement_list
        .iter()
        .chain(a.statement_list.iter())
        .map(key)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let calls = |w: &Work, id: &str| {
        w.statement_list
            .iter()
            .filter(|s| key(s) == id)
            .map(|s| s.2)
            .sum::<f64>()
    };
    let mut ok = true;
    let mut rows: Vec<(String, String)> = Vec::new();
    for id in ids {
        let (r, s) = (calls(receiver, &id), calls(a, &id));
        let same = (r - s).abs() < 0.05;
        ok &= same;
        let (text, kind) = receiver
            .statement_list
            .iter()
            .chain(a.statement_list.iter())
            .find(|x| key(x) == id)
            .map_or(("?".to_owned(), "?"), |x| (x.0.clone(), x.1));
        rows.push((
            text.clone(),
            format!(
                "| {} | {kind} | {r:.3} | {s:.3} | {} |",
                short(&text, 110),
                if same { "same" } else { "**MISMATCH**" }
            ),
        ));
    }
    rows.sort();
    let mut md = String::from(
        "| statement | kind | receiver calls per event | (a) calls per transaction | |\n|---|---|---:|---:|---|\n",
    );
    for (_, row) in rows {
        let _ = writeln!(md, "{row}");
    }
    let rt_same = (receiver.round_trips - a.round_trips).abs() < 0.05;
    ok &= rt_same;
    let _ = writeln!(
        md,
        "| *round trips* | | {:.3} | {:.3} | {} |",
        receiver.round_trips,
        a.round_trips,
        if rt_same { "same" } else { "**MISMATCH**" }
    );
    (ok, md)
}

async fn limit(
    url: &str,
    out_dir: &str,
    duration: u64,
    clients: &[usize],
    events: u64,
    scripts_dir: &str,
) -> Result<()> {
    let t0 = Instant::now();
    migrate(url).await?;
    let admin = admin(url).await?;
    admin
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .await
        .context("pg_stat_statements: start the server with HOOKLEDGER_PG_OPTIONS=\"-c shared_preload_libraries=pg_stat_statements ...\"")?;
    let track_utility = show(&admin, "pg_stat_statements.track_utility").await;
    let machine = machine_md(&admin).await;
    let scripts: Vec<(&str, String)> = SCRIPTS
        .iter()
        .map(|(name, file)| (*name, format!("{scripts_dir}/{file}")))
        .collect();
    for (_, path) in &scripts {
        anyhow::ensure!(
            std::path::Path::new(path).exists(),
            "{path} not found (run from the repository root or pass --scripts)"
        );
    }

    // ---- Per event: the receiver and the scripts, one at a time, through the proxy.
    eprintln!("per-event work: {events} events each");
    admin
        .batch_execute(
            "ALTER TABLE webhook_event SET (autovacuum_enabled = off); \
             ALTER TABLE orders SET (autovacuum_enabled = off)",
        )
        .await?;
    let (_, upstream) = proxied(url, 0)?;
    let proxy = turns::TurnProxy::start(upstream).await?;
    let (proxy_url, _) = proxied(url, proxy.port)?;
    let bench = receiver(&proxy_url, 1)?;
    let now = now_secs();
    let tag = format!("limit_{now}");
    // Warm up: the pool's connection and its prepared statements.
    let warm_list = deliveries(&bench, &format!("{tag}_warm"), 20, now);
    let (_, warm_ok) = deliver(bench.receiver.clone(), warm_list.clone(), 1, now).await?;
    anyhow::ensure!(
        warm_ok == 20,
        "warm-up deliveries were not all answered 200 ({warm_ok}/20)"
    );
    settle(&bench, &warm_list, now).await?;
    let new_events: Vec<Delivery> = deliveries(&bench, &tag, events as usize + 1000, now)
        .into_iter()
        .skip(1000)
        .collect();
    let (receiver_new, (_, new_ok)) = measure(
        &admin,
        &proxy,
        events,
        deliver(bench.receiver.clone(), new_events.clone(), 1, now),
        bench,
    )
    .await?;
    // A new pool for the duplicates, warmed up on the duplicate path too.
    let bench = receiver(&proxy_url, 1)?;
    let warm2 = deliveries(&bench, &format!("{tag}_warm2"), 20, now);
    deliver(bench.receiver.clone(), warm2.clone(), 1, now).await?;
    deliver(bench.receiver.clone(), warm2.clone(), 1, now).await?;
    settle(&bench, &warm2, now).await?;
    let (receiver_dup, (_, dup_ok)) = measure(
        &admin,
        &proxy,
        events,
        deliver(bench.receiver.clone(), new_events.clone(), 1, now),
        bench,
    )
    .await?;
    eprintln!("receiver: new {new_ok}/{events} answered 200, duplicates {dup_ok}/{events}");

    let mut script_work = Vec::new();
    for (name, path) in &scripts {
        // pgbench's own turns per connection (start-up, terminate) from a one-transaction run.
        let one_before = proxy.turns();
        pgbench(&proxy_url, path, "extended", 1, ("-t", 1)).await?;
        let one = proxy.turns() - one_before;
        let (mut w, run) = measure(
            &admin,
            &proxy,
            events,
            pgbench(&proxy_url, path, "extended", 1, ("-t", events)),
            (),
        )
        .await?;
        // The connection's own turns (start-up, terminate) out: a one-transaction run took
        // `one` = overhead + T turns, this run overhead + events x T.
        w.round_trips = (w.round_trips * events as f64 - one as f64) / (events as f64 - 1.0);
        eprintln!(
            "({name}) per event: {:.2} statements, {:.2} round trips, {:.0} WAL bytes (pgbench {} processed, {} failed; one-transaction run: {one} turns)",
            w.statements, w.round_trips, w.wal_bytes, run.processed, run.failed
        );
        script_work.push((*name, w, run));
    }
    admin
        .batch_execute(
            "ALTER TABLE webhook_event RESET (autovacuum_enabled); \
             ALTER TABLE orders RESET (autovacuum_enabled)",
        )
        .await?;
    let per_event_secs = t0.elapsed().as_secs_f64();

    // ---- Throughput: for each client count, (a), (b), (c) in turn, directly.
    let t1 = Instant::now();
    let mut tput: Vec<(&str, usize, PgbenchRun)> = Vec::new();
    for &c in clients {
        for (name, path) in &scripts {
            admin.batch_execute("CHECKPOINT").await?;
            let run = pgbench(url, path, "prepared", c, ("-T", duration)).await?;
            eprintln!(
                "({name}) c={c}: {:.0} tps, latency avg {:.2} ms, {} failed",
                run.tps, run.latency_avg_ms, run.failed
            );
            tput.push((*name, c, run));
        }
    }
    let tput_secs = t1.elapsed().as_secs_f64();

    // ---- JSON
    let mut out = serde_json::Map::new();
    for (name, _) in &scripts {
        let mut by_c = serde_json::Map::new();
        for (n, c, run) in &tput {
            if n == name {
                by_c.insert(
                    c.to_string(),
                    json!({"tps": round3(run.tps), "latency_avg_ms": round3(run.latency_avg_ms),
                           "transactions": run.processed, "failed": run.failed}),
                );
            }
        }
        out.insert((*name).to_owned(), Value::Object(by_c));
    }
    let find = |n: &str| script_work.iter().find(|(name, _, _)| *name == n);
    let (a_work, c_work) = match (find("a"), find("c")) {
        (Some(a), Some(c)) => (a.1.clone(), c.1.clone()),
        _ => bail!("scripts a and c are required"),
    };
    let b_work = find("b").map(|b| b.1.clone()).unwrap_or_default();
    let (matches, comparison) = compare(&receiver_new, &a_work);
    out.insert(
        "per_event".into(),
        json!({
            "receiver_new": work_json(&receiver_new),
            "receiver_duplicate": work_json(&receiver_dup),
            "c": work_json(&c_work),
            "a": work_json(&a_work),
            "b": work_json(&b_work),
        }),
    );
    out.insert("a_matches_receiver".into(), json!(matches));
    out.insert(
        "run_seconds".into(),
        json!({"per_event": round3(per_event_secs), "throughput": round3(tput_secs)}),
    );
    std::fs::write(
        format!("{out_dir}/limit.json"),
        serde_json::to_string_pretty(&Value::Object(out))? + "\n",
    )?;

    // ---- Markdown
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## The PostgreSQL limit (pgbench) and database work per event\n"
    );
    let _ = writeln!(
        md,
        "Produced by `HOOKLEDGER_PG_DURABLE=1 HOOKLEDGER_PG_OPTIONS=\"-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all -c pg_stat_statements.track_utility=on\" scripts/with-postgres.sh target/release/bench-limit limit --duration {duration} --events {events} >/dev/null` \
         (a throwaway cluster with PostgreSQL's default durability; this section took {:.0} s: per-event {:.0} s, pgbench {:.0} s). Figures are from one run; compare them with each other.\n",
        t0.elapsed().as_secs_f64(), per_event_secs, tput_secs
    );
    if !matches {
        let _ = writeln!(
            md,
            "> **MISMATCH: `dev/bench/pgbench/a-receiver.sql` no longer issues what the receiver issues for a new event** \
             (table below). Its throughput figures describe the script, not the receiver: update the script to the receive path's statements.\n"
        );
    }
    md.push_str(&machine);
    let _ = writeln!(md, "\n### Throughput\n");
    let _ = writeln!(
        md,
        "Each run: `pgbench -n -M prepared -c C -j min(C,2) -T {duration} -D n=0 -D run=<unique> -D ... -f dev/bench/pgbench/<script> \"$DATABASE_URL\"`, \
         the scripts' values (-D) taken from one real delivery (body {} bytes stored as the payload, 32-byte digests, the handler's response); \
         `CHECKPOINT` before each run; for each client count (a), (b), (c) in turn. Event ids are unique: \
         `run x 10^12 + client_id x 10^9 + n`, `n` a per-client counter (pgbench keeps a client's variables across transactions).\n",
        body("limit_0000000000", 1000, now_secs()).len()
    );
    let _ = writeln!(md, "| script | clients | tps | latency avg ms | transactions | failed |\n|---|---:|---:|---:|---:|---:|");
    for (name, c, run) in &tput {
        let _ = writeln!(
            md,
            "| ({name}) | {c} | {:.0} | {:.2} | {} | {} |",
            run.tps, run.latency_avg_ms, run.processed, run.failed
        );
    }
    let _ = writeln!(
        md,
        "\n(a) `a-receiver.sql`: the receiver's statements for one new event in its shape (2 pipelines); \
         (b) `b-seeds.sql`: BEGIN; claim; order; UPDATE; COMMIT, 5 round trips; \
         (c) `c-one-statement.sql`: one statement, data-modifying CTEs, the row inserted completed.\n"
    );
    let _ = writeln!(md, "### Does (a) issue what the receiver issues?\n");
    let _ = writeln!(
        md,
        "The receiver (`shared::Receiver::receive` in-process, {events} new events, one connection) vs (a) (`pgbench -M extended -c 1 -t {events}`), \
         `pg_stat_statements` reset before each; statements compared by their text (comments and whitespace stripped; for DML every constant and `$n` replaced by `?`: pgbench numbers parameters in order of appearance, the receiver by position). \
         The check runs pgbench with `-M extended`: with `-M prepared`, `pg_stat_statements` (PostgreSQL 15) counts a prepared \
         utility statement (BEGIN, SET LOCAL, COMMIT) only on its first execution per connection, so the throughput runs use `prepared` and the counts use `extended`: \
         same statements, same pipelines. Result: **{}**.\n",
        if matches { "same statements, same counts, same round trips" } else { "MISMATCH" }
    );
    md.push_str(&comparison);
    let _ = writeln!(md, "\n### Database work per event\n");
    let _ = writeln!(
        md,
        "Method: autovacuum off on `webhook_event` and `orders` while measuring (reset after); before each batch `CHECKPOINT`, \
         `pg_stat_statements_reset()`, counters read; after it, 2.5 s for the backends to flush their stats, counters read again; per event = delta / events. \
         **statements** = sum of `pg_stat_statements.calls` (`track = all`, `track_utility = {track_utility}`: BEGIN, each SET LOCAL, COMMIT and ROLLBACK count as statements; \
         a multi-statement simple query counts each statement). \
         **round trips** = client turns through a TCP proxy in `bench-limit` (a client write after the server last wrote, per connection; a pipeline is one turn); \
         for pgbench, its connection's own turns (start-up, terminate) are taken out using a one-transaction run. \
         **WAL bytes** = `pg_stat_wal.wal_bytes` delta (full-page images after the CHECKPOINT included; their count is shown). \
         **heap tuples** = `n_tup_ins + n_tup_upd + n_tup_del` over all user tables. \
         **index entries** (an estimate: PostgreSQL 15 has no per-index insert counter) = per table `n_tup_ins x indexes + (n_tup_upd - n_tup_hot_upd) x indexes`, \
         every index counted, partial ones too (an upper bound: a partial index whose predicate the row fails gets no entry).\n"
    );
    let _ = writeln!(
        md,
        "| | statements | round trips | WAL bytes | heap tuples | index entries | WAL records | full-page images |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (label, w) in [
        ("receiver, new event", &receiver_new),
        ("receiver, duplicate of a completed event", &receiver_dup),
        ("(a) a-receiver.sql", &a_work),
        ("(b) b-seeds.sql", &b_work),
        ("(c) c-one-statement.sql", &c_work),
    ] {
        let _ = writeln!(
            md,
            "| {label} | {:.2} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2} | {:.3} |",
            w.statements,
            w.round_trips,
            w.wal_bytes,
            w.heap_tuples,
            w.index_tuples,
            w.wal_records,
            w.wal_fpi
        );
    }
    let _ = writeln!(
        md,
        "\nRatios: receiver WAL per new event / (c) = {:.2} (target <= 1.2); statements {:.2} vs (c) {:.2} (target 1); round trips {:.2} (target 1). \
         Duplicates answered 200: {dup_ok}/{events}; new events answered 200: {new_ok}/{events}.\n",
        receiver_new.wal_bytes / c_work.wal_bytes,
        receiver_new.statements,
        c_work.statements,
        receiver_new.round_trips
    );
    work_md("receiver, new event", &receiver_new, &mut md);
    work_md("receiver, duplicate", &receiver_dup, &mut md);
    for (name, w, _) in &script_work {
        work_md(&format!("({name})"), w, &mut md);
    }
    std::fs::write(format!("{out_dir}/limit.md"), md)?;
    eprintln!("wrote {out_dir}/limit.json and {out_dir}/limit.md");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// scale

/// The bulk load: rows `from..=to`, sources alternating `stripe`/`github`, Stripe-shaped
/// random keys (`evt_` + 24 hex), completed with a small response, no payload, claimed 100 ms
/// apart ending now (inside the default 30-day retention).
const LOAD: &str = "\
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload_identity, status, attempts,
     response_status, response_body, claimed_at, completed_at)
SELECT CASE WHEN i % 2 = 0 THEN 'stripe' ELSE 'github' END,
       'evt_' || substr(md5(i::text), 1, 24),
       'payment_intent.succeeded', d, d, 'completed', 1, 200,
       '{\"order_id\": \"ord_0000000000\", \"status\": \"recorded\"}'::jsonb, t, t
FROM generate_series($1::bigint, $2::bigint) AS i,
     LATERAL (SELECT sha256(i::text::bytea) AS d,
                     now() - ($2::bigint - i) * interval '100 ms' AS t) AS c";

async fn scale(
    url: &str,
    out_dir: &str,
    sizes: &[u64],
    claims: usize,
    concurrency: &[usize],
    sweep_md: &str,
) -> Result<()> {
    let t0 = Instant::now();
    migrate(url).await?;
    let admin = admin(url).await?;
    let machine = machine_md(&admin).await;
    let max_c = concurrency.iter().copied().max().unwrap_or(1);
    let bench = receiver(url, max_c)?;
    let now = now_secs();
    let existing: i64 = admin
        .query_one("SELECT count(*) FROM webhook_event", &[])
        .await?
        .get(0);
    let mut loaded = existing as u64;
    let mut results = serde_json::Map::new();
    let mut md_rows = String::new();
    for &size in sizes {
        let mut load_secs = 0.0;
        let mut index_secs = 0.0;
        if size > loaded {
            let (from, to) = (loaded as i64 + 1, size as i64);
            let bulk = size - loaded > 100_000;
            eprintln!(
                "loading rows {from}..={to} ({})",
                if bulk {
                    "indexes dropped and rebuilt"
                } else {
                    "indexes in place"
                }
            );
            let mut defs: Vec<(String, String)> = Vec::new();
            if bulk {
                defs = admin
                    .query(
                        "SELECT indexname::text, indexdef FROM pg_indexes \
                         WHERE schemaname = 'public' AND tablename = 'webhook_event'",
                        &[],
                    )
                    .await?
                    .iter()
                    .map(|r| (r.get(0), r.get(1)))
                    .collect();
                for (name, _) in &defs {
                    if name == "webhook_event_pkey" {
                        admin
                            .batch_execute(
                                "ALTER TABLE webhook_event DROP CONSTRAINT webhook_event_pkey",
                            )
                            .await?;
                    } else {
                        admin.batch_execute(&format!("DROP INDEX {name}")).await?;
                    }
                }
            }
            let start = Instant::now();
            admin
                .execute(LOAD, &[&from, &to])
                .await
                .context("bulk load")?;
            load_secs = start.elapsed().as_secs_f64();
            if bulk {
                let start = Instant::now();
                admin
                    .batch_execute("SET maintenance_work_mem = '256MB'")
                    .await?;
                for (name, def) in &defs {
                    admin
                        .batch_execute(def)
                        .await
                        .with_context(|| format!("recreating {name}"))?;
                    if name == "webhook_event_pkey" {
                        admin
                            .batch_execute("ALTER TABLE webhook_event ADD CONSTRAINT webhook_event_pkey PRIMARY KEY USING INDEX webhook_event_pkey")
                            .await?;
                    }
                }
                admin.batch_execute("RESET maintenance_work_mem").await?;
                index_secs = start.elapsed().as_secs_f64();
            }
            loaded = size;
        }
        let start = Instant::now();
        admin
            .batch_execute("VACUUM (ANALYZE) webhook_event")
            .await?;
        admin.batch_execute("CHECKPOINT").await?;
        let vacuum_secs = start.elapsed().as_secs_f64();
        // The load leaves gigabytes of dirty pages in the OS cache; their writeback competes
        // with the WAL flush of every commit. Wait (at most 90 s) until Dirty + Writeback in
        // /proc/meminfo is under 64 MB, so each size is measured without its load's tail.
        let start = Instant::now();
        let mut dirty = dirty_mb();
        while dirty > 64.0 && start.elapsed() < Duration::from_secs(90) {
            tokio::time::sleep(Duration::from_millis(500)).await;
            dirty = dirty_mb();
        }
        let settle_secs = start.elapsed().as_secs_f64();
        eprintln!("{size} rows: waited {settle_secs:.0} s for writeback (Dirty+Writeback now {dirty:.0} MB)");
        let sizes_row = admin
            .query_one(
                "SELECT count(*) FILTER (WHERE true), pg_table_size('webhook_event'), pg_indexes_size('webhook_event') FROM webhook_event",
                &[],
            )
            .await?;
        let (rows, table_bytes, index_bytes): (i64, i64, i64) =
            (sizes_row.get(0), sizes_row.get(1), sizes_row.get(2));
        let mut by_c = serde_json::Map::new();
        let mut first: Option<Value> = None;
        for &c in concurrency {
            let tag = format!("scale_{now}_{size}_{c}");
            // Warm-up: connections and prepared statements, and the pages the claims touch.
            deliver(
                bench.receiver.clone(),
                deliveries(&bench, &format!("{tag}_warm"), 50.max(c * 4), now),
                c,
                now,
            )
            .await?;
            let (mut times, ok) = deliver(
                bench.receiver.clone(),
                deliveries(&bench, &tag, claims, now),
                c,
                now,
            )
            .await?;
            times.sort_by(|a, b| a.total_cmp(b));
            let (p50, p99) = (percentile(&times, 50.0), percentile(&times, 99.0));
            eprintln!("{size} rows, concurrency {c}: p50 {p50:.2} ms, p99 {p99:.2} ms ({ok}/{claims} answered 200)");
            let entry = json!({"p50_ms": round3(p50), "p99_ms": round3(p99), "samples": times.len(), "ok": ok});
            let _ = writeln!(
                md_rows,
                "| {size} | {rows} | {c} | {} | {p50:.2} | {p99:.2} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} |",
                times.len(),
                table_bytes as f64 / 1048576.0,
                index_bytes as f64 / 1048576.0,
                load_secs,
                index_secs,
                vacuum_secs
            );
            first.get_or_insert_with(|| entry.clone());
            by_c.insert(c.to_string(), entry);
        }
        let mut entry = first.unwrap_or(json!({}));
        if let Value::Object(map) = &mut entry {
            map.insert(
                "concurrency".into(),
                json!(concurrency.first().copied().unwrap_or(1)),
            );
            map.insert("by_concurrency".into(), Value::Object(by_c));
            map.insert("rows".into(), json!(rows));
            map.insert("table_bytes".into(), json!(table_bytes));
            map.insert("index_bytes".into(), json!(index_bytes));
            map.insert("load_seconds".into(), json!(round3(load_secs)));
            map.insert("index_rebuild_seconds".into(), json!(round3(index_secs)));
            map.insert(
                "vacuum_analyze_checkpoint_seconds".into(),
                json!(round3(vacuum_secs)),
            );
        }
        results.insert(size.to_string(), entry);
    }
    let total = t0.elapsed().as_secs_f64();
    std::fs::write(
        format!("{out_dir}/scale.json"),
        serde_json::to_string_pretty(&Value::Object(results.clone()))? + "\n",
    )?;
    let p50 = |k: &str| {
        results
            .get(k)
            .and_then(|v| v.get("p50_ms"))
            .and_then(Value::as_f64)
    };
    let ratio = match (sizes.first(), sizes.last()) {
        (Some(lo), Some(hi)) => match (p50(&lo.to_string()), p50(&hi.to_string())) {
            (Some(a), Some(b)) => format!(
                "p50 at {hi} rows / p50 at {lo} rows = {:.2} (target <= 1.2: {})",
                b / a,
                if b / a <= 1.2 { "MET" } else { "MISSED" }
            ),
            _ => String::new(),
        },
        _ => String::new(),
    };
    let mut md = String::new();
    let _ = writeln!(md, "## Claim latency at scale\n");
    let _ = writeln!(
        md,
        "Produced by `HOOKLEDGER_PG_DURABLE=1 scripts/with-postgres.sh target/release/bench-limit scale --claims {claims} >/dev/null` in {total:.0} s. \
         The ledger (`webhook_event`) is grown in place to each size with one `INSERT ... SELECT generate_series` (rows: sources `stripe`/`github` alternating, \
         keys `evt_` + 24 hex, completed with a small response, no payload, claimed 100 ms apart up to now); for a load of more than 100000 rows the table's \
         indexes are dropped first and rebuilt after from their own definitions (the pkey as the same constraint), which is faster than maintaining them row by row \
         and leaves them packed (a ledger grown by claims has fuller and emptier pages). Then `VACUUM (ANALYZE)`, `CHECKPOINT`, a wait (at most 90 s) until the OS has written back the load's dirty pages (Dirty + Writeback under 64 MB), and at each concurrency a warm-up, then \
         {claims} new Stripe deliveries through `shared::Receiver::receive` in-process (claim + the order handler + completion + COMMIT, the whole inline receive), \
         each timed. The JSON's top-level p50/p99 are at concurrency {}.\n",
        concurrency.first().copied().unwrap_or(1)
    );
    md.push_str(&machine);
    let _ = writeln!(
        md,
        "\n| size | rows counted | concurrency | samples | p50 ms | p99 ms | table MB | indexes MB | load s | index rebuild s | vacuum+checkpoint s |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    md.push_str(&md_rows);
    let _ = writeln!(md, "\n{ratio}\n");
    let _ = writeln!(
        md,
        "### The sweeper and the auditor (quoted from `dev/bench/SWEEP.md`, not re-run)\n"
    );
    md.push_str(&sweep_quote(sweep_md));
    std::fs::write(format!("{out_dir}/scale.md"), md)?;
    eprintln!("wrote {out_dir}/scale.json and {out_dir}/scale.md");
    Ok(())
}

/// Dirty + Writeback from /proc/meminfo, MB (0 when unreadable).
fn dirty_mb() -> f64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("Dirty:") || l.starts_with("Writeback:"))
        .filter_map(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<f64>().ok())
        })
        .sum::<f64>()
        / 1024.0
}

/// The claim-during-sweep table, the deletion rates and the auditor table from SWEEP.md,
/// headings demoted.
fn sweep_quote(path: &str) -> String {
    let Ok(text) = std::fs::read_to_string(path) else {
        return format!("({path} not found)\n");
    };
    let mut out = String::new();
    let first_line = text.lines().nth(2).unwrap_or("");
    let _ = writeln!(
        out,
        "{}\n",
        first_line.split(". ").next().unwrap_or(first_line)
    );
    let mut keep = false;
    for line in text.lines() {
        if line.starts_with("## ") {
            keep = matches!(
                line,
                "## Results per phase" | "## Deletion rates" | "## Auditor query times"
            );
            if keep {
                let _ = writeln!(out, "#{line}");
            }
            continue;
        }
        if line.starts_with("<details>") {
            keep = false;
        }
        if keep {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}
