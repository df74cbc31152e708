//! Database work per event: measured between two counter snapshots ([`measure`]), as JSON
//! and Markdown, and (a)'s statements compared with the receiver's.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Result;
use serde_json::{json, Value};

use bench::{round3, Delivery};

use crate::deliveries::{deliver, Bench};
use crate::pgstat::{self, Work};
use hookledger_tests::turns;

/// Lets the warm-up's pending stats reach the shared counters before a measurement: a
/// backend flushes them when it goes idle at least a second after its last flush, so wait
/// past that second and run one more (read-only: a duplicate) delivery on the connection.
pub async fn settle(bench: &Bench, warmed: &[Delivery], now: i64) -> Result<()> {
    tokio::time::sleep(Duration::from_millis(1200)).await;
    deliver(bench.receiver.clone(), warmed[..1].to_vec(), 1, now).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}

/// Measures the work of `action` (which handles `events` events): CHECKPOINT, reset
/// pg_stat_statements, snapshot, run, wait for the backends' stats to flush, snapshot.
pub async fn measure<T>(
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

/// The work per event as the JSON report has it (figures to 3 decimals).
pub fn work_json(w: &Work) -> Value {
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

fn short(text: &str, max: usize) -> String {
    let t: String = text.chars().take(max).collect();
    let t = t.replace('|', "\\|");
    if text.chars().count() > max {
        format!("`{t}...`")
    } else {
        format!("`{t}`")
    }
}

/// Appends to `md` the work per event of `label`: one line of totals, the statements and the
/// tables.
pub fn work_md(label: &str, w: &Work, md: &mut String) {
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
pub fn compare(receiver: &Work, a: &Work) -> (bool, String) {
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
