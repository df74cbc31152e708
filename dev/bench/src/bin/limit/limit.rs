//! `bench-limit limit`: the per-event work of the receiver and of each script, through the
//! turn-counting proxy, then pgbench's throughput at each client count; writes `limit.json`
//! and `limit.md`.

use std::fmt::Write as _;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::database::{admin, migrate};
use bench::{order_event_body, round3, signed_deliveries, unix_now, Delivery};

use crate::deliveries::{deliver, receiver, receiver_with, Handler};
use crate::machine::{machine_md, show};
use crate::pgbench::{pgbench, PgbenchRun, SCRIPTS};
use crate::work::{compare, measure, settle, work_json, work_md};
use hookledger_tests::turns::{self, proxied};

/// `bench-limit limit`: see the module's docs.
///
/// # Errors
/// On a database, pgbench or file error, or when a script is missing.
pub async fn limit(
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
    let now = unix_now();
    let tag = format!("limit_{now}");
    // Warm up: the pool's connection and its prepared statements.
    let warm_list = signed_deliveries(&bench.stripe, &format!("{tag}_warm"), 20, now);
    let (_, warm_ok) = deliver(bench.receiver.clone(), warm_list.clone(), 1, now).await?;
    anyhow::ensure!(
        warm_ok == 20,
        "warm-up deliveries were not all answered 200 ({warm_ok}/20)"
    );
    settle(&bench, &warm_list, now).await?;
    let new_events: Vec<Delivery> =
        signed_deliveries(&bench.stripe, &tag, events as usize + 1000, now)
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
    let warm2 = signed_deliveries(&bench.stripe, &format!("{tag}_warm2"), 20, now);
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
    // A SQL handler's new event: the same effect declared in the sources JSON.
    let bench = receiver_with(&proxy_url, 1, Handler::Sql)?;
    let warm3 = signed_deliveries(&bench.stripe, &format!("{tag}_warm3"), 20, now);
    let (_, warm3_ok) = deliver(bench.receiver.clone(), warm3.clone(), 1, now).await?;
    anyhow::ensure!(
        warm3_ok == 20,
        "SQL handler warm-up deliveries were not all answered 200 ({warm3_ok}/20)"
    );
    settle(&bench, &warm3, now).await?;
    let sql_events = signed_deliveries(&bench.stripe, &format!("{tag}_sql"), events as usize, now);
    let (sql_new, (_, sql_ok)) = measure(
        &admin,
        &proxy,
        events,
        deliver(bench.receiver.clone(), sql_events, 1, now),
        bench,
    )
    .await?;
    eprintln!(
        "SQL handler: new {sql_ok}/{events} answered 200, {:.2} statements, {:.2} round trips per event",
        sql_new.statements, sql_new.round_trips
    );

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
    let handlers = handler_throughput(url, &tag).await?;

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
    out.insert(
        "sql_handler".into(),
        json!({
            "new": work_json(&sql_new),
            "answered": sql_ok,
            "throughput": handlers.json(),
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
        "Each run: `pgbench -n -M prepared -c C -j min(C,2) -T {duration} -D n=0 -D run=<unique> -D ... -f bench/pgbench/<script> \"$DATABASE_URL\"`, \
         the scripts' values (-D) taken from one real delivery (body {} bytes stored as the payload, 32-byte digests, the handler's response); \
         `CHECKPOINT` before each run; for each client count (a), (b), (c) in turn. Event ids are unique: \
         `run x 10^12 + client_id x 10^9 + n`, `n` a per-client counter (pgbench keeps a client's variables across transactions).\n",
        order_event_body("limit_0000000000", 1000, unix_now()).len()
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
    handlers.md(&sql_new, sql_ok, events, &mut md);
    work_md("receiver, new event", &receiver_new, &mut md);
    work_md("receiver, duplicate", &receiver_dup, &mut md);
    work_md("receiver, new event, SQL handler", &sql_new, &mut md);
    for (name, w, _) in &script_work {
        work_md(&format!("({name})"), w, &mut md);
    }
    std::fs::write(format!("{out_dir}/limit.md"), md)?;
    eprintln!("wrote {out_dir}/limit.json and {out_dir}/limit.md");
    Ok(())
}

/// Concurrent deliveries in each throughput round of [`handler_throughput`], and the pool's
/// connections (one per delivery in flight, as one per Lambda execution environment).
const HANDLER_CLIENTS: usize = 32;

/// New events per round of [`handler_throughput`].
const HANDLER_EVENTS: usize = 3_000;

/// Rounds of [`handler_throughput`], each Rust then SQL.
const HANDLER_ROUNDS: usize = 3;

/// In-process throughput of new events, the Rust handler's and the SQL handler's, alternating.
struct HandlerThroughput {
    rust_rps: Vec<f64>,
    sql_rps: Vec<f64>,
}

impl HandlerThroughput {
    fn median(values: &[f64]) -> f64 {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
    }

    fn ratio(&self) -> f64 {
        let rust = Self::median(&self.rust_rps);
        if rust > 0.0 {
            Self::median(&self.sql_rps) / rust
        } else {
            0.0
        }
    }

    fn json(&self) -> Value {
        json!({
            "clients": HANDLER_CLIENTS,
            "events_per_round": HANDLER_EVENTS,
            "rust_rps": self.rust_rps.iter().map(|v| round3(*v)).collect::<Vec<_>>(),
            "sql_rps": self.sql_rps.iter().map(|v| round3(*v)).collect::<Vec<_>>(),
            "rust_rps_median": round3(Self::median(&self.rust_rps)),
            "sql_rps_median": round3(Self::median(&self.sql_rps)),
            "sql_over_rust": round3(self.ratio()),
        })
    }

    fn md(&self, sql_new: &crate::pgstat::Work, sql_ok: usize, events: u64, md: &mut String) {
        let _ = writeln!(md, "\n### A SQL handler beside the Rust handler\n");
        let _ = writeln!(
            md,
            "The example Rust handler's effect (`payment_intent.succeeded`: one `INSERT` into `orders`) declared as a SQL handler in the sources JSON \
             (`dev/bench/src/bin/limit/deliveries.rs`, `SQL_SOURCES_JSON`). Per new event, measured as above ({events} events, one connection, {sql_ok} answered 200): \
             **{:.2} statements, {:.2} round trips**, {:.0} WAL bytes. Throughput of new events in-process (`shared::Receiver::receive`, {HANDLER_CLIENTS} concurrent deliveries, \
             a pool of {HANDLER_CLIENTS} connections, {HANDLER_EVENTS} events per round, {HANDLER_ROUNDS} rounds alternating Rust then SQL, each on a new pool warmed first):\n",
            sql_new.statements, sql_new.round_trips, sql_new.wal_bytes
        );
        let _ = writeln!(
            md,
            "| handler | rounds (events/s) | median events/s |\n|---|---|---:|"
        );
        for (label, values) in [
            ("Rust (example)", &self.rust_rps),
            ("SQL (sources JSON)", &self.sql_rps),
        ] {
            let rounds: Vec<String> = values.iter().map(|v| format!("{v:.0}")).collect();
            let _ = writeln!(
                md,
                "| {label} | {} | {:.0} |",
                rounds.join(", "),
                Self::median(values)
            );
        }
        let _ = writeln!(md, "\nSQL ÷ Rust, medians: **{:.2}x**.\n", self.ratio());
    }
}

/// Measures [`HandlerThroughput`] on `url` directly (no proxy): see its constants.
async fn handler_throughput(url: &str, tag: &str) -> Result<HandlerThroughput> {
    let mut result = HandlerThroughput {
        rust_rps: Vec::new(),
        sql_rps: Vec::new(),
    };
    for round in 0..HANDLER_ROUNDS {
        for handler in [Handler::Rust, Handler::Sql] {
            // Signed now: the per-event part before took longer than the tolerance allows.
            let now = unix_now();
            let bench = receiver_with(url, HANDLER_CLIENTS, handler)?;
            let tag = format!("{tag}_tput{round}_{handler:?}");
            let warm =
                signed_deliveries(&bench.stripe, &format!("{tag}_w"), HANDLER_CLIENTS * 4, now);
            deliver(bench.receiver.clone(), warm, HANDLER_CLIENTS, now).await?;
            let list = signed_deliveries(&bench.stripe, &tag, HANDLER_EVENTS, now);
            let start = Instant::now();
            let (_, ok) = deliver(bench.receiver.clone(), list, HANDLER_CLIENTS, now).await?;
            let rps = ok as f64 / start.elapsed().as_secs_f64();
            anyhow::ensure!(
                ok == HANDLER_EVENTS,
                "{handler:?} handler round {round}: {ok}/{HANDLER_EVENTS} answered 200"
            );
            eprintln!(
                "{handler:?} handler round {round}: {rps:.0} new events/s at C={HANDLER_CLIENTS}"
            );
            match handler {
                Handler::Rust => result.rust_rps.push(rps),
                Handler::Sql => result.sql_rps.push(rps),
            }
        }
    }
    Ok(result)
}
