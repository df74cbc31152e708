//! `bench-http`: the HTTP figures of issue 12 (parts 1 and 3). Migrates `DATABASE_URL`, then
//! for each target, the receiver (`bench-serve`, a child process) and the peer (FastAPI +
//! asyncpg under uvicorn, 2 workers, `dev/bench/peers/fastapi`), runs the scenarios with a closed
//! loop of C keep-alive HTTP/1.1 connections (each sends its next delivery when the previous
//! answer has arrived) and records every latency:
//!
//! - unique: new `payment_intent.succeeded` events at each `--concurrency`;
//! - duplicates (at `--scenario-concurrency`): `--seed` events delivered first (not measured),
//!   then re-sent round-robin with the same id and body, re-signed with a fresh timestamp;
//! - mix: 90% new events, 10% re-sends of seeded (completed) ones.
//!
//! Each scenario runs `--warmup-secs` unmeasured, then `--duration-secs` measured; the
//! target's CPU (user and system apart, /proc/<pid>/stat of the server and, for the peer,
//! every process of its tree) is read before and after the measured run and divided by the
//! deliveries answered. Any answer other than 2xx is an error (the first few are printed).
//! Writes `dev/bench/results/http.json`, `http.md` and `machine.json`.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bench::{percentile, processes_cpu, stripe_payment_event, stripe_signature, unix_now};
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use shared::config::DatabaseSettings;
use tokio::io::{AsyncBufReadExt, BufReader};

#[derive(Parser, Debug, Clone)]
#[command(about = "HTTP figures: the receiver over HTTP and the FastAPI peer, same load")]
struct Args {
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// Measured seconds per scenario.
    #[arg(long, default_value_t = 10)]
    duration_secs: u64,
    /// Unmeasured seconds before each scenario.
    #[arg(long, default_value_t = 2)]
    warmup_secs: u64,
    /// Concurrencies of the unique scenario (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,8,32,64")]
    concurrency: Vec<usize>,
    /// Concurrency of the duplicates and mix scenarios.
    #[arg(long, default_value_t = 32)]
    scenario_concurrency: usize,
    /// Events delivered (unmeasured) before the duplicates scenario, re-sent round-robin.
    #[arg(long, default_value_t = 5000)]
    seed: usize,
    /// The receiver's pool size (bench-serve --pool-size) and the peer's per-worker pool
    /// maximum times its 2 workers.
    #[arg(long, default_value_t = 64)]
    pool_size: usize,
    /// The bench-serve binary (default: beside this one).
    #[arg(long)]
    serve_bin: Option<PathBuf>,
    /// The peer's directory (app.py).
    #[arg(long, default_value = "dev/bench/peers/fastapi")]
    peer_dir: PathBuf,
    /// The uvicorn executable (of the venv that has the peer's requirements).
    #[arg(long, default_value = ".venv-bench/bin/uvicorn")]
    uvicorn: PathBuf,
    /// Targets to run (comma-separated: receiver, peer).
    #[arg(long, value_delimiter = ',', default_value = "receiver,peer")]
    targets: Vec<String>,
    /// Where http.json, http.md and machine.json go.
    #[arg(long, default_value = "dev/bench/results")]
    out_dir: PathBuf,
}

/// The signing secret of this run (both targets verify with it).
const SECRET: &str = "whsec_bench_http_0123456789abcdef";

/// How the deliveries of one scenario are chosen.
#[derive(Clone)]
enum Mix {
    /// Every delivery a new event.
    Unique,
    /// Every delivery a re-send of one of these (round-robin).
    Duplicates(Arc<Vec<Vec<u8>>>),
    /// One delivery in ten a re-send of one of these, the rest new.
    Mixed(Arc<Vec<Vec<u8>>>),
}

/// One scenario's figures (`R` of the contract; `replayed` counts answers marked
/// `idempotent-replayed`, which only the receiver sets).
#[derive(Debug, Clone)]
struct Figures {
    concurrency: usize,
    requests: usize,
    errors: usize,
    replayed: usize,
    elapsed_s: f64,
    latencies_ms: Vec<f64>,
    cpu: bench::CpuTimes,
    /// The load generator's own CPU over the measured run (it shares the machine).
    generator_cpu: bench::CpuTimes,
}

impl Figures {
    fn to_json(&self) -> Value {
        let mut sorted = self.latencies_ms.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let n = self.requests.max(1) as f64;
        let round = |x: f64, d: i32| (x * 10f64.powi(d)).round() / 10f64.powi(d);
        json!({
            "concurrency": self.concurrency,
            "requests": self.requests,
            "errors": self.errors,
            "replayed": self.replayed,
            "rps": round(self.requests as f64 / self.elapsed_s.max(1e-9), 1),
            "p50_ms": round(percentile(&sorted, 0.50), 3),
            "p99_ms": round(percentile(&sorted, 0.99), 3),
            "p999_ms": round(percentile(&sorted, 0.999), 3),
            "cpu_user_us": round(self.cpu.user_s * 1e6 / n, 1),
            "cpu_sys_us": round(self.cpu.sys_s * 1e6 / n, 1),
            "generator_cpu_us": round(
                (self.generator_cpu.user_s + self.generator_cpu.sys_s) * 1e6 / n,
                1
            ),
        })
    }
}

/// Where deliveries go and whose CPU counts.
struct Target {
    name: &'static str,
    addr: std::net::SocketAddr,
    path: &'static str,
    child: tokio::process::Child,
    root_pid: u32,
}

impl Target {
    fn pids(&self) -> Vec<u32> {
        bench::process_tree(self.root_pid)
    }

    async fn stop(mut self) {
        // SIGTERM, so uvicorn's master stops its workers; then make sure.
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.root_pid as libc::pid_t, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// Unique event ids of this run.
struct Ids {
    run: String,
    next: AtomicU64,
}

impl Ids {
    fn fresh(&self, target: &str) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("evt_{target}_{}_{n}", self.run)
    }
}

static PRINTED_ERRORS: AtomicUsize = AtomicUsize::new(0);

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let database = DatabaseSettings::with_url(args.database_url.clone());
    shared::db::migrate_with(&database, &handlers::examples::migrations())
        .await
        .context("migrating")?;
    let (client, connection) = tokio_postgres::connect(&args.database_url, tokio_postgres::NoTls)
        .await
        .context("connecting")?;
    tokio::spawn(connection);
    // Before any server connects: sessions read the database's settings when they start.
    client
        .batch_execute(bench::DEPLOYED_LIMITS)
        .await
        .context("setting the receiver's limits on the database")?;
    let postgres = bench::postgres_facts(&client).await?;
    eprintln!("bench-http: PostgreSQL {postgres}");

    let ids = Arc::new(Ids {
        run: unix_now().to_string(),
        next: AtomicU64::new(0),
    });
    let mut results = serde_json::Map::new();
    for target in &args.targets {
        // Each target starts from an empty ledger and order table.
        client
            .batch_execute("TRUNCATE webhook_event, orders; CHECKPOINT")
            .await
            .context("truncating between targets")?;
        let server = match target.as_str() {
            "receiver" => start_receiver(&args).await?,
            "peer" => start_peer(&args).await?,
            other => bail!("unknown target {other} (receiver, peer)"),
        };
        let figures = run_target(&args, &server, &ids).await;
        server.stop().await;
        results.insert(target.clone(), figures?);
    }

    let results = Value::Object(results);
    let machine = json!({"machine": bench::machine_facts(), "postgres": postgres});
    std::fs::create_dir_all(&args.out_dir)?;
    std::fs::write(
        args.out_dir.join("http.json"),
        serde_json::to_string_pretty(&results)? + "\n",
    )?;
    std::fs::write(
        args.out_dir.join("machine.json"),
        serde_json::to_string_pretty(&machine)? + "\n",
    )?;
    std::fs::write(
        args.out_dir.join("http.md"),
        markdown(&args, &results, &machine),
    )?;
    eprintln!(
        "bench-http: wrote {}",
        args.out_dir.join("http.{json,md}").display()
    );
    Ok(())
}

async fn run_target(args: &Args, server: &Target, ids: &Arc<Ids>) -> Result<Value> {
    let name = server.name;
    let mut unique = serde_json::Map::new();
    for &c in &args.concurrency {
        let figures = scenario(args, server, ids, c, Mix::Unique).await?;
        report_line(name, &format!("unique c={c}"), &figures);
        unique.insert(c.to_string(), figures.to_json());
    }
    // Seed events for the duplicates and the mix (delivered and completed; not measured).
    let c = args.scenario_concurrency;
    let seeded: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..args.seed)
            .map(|i| stripe_payment_event(&ids.fresh(name), unix_now(), 1000 + i as i64))
            .collect(),
    );
    seed(server, &seeded, c).await?;
    let duplicates = scenario(args, server, ids, c, Mix::Duplicates(seeded.clone())).await?;
    report_line(name, &format!("duplicates c={c}"), &duplicates);
    let mix = scenario(args, server, ids, c, Mix::Mixed(seeded)).await?;
    report_line(name, &format!("mix 90/10 c={c}"), &mix);
    Ok(json!({
        "unique": unique,
        "duplicates": duplicates.to_json(),
        "mix": mix.to_json(),
    }))
}

fn report_line(target: &str, scenario: &str, figures: &Figures) {
    let j = figures.to_json();
    eprintln!(
        "bench-http: {target} {scenario}: {} requests, {} errors, {} rps, p50 {} ms, p99 {} ms, \
         p999 {} ms, CPU {} us user + {} us sys per delivery",
        j["requests"],
        j["errors"],
        j["rps"],
        j["p50_ms"],
        j["p99_ms"],
        j["p999_ms"],
        j["cpu_user_us"],
        j["cpu_sys_us"]
    );
}

/// Warm-up, then the measured run with the target's CPU read around it.
async fn scenario(
    args: &Args,
    server: &Target,
    ids: &Arc<Ids>,
    concurrency: usize,
    mix: Mix,
) -> Result<Figures> {
    let warmup = Duration::from_secs(args.warmup_secs);
    if !warmup.is_zero() {
        closed_loop(server, ids, concurrency, mix.clone(), warmup).await?;
    }
    let pids = server.pids();
    let before = processes_cpu(&pids);
    let own_before = bench::process_cpu(std::process::id()).unwrap_or_default();
    let mut figures = closed_loop(
        server,
        ids,
        concurrency,
        mix,
        Duration::from_secs(args.duration_secs),
    )
    .await?;
    figures.cpu = processes_cpu(&pids).since(before);
    figures.generator_cpu = bench::process_cpu(std::process::id())
        .unwrap_or_default()
        .since(own_before);
    Ok(figures)
}

/// `concurrency` connections, each sending its next delivery when the previous answer has
/// arrived, until `duration` has passed.
async fn closed_loop(
    server: &Target,
    ids: &Arc<Ids>,
    concurrency: usize,
    mix: Mix,
    duration: Duration,
) -> Result<Figures> {
    let start = Instant::now();
    let deadline = start + duration;
    let counter = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (addr, path, name) = (server.addr, server.path, server.name);
        let (ids, mix, counter) = (ids.clone(), mix.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(addr).await?;
            let mut latencies = Vec::with_capacity(4096);
            let (mut errors, mut replayed) = (0usize, 0usize);
            while Instant::now() < deadline {
                let i = counter.fetch_add(1, Ordering::Relaxed) as usize;
                let now = unix_now();
                let body: Vec<u8> = match &mix {
                    Mix::Unique => stripe_payment_event(&ids.fresh(name), now, 1000),
                    Mix::Duplicates(seeded) => seeded[i % seeded.len()].clone(),
                    Mix::Mixed(seeded) if i % 10 == 9 => seeded[(i / 10) % seeded.len()].clone(),
                    Mix::Mixed(_) => stripe_payment_event(&ids.fresh(name), now, 1000),
                };
                let signature = stripe_signature(SECRET, now, &body);
                let request = hyper::Request::post(path)
                    .header(hyper::header::HOST, "127.0.0.1")
                    .header(hyper::header::CONTENT_TYPE, "application/json")
                    .header("stripe-signature", signature)
                    .header(
                        "user-agent",
                        "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
                    )
                    .body(Full::new(Bytes::from(body)))?;
                let sent = Instant::now();
                let response = sender.send_request(request).await?;
                let status = response.status();
                let was_replayed = response.headers().contains_key("idempotent-replayed");
                let answer = response.into_body().collect().await?.to_bytes();
                latencies.push(sent.elapsed().as_secs_f64() * 1e3);
                if was_replayed {
                    replayed += 1;
                }
                if !status.is_success() {
                    errors += 1;
                    if PRINTED_ERRORS.fetch_add(1, Ordering::Relaxed) < 5 {
                        eprintln!(
                            "bench-http: {name}: answered {status}: {}",
                            String::from_utf8_lossy(&answer)
                        );
                    }
                }
            }
            anyhow::Ok((latencies, errors, replayed))
        }));
    }
    let mut figures = Figures {
        concurrency,
        requests: 0,
        errors: 0,
        replayed: 0,
        elapsed_s: 0.0,
        latencies_ms: Vec::new(),
        cpu: Default::default(),
        generator_cpu: Default::default(),
    };
    for task in tasks {
        let (latencies, errors, replayed) = task.await??;
        figures.requests += latencies.len();
        figures.errors += errors;
        figures.replayed += replayed;
        figures.latencies_ms.extend(latencies);
    }
    figures.elapsed_s = start.elapsed().as_secs_f64();
    Ok(figures)
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(addr: std::net::SocketAddr) -> Result<Sender> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// Delivers every `seeded` event once (at `concurrency`), expecting 2xx for each.
async fn seed(server: &Target, seeded: &Arc<Vec<Vec<u8>>>, concurrency: usize) -> Result<()> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (addr, path) = (server.addr, server.path);
        let (seeded, next) = (seeded.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(addr).await?;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = seeded.get(i) else {
                    return anyhow::Ok(());
                };
                let status = post(&mut sender, path, body.clone()).await?;
                if !(200..300).contains(&status) {
                    bail!("seeding: answered {status}");
                }
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

async fn post(sender: &mut Sender, path: &str, body: Vec<u8>) -> Result<u16> {
    let signature = stripe_signature(SECRET, unix_now(), &body);
    let request = hyper::Request::post(path)
        .header(hyper::header::HOST, "127.0.0.1")
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header("stripe-signature", signature)
        .body(Full::new(Bytes::from(body)))?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    response.into_body().collect().await?;
    Ok(status)
}

/// Waits until `addr` answers a signed delivery with 2xx (the server is up and connected).
async fn wait_ready(addr: std::net::SocketAddr, path: &str, ids: &Ids) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(mut sender) = connect(addr).await {
            let body = stripe_payment_event(&ids.fresh("ready"), unix_now(), 1);
            match post(&mut sender, path, body).await {
                Ok(status) if (200..300).contains(&status) => return Ok(()),
                Ok(status) => bail!("{addr} answered {status} to a signed delivery"),
                Err(_) => {}
            }
        }
        if Instant::now() > deadline {
            bail!("{addr} did not answer within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn start_receiver(args: &Args) -> Result<Target> {
    let serve = match &args.serve_bin {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("bench-serve"),
    };
    let sources = format!(
        r#"[{{"name": "stripe", "scheme": "stripe", "secrets": ["{SECRET}"], "mode": "inline"}}]"#
    );
    let mut child = tokio::process::Command::new(&serve)
        .args(["--listen", "127.0.0.1:0", "--pool-size"])
        .arg(args.pool_size.to_string())
        .env("DATABASE_URL", &args.database_url)
        .env("HOOKLEDGER_SOURCES", sources)
        // As template.yaml deploys it: the limits live on the database side (DEPLOYED_LIMITS).
        .env("HOOKLEDGER_DB_TRANSACTION_LIMITS", "false")
        .env_remove("HOOKLEDGER_SOURCES_FILE")
        .env_remove("HOOKLEDGER_SOURCES_SECRET_ARN")
        .env_remove("HOOKLEDGER_DB_SECRET_ARN")
        .env_remove("HOOKLEDGER_WORKER_FUNCTION")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", serve.display()))?;
    let root_pid = child.id().context("bench-serve's pid")?;
    let stderr = child.stderr.take().context("bench-serve's stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let Some(line) = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .context("bench-serve did not start within 60 s")??
        else {
            bail!("bench-serve exited before listening");
        };
        eprintln!("{line}");
        if let Some(addr) = line.strip_prefix("bench-serve listening on ") {
            break addr.trim().parse()?;
        }
    };
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("bench-serve: {line}");
        }
    });
    let target = Target {
        name: "receiver",
        addr,
        path: "/webhooks/stripe",
        child,
        root_pid,
    };
    wait_ready(
        addr,
        target.path,
        &Ids {
            run: "r".into(),
            next: AtomicU64::new(0),
        },
    )
    .await?;
    Ok(target)
}

async fn start_peer(args: &Args) -> Result<Target> {
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0")?;
        probe.local_addr()?.port()
    };
    let uvicorn = std::fs::canonicalize(&args.uvicorn).with_context(|| {
        format!(
            "{} (make bench creates .venv-bench)",
            args.uvicorn.display()
        )
    })?;
    let child = tokio::process::Command::new(&uvicorn)
        .args(["app:app", "--workers", "2", "--host", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .args(["--log-level", "warning"])
        .current_dir(&args.peer_dir)
        .env("DATABASE_URL", &args.database_url)
        .env("STRIPE_WEBHOOK_SECRET", SECRET)
        .env("PEER_SOURCE", "peer-stripe")
        .env("PEER_POOL_SIZE", (args.pool_size / 2).max(1).to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", uvicorn.display()))?;
    let root_pid = child.id().context("uvicorn's pid")?;
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let target = Target {
        name: "peer",
        addr,
        path: "/webhooks/stripe",
        child,
        root_pid,
    };
    let ids = Ids {
        run: "p".into(),
        next: AtomicU64::new(0),
    };
    wait_ready(addr, target.path, &ids).await?;
    // Both workers: a few more deliveries on fresh connections reach the other worker too.
    for _ in 0..20 {
        wait_ready(addr, target.path, &ids).await?;
    }
    let processes = target.pids().len();
    eprintln!("bench-http: peer up at {addr} ({processes} processes in its tree)");
    Ok(target)
}

fn markdown(args: &Args, results: &Value, machine: &Value) -> String {
    let mut md = String::new();
    let command = format!(
        "make bench PARTS=http, which runs HOOKLEDGER_PG_DURABLE=1 scripts/with-postgres.sh \
         <target>/release/bench-http --duration-secs {} --warmup-secs {} --concurrency {} --scenario-concurrency {} \
         --seed {} --pool-size {}",
        args.duration_secs,
        args.warmup_secs,
        args.concurrency
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
        args.scenario_concurrency,
        args.seed,
        args.pool_size
    );
    md.push_str("## HTTP: the receiver and the peer under the same load\n\n");
    md.push_str(&format!(
        "Command (all figures of this section): `{command}`\n\n"
    ));
    md.push_str(&format!(
        "Load: a closed loop of C keep-alive HTTP/1.1 connections from `bench-http` (a \
         separate process on the same machine), each sending its next signed Stripe \
         `payment_intent.succeeded` delivery when the previous answer arrives; {} s warm-up, \
         then {} s measured per scenario. Duplicates: {} events delivered first (unmeasured), \
         then re-sent round-robin, same id and body, fresh signature. Mix: 1 in 10 a re-send \
         of a seeded event. Latency: request sent to answer read, at the client. CPU: the \
         server's /proc/<pid>/stat utime and stime (clock ticks, {} per second) before and \
         after the measured run, over deliveries answered; the peer's is its whole process \
         tree (uvicorn master + 2 workers). Receiver: `bench-serve` serves \
         `receiver::handler::function_handler` (unchanged) with hyper 1 on a multi-thread \
         tokio runtime, pool of {} connections, one JSON log line per delivery to /dev/null. \
         Peer: `dev/bench/peers/fastapi/app.py` under `uvicorn --workers 2`, asyncpg pool of {} \
         per worker. Ledger and orders truncated before each target. PostgreSQL {}.\n\n",
        args.warmup_secs,
        args.duration_secs,
        args.seed,
        bench::clock_ticks_per_second(),
        args.pool_size,
        (args.pool_size / 2).max(1),
        machine["postgres"]
            .as_object()
            .map(|o| o
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("?")))
                .collect::<Vec<_>>()
                .join(", "))
            .unwrap_or_default()
    ));
    md.push_str(
        "| target | scenario | C | requests | errors | req/s | p50 ms | p99 ms | p99.9 ms | CPU user µs | CPU sys µs | CPU total µs | generator CPU µs |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for target in ["receiver", "peer"] {
        let Some(t) = results.get(target) else {
            continue;
        };
        let mut rows: Vec<(String, &Value)> = Vec::new();
        if let Some(unique) = t["unique"].as_object() {
            let mut keys: Vec<&String> = unique.keys().collect();
            keys.sort_by_key(|k| k.parse::<usize>().unwrap_or(0));
            for k in keys {
                rows.push(("unique".into(), &unique[k]));
            }
        }
        rows.push(("duplicates".into(), &t["duplicates"]));
        rows.push(("mix 90/10".into(), &t["mix"]));
        for (scenario, r) in rows {
            let total =
                r["cpu_user_us"].as_f64().unwrap_or(0.0) + r["cpu_sys_us"].as_f64().unwrap_or(0.0);
            md.push_str(&format!(
                "| {target} | {scenario} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} |\n",
                r["concurrency"],
                r["requests"],
                r["errors"],
                r["rps"],
                r["p50_ms"],
                r["p99_ms"],
                r["p999_ms"],
                r["cpu_user_us"],
                r["cpu_sys_us"],
                total,
                r["generator_cpu_us"]
            ));
        }
    }
    if let (Some(r), Some(p)) = (results.get("receiver"), results.get("peer")) {
        md.push_str("\nReceiver / peer, same run:\n\n| scenario | C | throughput | p99 | CPU per delivery |\n|---|---:|---:|---:|---:|\n");
        let ratio = |a: &Value, b: &Value, key: &str| -> String {
            match (a[key].as_f64(), b[key].as_f64()) {
                (Some(x), Some(y)) if y > 0.0 => format!("{:.2}x", x / y),
                _ => "n/a".into(),
            }
        };
        let cpu = |v: &Value| {
            v["cpu_user_us"].as_f64().unwrap_or(0.0) + v["cpu_sys_us"].as_f64().unwrap_or(0.0)
        };
        let mut pairs: Vec<(String, Value, Value)> = Vec::new();
        if let Some(unique) = r["unique"].as_object() {
            let mut keys: Vec<&String> = unique.keys().collect();
            keys.sort_by_key(|k| k.parse::<usize>().unwrap_or(0));
            for k in keys {
                pairs.push(("unique".into(), unique[k].clone(), p["unique"][k].clone()));
            }
        }
        pairs.push((
            "duplicates".into(),
            r["duplicates"].clone(),
            p["duplicates"].clone(),
        ));
        pairs.push(("mix 90/10".into(), r["mix"].clone(), p["mix"].clone()));
        for (scenario, a, b) in pairs {
            let cpu_ratio = if cpu(&b) > 0.0 {
                format!("{:.2}x", cpu(&a) / cpu(&b))
            } else {
                "n/a".into()
            };
            md.push_str(&format!(
                "| {scenario} | {} | {} | {} | {} |\n",
                a["concurrency"],
                ratio(&a, &b, "rps"),
                ratio(&a, &b, "p99_ms"),
                cpu_ratio
            ));
        }
    }
    md.push_str(
        "\nCPU columns are per delivery answered. All processes (load generator, server, \
         PostgreSQL) share the machine's cores, so these are ratios within one run, not \
         capacities; the generator's own CPU per delivery is shown because it competes for \
         the same cores.\n",
    );
    md
}
