//! `bench-report`: assembles `dev/bench/RESULTS.md` from
//! `dev/bench/results/{http,limit,scale,cold,verify,privacy}.json` and their `.md` sections (a part that
//! did not run is said to be "not run"), with the headline table of the targets, the
//! cost model (issue 12, part 5) and the chart (`dev/bench/throughput.png`, drawn by
//! `dev/bench/chart.py`).

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Parser;
use serde_json::Value;

#[derive(Parser, Debug)]
#[command(about = "writes dev/bench/RESULTS.md from dev/bench/results/*")]
struct Args {
    /// Where the parts wrote their results.
    #[arg(long, default_value = "dev/bench/results")]
    results: PathBuf,
    /// The document written.
    #[arg(long, default_value = "dev/bench/RESULTS.md")]
    out: PathBuf,
    /// The chart, linked when it exists (relative to the document's folder).
    #[arg(long, default_value = "throughput.png")]
    chart: String,
}

/// Lambda prices assumed (us-east-1, as published for 2026): per GB-second of billed duration,
/// arm64 and x86_64, and per request.
const ARM64_PER_GB_S: f64 = 0.000_013_333_4;
const X86_PER_GB_S: f64 = 0.000_016_666_7;
const PER_MILLION_REQUESTS: f64 = 0.20;
/// Memory at which a function gets one full vCPU (Lambda's documentation: 1,769 MB).
const MB_PER_VCPU: f64 = 1769.0;

fn load(dir: &Path, part: &str) -> (Option<Value>, Option<String>) {
    let json = std::fs::read_to_string(dir.join(format!("{part}.json")))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok());
    let md = std::fs::read_to_string(dir.join(format!("{part}.md"))).ok();
    (json, md)
}

fn num(v: &Value, path: &[&str]) -> Option<f64> {
    let mut v = v;
    for key in path {
        v = v.get(*key)?;
    }
    v.as_f64()
}

fn cpu_us(r: &Value) -> Option<f64> {
    Some(num(r, &["cpu_user_us"])? + num(r, &["cpu_sys_us"])?)
}

/// One row of the headline table.
struct Target {
    figure: &'static str,
    target: &'static str,
    measured: Option<String>,
    met: Option<bool>,
}

fn ratio_row(
    figure: &'static str,
    target: &'static str,
    value: Option<f64>,
    ok: impl Fn(f64) -> bool,
    unit: &str,
) -> Target {
    Target {
        figure,
        target,
        measured: value.map(|v| format!("{v:.2}{unit}")),
        met: value.map(ok),
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let (http, http_md) = load(&args.results, "http");
    let (limit, limit_md) = load(&args.results, "limit");
    let (scale, scale_md) = load(&args.results, "scale");
    let (cold, cold_md) = load(&args.results, "cold");
    let (_, verify_md) = load(&args.results, "verify");
    let (_, privacy_md) = load(&args.results, "privacy");
    let machine: Option<Value> = std::fs::read_to_string(args.results.join("machine.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok());
    let none = Value::Null;
    let http_v = http.as_ref().unwrap_or(&none);
    let limit_v = limit.as_ref().unwrap_or(&none);
    let scale_v = scale.as_ref().unwrap_or(&none);
    let cold_v = cold.as_ref().unwrap_or(&none);

    let recv32 = &http_v["receiver"]["unique"]["32"];
    let peer32 = &http_v["peer"]["unique"]["32"];
    let div = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let mut targets = vec![
        ratio_row(
            "unique over HTTP, C=32: receiver req/s ÷ (c) tps",
            "≥ 0.7x",
            div(num(recv32, &["rps"]), num(limit_v, &["c", "32", "tps"])),
            |v| v >= 0.7,
            "x",
        ),
        ratio_row(
            "unique C=32 throughput: receiver ÷ peer",
            "≥ 2x",
            div(num(recv32, &["rps"]), num(peer32, &["rps"])),
            |v| v >= 2.0,
            "x",
        ),
        ratio_row(
            "unique C=32 p99: receiver ÷ peer",
            "≤ 0.5x",
            div(num(recv32, &["p99_ms"]), num(peer32, &["p99_ms"])),
            |v| v <= 0.5,
            "x",
        ),
        ratio_row(
            "unique C=32 CPU per delivery (user+sys): receiver ÷ peer",
            "≤ 0.2x",
            div(cpu_us(recv32), cpu_us(peer32)),
            |v| v <= 0.2,
            "x",
        ),
        ratio_row(
            "duplicates C=32 ÷ unique C=32 throughput (receiver)",
            "≥ 1.5x",
            div(
                num(&http_v["receiver"]["duplicates"], &["rps"]),
                num(recv32, &["rps"]),
            ),
            |v| v >= 1.5,
            "x",
        ),
        ratio_row(
            "duplicate: round trips",
            "1",
            num(limit_v, &["per_event", "receiver_duplicate", "round_trips"]),
            |v| v <= 1.0,
            "",
        ),
        ratio_row(
            "new event: statements",
            "1",
            num(limit_v, &["per_event", "receiver_new", "statements"]),
            |v| v <= 1.0,
            "",
        ),
        ratio_row(
            "new event: round trips",
            "1",
            num(limit_v, &["per_event", "receiver_new", "round_trips"]),
            |v| v <= 1.0,
            "",
        ),
        ratio_row(
            "SQL handler new event: statements",
            "1",
            num(limit_v, &["sql_handler", "new", "statements"]),
            |v| v <= 1.0,
            "",
        ),
        ratio_row(
            "SQL handler new event: round trips",
            "1",
            num(limit_v, &["sql_handler", "new", "round_trips"]),
            |v| v <= 1.0,
            "",
        ),
        ratio_row(
            "new events C=32 in-process: SQL handler ÷ Rust handler throughput",
            "≥ 0.9x",
            num(limit_v, &["sql_handler", "throughput", "sql_over_rust"]),
            |v| v >= 0.9,
            "x",
        ),
        ratio_row(
            "new event: WAL bytes, receiver ÷ (c)",
            "≤ 1.2x",
            div(
                num(limit_v, &["per_event", "receiver_new", "wal_bytes"]),
                num(limit_v, &["per_event", "c", "wal_bytes"]),
            ),
            |v| v <= 1.2,
            "x",
        ),
        ratio_row(
            "cold init to first /next: receiver ÷ hello-world",
            "≤ 2x",
            div(
                num(cold_v, &["receiver", "init_to_next_ms"]),
                num(cold_v, &["hello", "init_to_next_ms"]),
            ),
            |v| v <= 2.0,
            "x",
        ),
        ratio_row(
            if cold_v["hello-pg"]["db_tls"].as_bool() == Some(false) {
                "cold exec to first response: receiver ÷ hello-world with one PostgreSQL connect (without TLS)"
            } else {
                "cold exec to first response: receiver ÷ hello-world with one TLS PostgreSQL connect"
            },
            "≤ 1.5x",
            div(
                num(cold_v, &["receiver", "init_to_first_response_ms"]),
                num(cold_v, &["hello-pg", "init_to_first_response_ms"]),
            ),
            |v| v <= 1.5,
            "x",
        ),
        ratio_row(
            "RSS after the invocations (MiB)",
            "≤ 25",
            num(cold_v, &["receiver", "rss_mib_after"]),
            |v| v <= 25.0,
            " MiB",
        ),
        ratio_row(
            "RSS after the invocations, issue 29 (MiB)",
            "≤ 12",
            num(cold_v, &["receiver", "rss_mib_after"]),
            |v| v <= 12.0,
            " MiB",
        ),
        ratio_row(
            "zipped receiver (MiB)",
            "≤ 8",
            num(cold_v, &["receiver", "zip_bytes"]).map(|b| b / 1024.0 / 1024.0),
            |v| v <= 8.0,
            " MiB",
        ),
        ratio_row(
            "zipped receiver, `make package` (the last ARCH built), issue 29 (MiB)",
            "≤ 5",
            num(cold_v, &["receiver", "detail", "package_zip", "bytes"])
                .map(|b| b / 1024.0 / 1024.0),
            |v| v <= 5.0,
            " MiB",
        ),
        ratio_row(
            "claim p50 at 10M rows ÷ at 10k rows",
            "≤ 1.2x",
            div(
                num(scale_v, &["10000000", "p50_ms"]),
                num(scale_v, &["10000", "p50_ms"]),
            ),
            |v| v <= 1.2,
            "x",
        ),
    ];

    let mut md = String::new();
    md.push_str("# hookledger benchmarks (`make bench`)\n\n");
    let date = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    md.push_str(&format!(
        "Generated by `bench-report` on {date} from `dev/bench/results/*.json` and `*.md` (one \
         `make bench` run; each figure's section names the command that produced it). The \
         machine is shared and noisy: compare figures as ratios within this run.\n\n"
    ));

    md.push_str("## Machine, versions, settings\n\n");
    let facts = machine
        .clone()
        .map(|m| m["machine"].clone())
        .unwrap_or_else(bench::machine_facts);
    md.push_str("| | |\n|---|---|\n");
    for (label, key) in [
        ("CPU", "cpu_model"),
        ("Logical cores", "logical_cores"),
        ("Memory (GiB)", "memory_gib"),
        ("Load average at the HTTP part's end", "load_average"),
        ("Kernel", "kernel"),
        ("rustc", "rustc"),
        ("/proc clock ticks per second", "clock_ticks_per_second"),
    ] {
        md.push_str(&format!("| {label} | {} |\n", plain(&facts[key])));
    }
    if let Some(pg) = machine.as_ref().map(|m| &m["postgres"]) {
        if let Some(obj) = pg.as_object() {
            for (k, v) in obj {
                md.push_str(&format!("| PostgreSQL `{k}` | {} |\n", plain(v)));
            }
        }
    }
    md.push_str("| Build | release profile: fat LTO, codegen-units=1, strip; OpenSSL at -Os (.cargo/config.toml) |\n\n");

    md.push_str("## Targets\n\n| figure | target | measured | |\n|---|---|---:|---|\n");
    for t in targets.drain(..) {
        let verdict = match t.met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "not run",
        };
        md.push_str(&format!(
            "| {} | {} | {} | {verdict} |\n",
            t.figure,
            t.target,
            t.measured.unwrap_or_else(|| "not run".into())
        ));
    }
    md.push_str(
        "\nA missed target is reported as missed; what limits it is in its part's section.\n\n",
    );

    if args
        .out
        .parent()
        .map(|p| p.join(&args.chart).exists())
        .unwrap_or(false)
    {
        md.push_str(&format!(
            "## Throughput vs concurrency\n\n![throughput vs concurrency: receiver over HTTP, \
             pgbench (a), (b), (c), peer]({})\n\nDrawn by `dev/bench/chart.py` from \
             `dev/bench/results/http.json` and `limit.json`.\n\n",
            args.chart
        ));
    } else {
        md.push_str(
            "## Throughput vs concurrency\n\nChart not drawn (dev/bench/chart.py not run).\n\n",
        );
    }

    for (title, section) in [
        ("HTTP", &http_md),
        ("The limit (pgbench) and per-event database work", &limit_md),
        ("Cold start and footprint", &cold_md),
        ("Scale", &scale_md),
        (
            "Signature verification per delivery (micro-benchmark)",
            &verify_md,
        ),
        (
            "Payload privacy at rest: encryption and redaction per delivery (issue 28)",
            &privacy_md,
        ),
    ] {
        match section {
            Some(text) => {
                md.push_str(text.trim_end());
                md.push_str("\n\n");
            }
            None => md.push_str(&format!("## {title}\n\nnot run\n\n")),
        }
    }
    md.push_str(&cost_section(http.as_ref()));
    md.push_str(
        "## Sweeper and auditor\n\nSee [SWEEP.md](SWEEP.md) (`make bench-sweep`): claim \
         latency while the retention sweep deletes a 1M-row ledger, and the auditor's query \
         times on 1M and 10M rows.\n",
    );
    std::fs::write(&args.out, md)?;
    eprintln!("bench-report: wrote {}", args.out.display());
    Ok(())
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "unknown".into(),
        other => other.to_string(),
    }
}

/// Billed milliseconds of one delivery at `memory_mb`: the larger of the measured latency and
/// the CPU time stretched by the vCPU share, rounded up to 1 ms.
fn billed_ms(p50_ms: f64, cpu_ms: f64, memory_mb: f64) -> f64 {
    let share = (memory_mb / MB_PER_VCPU).min(1.0);
    (p50_ms.max(cpu_ms / share)).ceil().max(1.0)
}

fn cost_section(http: Option<&Value>) -> String {
    let mut md = String::from("## Cost per million deliveries (Lambda)\n\n");
    let Some(http) = http else {
        md.push_str("not run (needs the HTTP part)\n\n");
        return md;
    };
    md.push_str(&format!(
        "Model: one delivery per invocation (Lambda runs one request at a time per execution \
         environment), so the figures are the unique scenario at C=1. Billed duration per \
         delivery = ceil_1ms(max(p50 latency, CPU per delivery ÷ vCPU share)), vCPU share = \
         memory ÷ {MB_PER_VCPU} MB (capped at 1). GB-s = billed s × memory ÷ 1024. Cost per \
         million = 10⁶ × GB-s × price + ${PER_MILLION_REQUESTS:.2} requests. Prices assumed \
         (us-east-1, 2026): arm64 ${ARM64_PER_GB_S} per GB-s, x86_64 ${X86_PER_GB_S} per GB-s, \
         ${PER_MILLION_REQUESTS:.2} per million requests. CPU and latency are this machine's \
         (an x86 {} core), not Graviton's; the HTTP latency includes the loopback hop but not \
         API Gateway's (billed apart and the same for both). The peer as a Python Lambda uses \
         its own measured CPU and latency under the same model; Python's cold start (import of \
         FastAPI, asyncpg) is excluded, as is hookledger's (see Cold start).\n\n",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    ));
    md.push_str("| | memory MB | p50 ms | CPU µs | billed ms | GB-s per 10⁶ | arm64 $ per 10⁶ | x86_64 $ per 10⁶ |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (name, key) in [("hookledger", "receiver"), ("peer (Python)", "peer")] {
        let r = &http[key]["unique"]["1"];
        let (Some(p50), Some(cpu)) = (num(r, &["p50_ms"]), cpu_us(r)) else {
            md.push_str(&format!("| {name} | not run | | | | | | |\n"));
            continue;
        };
        for memory in [128.0, 256.0, 512.0] {
            let billed = billed_ms(p50, cpu / 1000.0, memory);
            let gb_s = billed / 1000.0 * memory / 1024.0 * 1e6;
            md.push_str(&format!(
                "| {name} | {memory:.0} | {p50:.2} | {cpu:.0} | {billed:.0} | {gb_s:.0} | {:.3} | {:.3} |\n",
                gb_s * ARM64_PER_GB_S + PER_MILLION_REQUESTS,
                gb_s * X86_PER_GB_S + PER_MILLION_REQUESTS
            ));
        }
    }
    md.push('\n');
    md
}
