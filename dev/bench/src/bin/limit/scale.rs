//! `bench-limit scale`: new-event receive latency with the ledger grown in place to each size,
//! and the sweeper's and auditor's figures quoted from `dev/bench/SWEEP.md`; writes `scale.json`
//! and `scale.md`.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::database::{admin, migrate};
use bench::{round3, signed_deliveries, unix_now};

use crate::deliveries::{deliver, receiver};
use crate::machine::machine_md;

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

/// `bench-limit scale`: see the module's docs.
///
/// # Errors
/// On a database or file error.
pub async fn scale(
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
    let now = unix_now();
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
                signed_deliveries(&bench.stripe, &format!("{tag}_warm"), 50.max(c * 4), now),
                c,
                now,
            )
            .await?;
            let (mut times, ok) = deliver(
                bench.receiver.clone(),
                signed_deliveries(&bench.stripe, &tag, claims, now),
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

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
