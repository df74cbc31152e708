//! `bench-cold` (issue 12, part 4; issue 29): cold start and footprint of the release
//! `receiver` binary and of `bench-hello` (the smallest lambda_http function, the floor), each
//! run as Lambda runs it: a process whose only contact is a Lambda Runtime API
//! (`AWS_LAMBDA_RUNTIME_API`), served in-process on 127.0.0.1 by the dev-only `lambda_sim`
//! crate (shared with `make chaos`); and of `bench-hello-pg` (`hello-pg`), the floor of a
//! function that answers after a PostgreSQL round trip (its first invocation opens one
//! connection to `DATABASE_URL`, and every invocation runs `SELECT 1`). With a CA file (`--ca-file`, `HOOKLEDGER_TEST_CA_FILE` from
//! scripts/with-postgres.sh) the receiver and hello-pg both connect over TLS, verified against
//! that CA (`sslmode=require`, the host by a name on the server's certificate); without one,
//! with `DATABASE_URL` as given.
//!
//! For each binary, `--runs` times: spawn it with the usual Lambda environment and measure,
//! from just before the spawn (fork + exec), to (i) its first `GET .../invocation/next` and
//! (ii) its first posted response; then one warm invocation. The receiver's event is a properly
//! signed Stripe `payment_intent.succeeded` delivery to `/webhooks/stripe` (API Gateway HTTP API
//! v2), so its first response is a real claim against `DATABASE_URL`; hello's and hello-pg's
//! are a plain GET.
//! Then `--invocations` on one process (the receiver: unique events with every tenth a
//! duplicate of an earlier one), and its `VmRSS` from /proc (its `smaps`, mapping by mapping,
//! goes to `<logs>/<name>.smaps`). Finally the binaries zipped as
//! `bootstrap` (deflate, level 9, as cargo-lambda does; python3's zipfile).
//!
//! Writes `<out>/cold.json` (`{"receiver": C, "hello": C, "hello-pg": C, ...}`) and
//! `<out>/cold.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use bench::round3;
use bytes::Bytes;
use clap::Parser;
use lambda_sim::{Answer, HttpApiEvent, RuntimeApi};
use serde_json::{json, Value};
use shared::config::DatabaseSettings;

#[derive(Parser, Debug)]
#[command(about = "cold start and footprint of the receiver and a lambda_http hello-world")]
struct Args {
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// The receiver binary (default: `receiver` beside this binary).
    #[arg(long)]
    receiver: Option<PathBuf>,
    /// The hello-world binary (default: `bench-hello` beside this binary).
    #[arg(long)]
    hello: Option<PathBuf>,
    /// The hello-world with one PostgreSQL connect (default: `bench-hello-pg` beside this binary).
    #[arg(long)]
    hello_pg: Option<PathBuf>,
    /// Cold starts per binary (the median is reported).
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Invocations on one process before RSS is read.
    #[arg(long, default_value_t = 10_000)]
    invocations: usize,
    /// Extra environment for the receiver, `NAME=VALUE` (repeatable), e.g. RUST_LOG=warn.
    #[arg(long = "env")]
    extra_env: Vec<String>,
    /// The CA of the database server's certificate. With it, the receiver and hello-pg connect
    /// over TLS verified against it (`DATABASE_URL` with `sslmode=require` and the host by a
    /// name on the throwaway cluster's certificate); without it, with `DATABASE_URL` as given.
    #[arg(long, env = "HOOKLEDGER_TEST_CA_FILE")]
    ca_file: Option<PathBuf>,
    /// Only measure these targets (`receiver`, `hello`, `hello-pg`; default all).
    #[arg(long)]
    only: Vec<String>,
    /// A cold.json from before a change, shown in cold.md as "before this change".
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Where cold.json and cold.md go.
    #[arg(long, default_value = "dev/bench/results")]
    out: PathBuf,
    /// Where the functions' stdout/stderr go.
    #[arg(long, default_value = "/tmp/bench-cold-logs")]
    logs: PathBuf,
}

/// One inline Stripe source; the secret only signs and verifies this run's deliveries.
const SOURCES_JSON: &str = r#"[{"name":"stripe","scheme":"stripe","secrets":["whsec_bench_cold_placeholder"],"mode":"inline"}]"#;

/// Each invocation's deadline (`Lambda-Runtime-Deadline-Ms`), and how long the harness waits
/// for a word from the function (its first `GET .../next`, an answer).
const WAIT: Duration = Duration::from_secs(30);

/// The `statusCode` of `answer`'s response (0 when it has none).
///
/// # Errors
/// The function posted an invocation error.
fn status(answer: &Answer) -> Result<u16> {
    Ok(lambda_sim::status_code(answer.response()?).unwrap_or(0))
}

/// What one binary gets to run with and answer.
struct Target {
    name: &'static str,
    binary: PathBuf,
    env: Vec<(String, String)>,
    events: Box<dyn Fn(usize) -> Bytes>,
    /// The status a correct answer carries.
    ok: u16,
}

/// The function name `target` runs as: `bench-cold-<name>`.
fn function(target: &Target) -> String {
    format!("bench-cold-{}", target.name)
}

/// Starts `target` against `api` (its output appended to `log`): the instant just before the
/// spawn (fork + exec), and the child.
fn spawn(
    target: &Target,
    api: &RuntimeApi,
    log: &Path,
) -> Result<(Instant, tokio::process::Child)> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    let err = out.try_clone()?;
    let mut command = api.command(&target.binary);
    command
        .envs(target.env.iter().cloned())
        .stdout(out)
        .stderr(err);
    let start = Instant::now();
    let child = command
        .spawn()
        .with_context(|| format!("starting {}", target.binary.display()))?;
    Ok((start, child))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A field of `/proc/{pid}/status` given in kB (`VmRSS:`, `RssAnon:`...), MiB; NaN when absent.
fn status_mib(pid: u32, name: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// VmRSS and VmHWM of `pid`, MiB.
fn rss_mib(pid: u32) -> (f64, f64) {
    (status_mib(pid, "VmRSS:"), status_mib(pid, "VmHWM:"))
}

#[derive(Debug, Default)]
struct Stats {
    median: f64,
    min: f64,
    max: f64,
}

fn stats(values: &[f64]) -> Stats {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Stats::default();
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let mid = v.len() / 2;
    let median = if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    };
    Stats {
        median,
        min: v[0],
        max: v[v.len() - 1],
    }
}

fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

fn stats_json(s: &Stats) -> Value {
    json!({"median": round3(s.median), "min": round3(s.min), "max": round3(s.max)})
}

/// The measured figures for one binary.
struct Measured {
    to_next: Stats,
    to_first_response: Stats,
    first_invocation: Stats,
    warm_invocation: Stats,
    rss_after_init: Stats,
    rss_after: f64,
    hwm_after: f64,
    anon_after: f64,
    file_after: f64,
    invocations: usize,
    errors: usize,
    invocation_p50: f64,
    invocation_p99: f64,
    cpu_user_ms: f64,
    cpu_sys_ms: f64,
}

/// utime and stime of `pid` from /proc/<pid>/stat, milliseconds.
fn cpu_ms(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // USER_HZ is 100 on every Linux this runs on: one tick is 10 ms.
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .map(|t| t * 10.0)
            .unwrap_or(f64::NAN)
    };
    (tick(11), tick(12))
}

async fn measure(
    target: &Target,
    runs: usize,
    invocations: usize,
    logs: &Path,
) -> Result<Measured> {
    let log = logs.join(format!("{}.log", target.name));
    let _ = std::fs::remove_file(&log);
    let mut to_next = Vec::new();
    let mut to_first = Vec::new();
    let mut first_inv = Vec::new();
    let mut warm_inv = Vec::new();
    let mut rss_init = Vec::new();
    let mut seq = 0usize;
    for run in 0..runs {
        let api = RuntimeApi::start(&function(target)).await?;
        let (start, mut child) = spawn(target, &api, &log)?;
        let pid = child.id().unwrap_or(0);
        let run_of = || format!("{} run {run}", target.name);
        // The first event waits in the queue: /next answers the moment it arrives.
        let first = api.queue((target.events)(seq), WAIT);
        seq += 1;
        let next = api.first_next(WAIT).await.with_context(run_of)?;
        let answer = api.wait(first, WAIT).await.with_context(run_of)?;
        answer.response().with_context(run_of)?;
        to_next.push(ms(next - start));
        to_first.push(ms(answer.answered_at - start));
        first_inv.push(ms(answer.answered_at - next));
        rss_init.push(rss_mib(pid).0);
        let warm = api
            .invoke((target.events)(seq), WAIT)
            .await
            .with_context(run_of)?;
        seq += 1;
        let status = status(&warm).with_context(run_of)?;
        if status != target.ok {
            bail!(
                "{} run {run}: warm invocation answered {status}",
                target.name
            );
        }
        warm_inv.push(ms(warm.answered_at - warm.served_at));
        child.kill().await?;
    }
    // Footprint: many invocations on one process.
    let api = RuntimeApi::start(&function(target)).await?;
    let (_, mut child) = spawn(target, &api, &log)?;
    let pid = child.id().unwrap_or(0);
    let mut errors = 0;
    let mut latencies = Vec::with_capacity(invocations);
    let first_seq = seq;
    for i in 0..invocations {
        // Every tenth delivery repeats one sent five before (a provider's retry).
        let event = if i % 10 == 9 {
            (target.events)(first_seq + i - 5)
        } else {
            (target.events)(first_seq + i)
        };
        let answer = api.invoke(event, WAIT).await?;
        if status(&answer)? != target.ok {
            errors += 1;
        }
        if i > 0 {
            latencies.push(ms(answer.answered_at - answer.served_at));
        }
    }
    let (rss_after, hwm_after) = rss_mib(pid);
    // What the resident set is: the heap and stacks, or pages of the binary (and libraries).
    let (anon_after, file_after) = (status_mib(pid, "RssAnon:"), status_mib(pid, "RssFile:"));
    // Which mappings make up that resident set (the binary's segments, libc, the heap), for
    // whoever works on it next: `<logs>/<name>.smaps`.
    if let Ok(smaps) = std::fs::read(format!("/proc/{pid}/smaps")) {
        std::fs::write(logs.join(format!("{}.smaps", target.name)), smaps)?;
    }
    let (user, sys) = cpu_ms(pid);
    child.kill().await?;
    Ok(Measured {
        to_next: stats(&to_next),
        to_first_response: stats(&to_first),
        first_invocation: stats(&first_inv),
        warm_invocation: stats(&warm_inv),
        rss_after_init: stats(&rss_init),
        rss_after,
        hwm_after,
        anon_after,
        file_after,
        invocations,
        errors,
        invocation_p50: percentile(&latencies, 50.0),
        invocation_p99: percentile(&latencies, 99.0),
        cpu_user_ms: user,
        cpu_sys_ms: sys,
    })
}

/// The binary zipped as `bootstrap` (deflate, level 9): bytes.
fn zip_size(binary: &Path, dir: &Path) -> Result<u64> {
    let zip = dir.join(format!(
        "{}.bootstrap.zip",
        binary.file_name().and_then(|n| n.to_str()).unwrap_or("bin")
    ));
    let script = "import sys, zipfile\n\
        info = zipfile.ZipInfo('bootstrap', date_time=(1980, 1, 1, 0, 0, 0))\n\
        info.external_attr = 0o100755 << 16\n\
        info.compress_type = zipfile.ZIP_DEFLATED\n\
        with zipfile.ZipFile(sys.argv[2], 'w') as z, open(sys.argv[1], 'rb') as f:\n\
        \x20   z.writestr(info, f.read(), compresslevel=9)\n";
    let status = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(binary)
        .arg(&zip)
        .status()
        .context("running python3 to zip")?;
    if !status.success() {
        bail!("zipping {} failed", binary.display());
    }
    Ok(std::fs::metadata(&zip)?.len())
}

/// A `make package` zip of `function`, if one exists: (path, bytes).
fn package_zip(function: &str) -> Option<(PathBuf, u64)> {
    let mut dirs = Vec::new();
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        dirs.push(PathBuf::from(dir));
    }
    dirs.push(PathBuf::from("target"));
    dirs.into_iter().find_map(|dir| {
        let path = dir.join("lambda").join(function).join("bootstrap.zip");
        std::fs::metadata(&path).ok().map(|m| (path, m.len()))
    })
}

fn stripe_events() -> Result<Box<dyn Fn(usize) -> Bytes>> {
    let sources = shared::Sources::from_json(SOURCES_JSON)?;
    let stripe = sources
        .get("stripe")
        .cloned()
        .context("the bench's stripe source")?;
    let run = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    // Fixed per run: a repeated delivery must carry the same body (only its signature is new).
    let created = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    Ok(Box::new(move |i: usize| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let body = json!({
            "id": format!("evt_cold_{run}_{i}"), "object": "event", "created": created,
            "type": "payment_intent.succeeded",
            "data": {"object": {"id": format!("pi_cold_{run}_{i}"), "amount": 1000 + i,
                "amount_received": 1000 + i, "currency": "usd",
                "metadata": {"order_id": format!("ord_cold_{run}_{i}")}}}
        })
        .to_string();
        let mut event = HttpApiEvent::webhook("bench", "stripe")
            .header("content-type", "application/json")
            .header("host", "bench.execute-api.us-east-1.amazonaws.com")
            .header(
                "user-agent",
                "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
            );
        for (name, value) in stripe.verifier.sign(0, "", now, body.as_bytes()) {
            event = event.header(&name, value);
        }
        event.body(body).to_bytes()
    }))
}

fn hello_events() -> Box<dyn Fn(usize) -> Bytes> {
    Box::new(|_| {
        HttpApiEvent::new("bench", "GET", "/")
            .header("host", "bench.execute-api.us-east-1.amazonaws.com")
            .header("user-agent", "bench")
            .to_bytes()
    })
}

/// The names on the throwaway cluster's server certificate (scripts/postgres.sh).
const CERTIFICATE_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// `url` over TLS to the throwaway cluster: `sslmode=require` (in place of the URL's
/// `sslmode`, or added) and the host `localhost`, a name on the server's certificate, as the
/// tests connect (a deployed function, too, connects by a name it resolves).
///
/// # Errors
/// The URL is not `postgres://...` or its host is not one the certificate names.
fn tls_url(url: &str) -> Result<String> {
    let (scheme, rest) = url
        .split_once("://")
        .context("DATABASE_URL: expected postgres://...")?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (user, host_port) = match authority.rsplit_once('@') {
        Some((user, host_port)) => (format!("{user}@"), host_port),
        None => (String::new(), authority),
    };
    let (host, port) = host_port.split_at(host_port.find(':').unwrap_or(host_port.len()));
    anyhow::ensure!(
        CERTIFICATE_NAMES.contains(&host),
        "DATABASE_URL's host {host:?} is not on the --ca-file cluster's certificate \
         ({CERTIFICATE_NAMES:?})"
    );
    let mut params: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("sslmode="))
        .collect();
    params.push("sslmode=require");
    Ok(format!(
        "{scheme}://{user}localhost{port}{path}?{}",
        params.join("&")
    ))
}

/// Median time of a direct connection to the database through `shared::db::connect` (TCP,
/// TLS negotiation as the pool does it, start-up and authentication), ms, and whether the
/// session is encrypted (the server's `pg_stat_ssl`).
async fn direct_connect(settings: &DatabaseSettings, n: usize) -> Result<(Stats, bool)> {
    let mut times = Vec::new();
    let mut tls = false;
    for _ in 0..n {
        let start = Instant::now();
        let client = shared::db::connect(settings).await?;
        times.push(ms(start.elapsed()));
        tls = client
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await?
            .get(0);
    }
    Ok((stats(&times), tls))
}

fn sibling(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(exe.with_file_name(name))
}

fn command_output(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_default();
    json!({
        "cpu": model,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "kernel": command_output("uname", &["-sr"]),
        "rustc": command_output("rustc", &["--version"]),
        "commit": command_output("git", &["rev-parse", "--short", "HEAD"]),
        "dirty": !command_output("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty(),
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.runs > 0 && args.invocations > 0,
        "--runs and --invocations must be positive"
    );
    std::fs::create_dir_all(&args.out)?;
    std::fs::create_dir_all(&args.logs)?;
    let database = DatabaseSettings::with_url(args.database_url.clone());
    shared::db::migrate_with(&database, &handlers::examples::migrations())
        .await
        .context("migrating")?;
    let receiver = match &args.receiver {
        Some(path) => path.clone(),
        None => sibling("receiver")?,
    };
    let hello = match &args.hello {
        Some(path) => path.clone(),
        None => sibling("bench-hello")?,
    };
    let hello_pg = match &args.hello_pg {
        Some(path) => path.clone(),
        None => sibling("bench-hello-pg")?,
    };
    // The database as the receiver and hello-pg reach it: over TLS with the CA, when given.
    let db_url = match &args.ca_file {
        Some(_) => tls_url(&args.database_url)?,
        None => args.database_url.clone(),
    };
    let mut db = DatabaseSettings::with_url(db_url.clone());
    db.ca_file = args.ca_file.clone();
    let mut db_env = vec![("DATABASE_URL".to_owned(), db_url)];
    if let Some(ca) = &args.ca_file {
        db_env.push(("HOOKLEDGER_DB_CA_FILE".to_owned(), ca.display().to_string()));
    }
    let mut receiver_env = db_env.clone();
    receiver_env.push(("HOOKLEDGER_SOURCES".to_owned(), SOURCES_JSON.to_owned()));
    for pair in &args.extra_env {
        let (k, v) = pair
            .split_once('=')
            .with_context(|| format!("--env {pair}: expected NAME=VALUE"))?;
        receiver_env.push((k.to_owned(), v.to_owned()));
    }
    let targets = vec![
        Target {
            name: "receiver",
            binary: receiver,
            env: receiver_env,
            events: stripe_events()?,
            ok: 200,
        },
        Target {
            name: "hello",
            binary: hello,
            env: Vec::new(),
            events: hello_events(),
            ok: 200,
        },
        Target {
            name: "hello-pg",
            binary: hello_pg,
            env: db_env,
            events: hello_events(),
            ok: 200,
        },
    ];
    if let Some(unknown) = args
        .only
        .iter()
        .find(|o| !targets.iter().any(|t| t.name == o.as_str()))
    {
        bail!("--only {unknown}: expected receiver, hello or hello-pg");
    }
    let (connect, tls) = direct_connect(&db, args.runs).await?;
    let mut results = serde_json::Map::new();
    let mut measured = BTreeMap::new();
    for target in &targets {
        if !args.only.is_empty() && !args.only.iter().any(|o| o == target.name) {
            continue;
        }
        eprintln!("bench-cold: {} ({})", target.name, target.binary.display());
        let m = measure(target, args.runs, args.invocations, &args.logs).await?;
        let zip = zip_size(&target.binary, &args.logs)?;
        let size = std::fs::metadata(&target.binary)?.len();
        let package = package_zip(target.name);
        // The receiver and hello-pg connect to the same URL with the same CA.
        let connects = target.name != "hello";
        let db_connect = if connects {
            json!(round3(connect.median))
        } else {
            Value::Null
        };
        let db_tls = if connects { json!(tls) } else { Value::Null };
        results.insert(
            target.name.to_owned(),
            json!({
                "init_to_next_ms": round3(m.to_next.median),
                "init_to_first_response_ms": round3(m.to_first_response.median),
                "db_connect_ms": db_connect,
                "db_tls": db_tls,
                "rss_mib_after": round3(m.rss_after),
                "invocations": m.invocations,
                "zip_bytes": zip,
                "detail": {
                    "runs": args.runs,
                    "init_to_next": stats_json(&m.to_next),
                    "init_to_first_response": stats_json(&m.to_first_response),
                    "first_invocation_ms": stats_json(&m.first_invocation),
                    "warm_invocation_ms": stats_json(&m.warm_invocation),
                    "first_minus_warm_ms": round3(m.first_invocation.median - m.warm_invocation.median),
                    "direct_connect_ms": if connects { stats_json(&connect) } else { Value::Null },
                    "rss_mib_after_init": stats_json(&m.rss_after_init),
                    "hwm_mib_after": round3(m.hwm_after),
                    "rss_anon_mib_after": round3(m.anon_after),
                    "rss_file_mib_after": round3(m.file_after),
                    "errors": m.errors,
                    "invocation_p50_ms": round3(m.invocation_p50),
                    "invocation_p99_ms": round3(m.invocation_p99),
                    "cpu_user_ms_total": round3(m.cpu_user_ms),
                    "cpu_sys_ms_total": round3(m.cpu_sys_ms),
                    "binary": target.binary.display().to_string(),
                    "binary_bytes": size,
                    "package_zip": package.as_ref().map(|(p, b)| json!({"path": p.display().to_string(), "bytes": b})),
                }
            }),
        );
        measured.insert(target.name, m);
    }
    results.insert("machine".to_owned(), machine());
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    results.insert("command".to_owned(), json!(command));
    let results = Value::Object(results);
    let json_path = args.out.join("cold.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&results)? + "\n")?;
    let baseline = match &args.baseline {
        Some(path) => Some(serde_json::from_str::<Value>(&std::fs::read_to_string(
            path,
        )?)?),
        None => None,
    };
    let md = markdown(&results, baseline.as_ref(), &command);
    std::fs::write(args.out.join("cold.md"), md)?;
    eprintln!("bench-cold: wrote {} and cold.md", json_path.display());
    Ok(())
}

fn num(v: &Value, path: &[&str]) -> String {
    let mut cur = v;
    for key in path {
        match cur.get(key) {
            Some(next) => cur = next,
            None => return "n/a".to_owned(),
        }
    }
    match cur.as_f64() {
        Some(x) if cur.is_u64() => format!("{}", x as u64),
        Some(x) => format!("{x:.2}"),
        None => "n/a".to_owned(),
    }
}

fn range(v: &Value, name: &str, key: &str) -> String {
    format!(
        "{} ({}–{})",
        num(v, &[name, "detail", key, "median"]),
        num(v, &[name, "detail", key, "min"]),
        num(v, &[name, "detail", key, "max"])
    )
}

fn ratio(v: &Value, path_a: &[&str], path_b: &[&str]) -> String {
    let get = |path: &[&str]| {
        let mut cur = v;
        for key in path {
            cur = cur.get(key)?;
        }
        cur.as_f64()
    };
    match (get(path_a), get(path_b)) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "n/a".to_owned(),
    }
}

/// The targets, in the table's column order.
const NAMES: [&str; 3] = ["receiver", "hello", "hello-pg"];

/// One row of the table: a figure per target, then receiver ÷ hello and receiver ÷ hello-pg
/// (`ratios`: the figure's path under each target, or none).
fn row(label: &str, cells: [String; 3], ratios: Option<(&Value, &[&str])>) -> String {
    let (by_hello, by_hello_pg) = match ratios {
        Some((v, path)) => {
            let under = |name: &'static str| [&[name][..], path].concat();
            (
                ratio(v, &under("receiver"), &under("hello")),
                ratio(v, &under("receiver"), &under("hello-pg")),
            )
        }
        None => (String::new(), String::new()),
    };
    let [r, h, hp] = cells;
    format!("| {label} | {r} | {h} | {hp} | {by_hello} | {by_hello_pg} |\n")
}

fn table(v: &Value) -> String {
    let mut s = String::new();
    s.push_str(
        "| figure | receiver | hello-world | hello-pg (one PostgreSQL connect, `SELECT 1`) \
         | receiver / hello | receiver / hello-pg |\n|---|---|---|---|---|---|\n",
    );
    let each = |f: &dyn Fn(&str) -> String| NAMES.map(f);
    let rows: [(&str, &str); 5] = [
        (
            "exec to first `/next`, ms, median (min–max)",
            "init_to_next",
        ),
        ("exec to first response, ms", "init_to_first_response"),
        (
            "first invocation (`/next` answered to response), ms",
            "first_invocation_ms",
        ),
        ("warm invocation, ms", "warm_invocation_ms"),
        ("RSS after init (first response), MiB", "rss_mib_after_init"),
    ];
    for (label, key) in rows {
        s.push_str(&row(
            label,
            each(&|name| range(v, name, key)),
            Some((v, &["detail", key, "median"])),
        ));
    }
    let connects = |name: &str| name != "hello";
    s.push_str(&row(
        "database connect (direct `shared::db::connect`), ms",
        each(&|name| {
            if connects(name) {
                range(v, name, "direct_connect_ms")
            } else {
                "–".to_owned()
            }
        }),
        None,
    ));
    s.push_str(&row(
        "database connect over TLS (the server's `pg_stat_ssl`)",
        each(&|name| {
            if !connects(name) {
                return "–".to_owned();
            }
            match v.get(name).map(|t| &t["db_tls"]) {
                Some(Value::Bool(true)) => "yes, verified against the CA".to_owned(),
                Some(Value::Bool(false)) => "no".to_owned(),
                _ => "n/a".to_owned(),
            }
        }),
        None,
    ));
    s.push_str(&row(
        "first minus warm invocation (connect + first use), ms",
        each(&|name| num(v, &[name, "detail", "first_minus_warm_ms"])),
        None,
    ));
    s.push_str(&row(
        &format!(
            "RSS after {} invocations, MiB (peak)",
            num(v, &["receiver", "invocations"])
        ),
        each(&|name| {
            format!(
                "{} ({})",
                num(v, &[name, "rss_mib_after"]),
                num(v, &[name, "detail", "hwm_mib_after"])
            )
        }),
        Some((v, &["rss_mib_after"])),
    ));
    s.push_str(&row(
        "of which anonymous (heap, stacks) / file-backed (the binary's pages), MiB",
        each(&|name| {
            format!(
                "{} / {}",
                num(v, &[name, "detail", "rss_anon_mib_after"]),
                num(v, &[name, "detail", "rss_file_mib_after"])
            )
        }),
        None,
    ));
    s.push_str(&row(
        "invocation p50 / p99 over those, ms",
        each(&|name| {
            format!(
                "{} / {}",
                num(v, &[name, "detail", "invocation_p50_ms"]),
                num(v, &[name, "detail", "invocation_p99_ms"])
            )
        }),
        None,
    ));
    s.push_str(&row(
        "errors (non-200) among them",
        each(&|name| num(v, &[name, "detail", "errors"])),
        None,
    ));
    s.push_str(&row(
        "binary, bytes",
        each(&|name| num(v, &[name, "detail", "binary_bytes"])),
        None,
    ));
    s.push_str(&row(
        "zipped as `bootstrap` (deflate 9), bytes",
        each(&|name| num(v, &[name, "zip_bytes"])),
        Some((v, &["zip_bytes"])),
    ));
    for name in ["receiver", "hello"] {
        if let Some(p) = v
            .get(name)
            .and_then(|r| r["detail"]["package_zip"].as_object())
        {
            s.push_str(&format!(
                "| `make package` zip of {name} ({}), bytes | {} | | | | |\n",
                p.get("path").and_then(Value::as_str).unwrap_or(""),
                p.get("bytes").map(|b| b.to_string()).unwrap_or_default()
            ));
        }
    }
    s
}

/// Whether the receiver's and hello-pg's connects were over TLS, in words.
fn tls_note(v: &Value) -> &'static str {
    let tls = |name: &str| v.get(name).and_then(|t| t["db_tls"].as_bool());
    match (tls("receiver"), tls("hello-pg")) {
        (Some(true), Some(true)) => "both connects over TLS, verified against the CA",
        (Some(false), Some(false)) => {
            "the connects were **without TLS** (no CA file): not the issue's TLS floor"
        }
        _ => "TLS of the connects not recorded",
    }
}

fn target_check(v: &Value) -> String {
    let get = |path: &[&str]| -> Option<f64> {
        let mut cur = v;
        for key in path {
            cur = cur.get(key)?;
        }
        cur.as_f64()
    };
    let verdict = |ok: Option<bool>| match ok {
        Some(true) => "met",
        Some(false) => "**missed**",
        None => "n/a",
    };
    let init = get(&["receiver", "init_to_next_ms"])
        .zip(get(&["hello", "init_to_next_ms"]))
        .map(|(r, h)| r <= 2.0 * h);
    let init_first = get(&["receiver", "init_to_first_response_ms"])
        .zip(get(&["hello", "init_to_first_response_ms"]))
        .map(|(r, h)| r <= 2.0 * h);
    let first_pg = get(&["receiver", "init_to_first_response_ms"])
        .zip(get(&["hello-pg", "init_to_first_response_ms"]))
        .map(|(r, h)| r <= 1.5 * h);
    let rss = get(&["receiver", "rss_mib_after"]).map(|r| r <= 25.0);
    let zip = get(&["receiver", "zip_bytes"]).map(|z| z <= 8.0 * 1_000_000.0);
    format!(
        "| target | verdict |\n|---|---|\n\
         | cold init (exec to first `/next`) within 2x of hello-world | {} ({}) |\n\
         | exec to first response within 2x of hello-world (includes the database connect) | {} ({}) |\n\
         | exec to first response within 1.5x of hello-world with one TLS PostgreSQL connect (issue 29) | {} ({}; {}) |\n\
         | RSS after the invocations <= 25 MiB | {} |\n\
         | zip <= 8 MB (8,000,000 bytes) | {} |\n",
        verdict(init),
        ratio(v, &["receiver", "init_to_next_ms"], &["hello", "init_to_next_ms"]),
        verdict(init_first),
        ratio(
            v,
            &["receiver", "init_to_first_response_ms"],
            &["hello", "init_to_first_response_ms"]
        ),
        verdict(first_pg),
        ratio(
            v,
            &["receiver", "init_to_first_response_ms"],
            &["hello-pg", "init_to_first_response_ms"]
        ),
        tls_note(v),
        verdict(rss),
        verdict(zip)
    )
}

fn markdown(v: &Value, baseline: Option<&Value>, command: &str) -> String {
    let m = &v["machine"];
    let mut s = String::new();
    s.push_str("## Cold start and footprint\n\n");
    s.push_str(&format!(
        "Machine: {} ({} cores), {}, {}; commit {}{}. Binaries built with the workspace's \
         release profile (fat LTO, codegen-units=1, strip; OpenSSL at -Os). Each function runs as a child \
         process against a Lambda Runtime API served by the harness on 127.0.0.1 (environment: \
         the usual `AWS_LAMBDA_*` variables, region, dummy credentials; the receiver also gets \
         `DATABASE_URL` and one inline Stripe source in `HOOKLEDGER_SOURCES`); stdout and stderr \
         go to a file. Times run from just before the spawn (fork + exec) to the first \
         `GET /next` and to the first posted response; the receiver's event is a signed Stripe \
         `payment_intent.succeeded` delivery (a real claim and order insert, durable \
         PostgreSQL), hello-world's a plain GET. hello-pg is `bench-hello-pg`, the hello-world given \
         the receiver's `DATABASE_URL` (and `HOOKLEDGER_DB_CA_FILE`): the floor of a function \
         that answers after a PostgreSQL round trip, its first invocation opens one \
         tokio-postgres connection over postgres-native-tls (building the TLS connector then) \
         and every invocation runs `SELECT 1` on it before answering (same plain GET); {}. {} \
         cold starts each; median (min–max).\n\n",
        m["cpu"].as_str().unwrap_or("?"),
        m["cores"],
        m["kernel"].as_str().unwrap_or("?"),
        m["rustc"].as_str().unwrap_or("?"),
        m["commit"].as_str().unwrap_or("?"),
        if m["dirty"].as_bool() == Some(true) {
            " (with uncommitted changes)"
        } else {
            ""
        },
        tls_note(v),
        num(v, &["receiver", "detail", "runs"]),
    ));
    s.push_str(&table(v));
    s.push_str(
        "\nThe database connect is measured two ways: a direct `shared::db::connect` to the same \
         server with the same URL and CA from the harness (what the pool's first connection \
         does: TCP, TLS negotiation with the URL's `sslmode`, start-up and authentication; \
         median of as many connects as cold starts), and each function's first invocation minus \
         its warm one (the connect plus whatever else the first delivery does for the first \
         time, such as preparing its statements).\n\n",
    );
    s.push_str(&target_check(v));
    if let Some(b) = baseline {
        s.push_str(&format!(
            "\n### Before this change (commit {}, same harness and settings)\n\n",
            b["machine"]["commit"].as_str().unwrap_or("?")
        ));
        s.push_str(&table(b));
    }
    s.push_str(&format!("\nCommand: `{command}`\n"));
    s
}

#[cfg(test)]
mod tests {
    use super::tls_url;

    #[test]
    fn the_tls_url_requires_tls_by_the_certificate_s_name() {
        assert_eq!(
            tls_url("postgres://postgres@127.0.0.1:5433/postgres?sslmode=disable").unwrap(),
            "postgres://postgres@localhost:5433/postgres?sslmode=require"
        );
        assert_eq!(
            tls_url("postgres://u:p@localhost/db?application_name=x").unwrap(),
            "postgres://u:p@localhost/db?application_name=x&sslmode=require"
        );
        assert!(tls_url("postgres://postgres@db.example.com:5432/postgres").is_err());
    }
}
