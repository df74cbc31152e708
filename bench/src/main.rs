//! `bench-sweep` (`make bench-sweep`): what the retention sweep costs the receivers' claims.
//!
//! On its own throwaway PostgreSQL (`DATABASE_URL`), in one run:
//! 1. loads a ledger of `--expired-rows` expired `completed` keys (one `INSERT ... SELECT
//!    generate_series`, 1.0-1.8 KB payloads, two sources, claimed 60 to 31 days ago, in time
//!    order as a ledger is appended) and `--live-rows` recent ones, then `VACUUM ANALYZE`;
//! 2. `EXPLAIN (ANALYZE, BUFFERS)` of the sweep's batch statement after 10 batches;
//! 3. paced live claim traffic (`--connections` tasks, `--rate` claims/s in all, through
//!    `shared::ledger::claim` and `Tx::complete`, ~10% duplicates) in phases, in this order:
//!    no sweep, during `shared::sweep::run` (default settings), during each
//!    `--sweep-variants` sweep (ledger reloaded first), during one unbatched `DELETE` of the
//!    same rows (reloaded first), and no sweep again as a noise control. Before every phase:
//!    `CHECKPOINT` and wait until no autovacuum worker runs and the server writes no WAL
//!    ([`Bench::settle`]), so each phase starts from the same state. A sweep phase is measured
//!    only while the sweep runs (it ends the phase when it finishes early);
//! 4. the hot duplicate through `claim` (with the expiry check) interleaved with the lookup as
//!    it was before retention (BASELINE below);
//! 5. the auditor: every statement of `shared::ledger::audit` (and the sweep's two it reuses)
//!    and the whole `shared::audit::peek`, timed warm on a ledger of `--audit-rows` rows in a
//!    realistic mix, then on 10,000,000 rows (`--ten-million false` skips that), with each plan;
//! 6. writes the Markdown report (`--out`, default `bench/SWEEP.md`), with findings computed
//!    from the numbers, and prints a summary.
//!
//! Not a test: it asserts nothing, it measures.

use std::fmt::Write as _;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use futures_util::future::maybe_done;
use sha2::{Digest, Sha256};
use shared::config::{AuditSettings, DatabaseSettings, SweepSettings};
use shared::db::{Connection, Pool, Sql};
use shared::ledger::{self, Claim, Expiry, NewEvent, Status};
use shared::retention::Retention;
use shared::Sources;
use tokio_postgres::types::{ToSql, Type};

#[derive(Parser, Debug, Clone)]
#[command(about = "claim latency while the retention sweep deletes a large ledger")]
struct Args {
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// Expired `completed` rows loaded (each delete phase faces all of them).
    #[arg(long, default_value_t = 1_000_000)]
    expired_rows: i64,
    /// Recent (not expired) `completed` rows loaded beside them.
    #[arg(long, default_value_t = 50_000)]
    live_rows: i64,
    /// Length of each measured phase, seconds.
    #[arg(long, default_value_t = 30)]
    phase_secs: u64,
    /// Concurrent claim tasks, one connection each.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Offered claims per second, all tasks together (paced, not a closed loop).
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// One claim in this many is a duplicate of an event completed earlier (10: ~10%).
    #[arg(long, default_value_t = 10)]
    duplicate_every: u64,
    /// More batched-sweep phases after the default one, as `batch_size:duty_percent` (the
    /// default `pause_ms` stays); a third field sets `wal_compression` server-wide for that
    /// phase (e.g. `5000:25:lz4`). Each on a freshly reloaded ledger (about 1.5 minutes each).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "5000:25,500:25,1000:25:lz4"
    )]
    sweep_variants: Vec<String>,
    /// Rows of the auditor's ledger (a realistic mix, loaded after the sweep phases).
    #[arg(long, default_value_t = 1_000_000)]
    audit_rows: i64,
    /// Also time the auditor on a 10,000,000-row ledger (about 6 minutes of the run; `--ten-million
    /// false` skips it).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    ten_million: bool,
    /// The Markdown report.
    #[arg(long, default_value = "bench/SWEEP.md")]
    out: PathBuf,
}

const SOURCES: [&str; 2] = ["github", "stripe"];

/// Two inline sources; the bench never verifies a signature, so the secrets are placeholders.
const SOURCES_JSON: &str = r#"[
  {"name": "stripe", "scheme": "stripe", "secrets": ["whsec_bench_placeholder"], "mode": "inline"},
  {"name": "github", "scheme": "github", "secrets": ["bench-placeholder"], "mode": "inline"}
]"#;

/// The auditor's sources: the bench's two and two more (one deferred), as a deployment with a
/// few providers has.
const AUDIT_SOURCES_JSON: &str = r#"[
  {"name": "stripe", "scheme": "stripe", "secrets": ["whsec_bench_placeholder"], "mode": "inline"},
  {"name": "github", "scheme": "github", "secrets": ["bench-placeholder"], "mode": "inline"},
  {"name": "shopify", "scheme": "shopify", "secrets": ["bench-placeholder"], "mode": "inline"},
  {"name": "stripe-deferred", "scheme": "stripe", "secrets": ["whsec_bench_placeholder"], "mode": "deferred"}
]"#;

/// The sources the per-source statements are timed for (the audit runs them once per source);
/// the table shows the slowest.
const AUDIT_SOURCE_NAMES: [&str; 4] = ["stripe", "github", "shopify", "stripe-deferred"];

/// Timed runs of each auditor statement (after 3 warm-up runs).
const AUDIT_RUNS: usize = 20;

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let started = Instant::now();
    let bench = Bench::new(args).await?;
    let report = bench.run().await?;
    if let Some(dir) = bench.args.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&bench.args.out, &report.markdown)
        .with_context(|| format!("writing {}", bench.args.out.display()))?;
    println!("{}", report.summary);
    println!(
        "report: {} (whole run {:.0} s)",
        bench.args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Prints a progress line to stderr with the time since start.
macro_rules! step {
    ($bench:expr, $($arg:tt)*) => {
        eprintln!("[{:>6.1} s] {}", $bench.t0.elapsed().as_secs_f64(), format!($($arg)*))
    };
}

struct Bench {
    args: Args,
    settings: DatabaseSettings,
    sources: Sources,
    /// The auditor's sources ([`AUDIT_SOURCES_JSON`]).
    audit_sources: Sources,
    /// Claim traffic.
    pool: Pool,
    /// Setup, statistics, the unbatched DELETE: no per-transaction limits.
    admin: tokio_postgres::Client,
    t0: Instant,
    /// Completed live events the duplicates are drawn from.
    completed: Arc<Mutex<Vec<LiveEvent>>>,
    next_id: Arc<AtomicU64>,
}

#[derive(Clone)]
struct LiveEvent {
    source: &'static str,
    id: String,
    body: Vec<u8>,
    digest: [u8; 32],
}

impl LiveEvent {
    fn new(n: u64) -> Self {
        let source = SOURCES[(n % 2) as usize];
        let id = format!("evt_live_{n:09}");
        // A realistic body: 1.0 to 1.8 KB of JSON.
        let pad_len = 900 + (n * 7919 % 800) as usize;
        let pad: String = std::iter::repeat_n(format!("{:016x}", n.wrapping_mul(0x9e37_79b9)), 64)
            .collect::<String>()
            .chars()
            .take(pad_len)
            .collect();
        let body = serde_json::to_vec(&serde_json::json!({
            "id": id, "object": "event", "type": "payment_intent.succeeded",
            "data": {"object": {"id": format!("pi_{n}"), "amount": 1000 + n, "currency": "usd",
                "description": pad}}
        }))
        .unwrap_or_default();
        let digest: [u8; 32] = Sha256::digest(&body).into();
        Self {
            source,
            id,
            body,
            digest,
        }
    }

    fn as_new(&self) -> NewEvent<'_> {
        NewEvent {
            source: self.source,
            event_id: &self.id,
            event_type: "payment_intent.succeeded",
            digest: &self.digest,
            identity: &self.digest,
            payload: Some(&self.body),
            replayed: false,
        }
    }
}

/// Latencies of one phase, microseconds.
#[derive(Default)]
struct Samples {
    /// New events: claim + `Tx::complete` (the whole inline transaction, handler empty).
    new: Vec<u64>,
    /// Duplicates through `shared::ledger::claim` (lookup with `claimed_at, dead_at` and the
    /// age check).
    dup_current: Vec<u64>,
    /// Duplicates through the BASELINE lookup.
    dup_baseline: Vec<u64>,
    errors: u64,
    unexpected: u64,
    first_error: Option<String>,
}

impl Samples {
    fn merge(&mut self, other: Samples) {
        self.new.extend(other.new);
        self.dup_current.extend(other.dup_current);
        self.dup_baseline.extend(other.dup_baseline);
        self.errors += other.errors;
        self.unexpected += other.unexpected;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// Percentile `q` (0..1) of sorted `v`, milliseconds.
fn pct(v: &[u64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1] as f64 / 1000.0
}

enum Background {
    Nothing,
    /// `shared::sweep::run` with these settings; it ends the phase when it finishes early.
    Sweep(SweepSettings),
    Delete,
}

#[derive(Default, Clone)]
struct Deletion {
    rows: u64,
    secs: f64,
    batches: u32,
    stopped: String,
}

#[derive(Default, Clone, Copy)]
struct ServerStats {
    lsn_bytes: f64,
    wal_fpi: i64,
    checkpoints_timed: i64,
    checkpoints_req: i64,
    autovacuum_count: i64,
    buffers_backend_fsync: i64,
}

struct Phase {
    name: String,
    /// How long the phase was measured (a sweep that finishes early ends it).
    window: Duration,
    /// The phase's planned length.
    planned: Duration,
    /// Seconds [`Bench::settle`] waited before it.
    settle_secs: f64,
    samples: Samples,
    deletion: Option<Deletion>,
    /// Server counters, after minus before (WAL bytes from the LSN).
    stats: ServerStats,
}

impl Bench {
    async fn new(args: Args) -> Result<Self> {
        let mut settings = DatabaseSettings::with_url(args.database_url.clone());
        settings.pool_size = args.connections;
        let admin = shared::db::connect(&settings).await?;
        Ok(Self {
            sources: Sources::from_json(SOURCES_JSON)?,
            audit_sources: Sources::from_json(AUDIT_SOURCES_JSON)?,
            pool: shared::db::pool(&settings)?,
            settings,
            admin,
            args,
            t0: Instant::now(),
            completed: Arc::new(Mutex::new(Vec::new())),
            next_id: Arc::new(AtomicU64::new(0)),
        })
    }

    async fn run(&self) -> Result<Report> {
        shared::db::migrate(&self.settings).await?;
        let facts = self.machine_facts().await?;
        step!(self, "loading {} expired rows", self.args.expired_rows);
        let load = self.load_expired(false).await?;
        step!(self, "loaded in {:.1} s; live rows", load);
        self.load_live().await?;
        self.vacuum_analyze().await?;
        let sizes = self.sizes().await?;

        step!(self, "EXPLAIN after 10 batches");
        let plan = self.explain_after_batches(10).await?;
        self.load_expired(true).await?; // put back the 10 batches' rows
        self.vacuum_analyze().await?;

        step!(self, "warm-up");
        self.traffic(Instant::now() + Duration::from_secs(3), None)
            .await?;

        let window = Duration::from_secs(self.args.phase_secs);
        let default = SweepSettings {
            max_batches: 1_000_000,
            margin_ms: 1,
            ..SweepSettings::default()
        };
        let mut phases = vec![
            self.phase("no sweep", window, Background::Nothing).await?,
            self.phase(
                &sweep_name(&default, None, true),
                window,
                Background::Sweep(default),
            )
            .await?,
        ];
        for variant in &self.args.sweep_variants {
            let mut parts = variant.split(':');
            let (Some(batch), Some(duty)) = (parts.next(), parts.next()) else {
                return Err(anyhow!(
                    "--sweep-variants takes batch_size:duty_percent[:wal_compression]"
                ));
            };
            let compression = parts.next().map(|c| c.trim().to_owned());
            let settings = SweepSettings {
                batch_size: batch.trim().parse()?,
                duty_percent: duty.trim().parse()?,
                ..default
            };
            let name = sweep_name(&settings, compression.as_deref(), false);
            step!(self, "reloading the expired rows for {name}");
            self.reload().await?;
            if let Some(method) = &compression {
                self.set_wal_compression(Some(method)).await?;
            }
            let phase = self.phase(&name, window, Background::Sweep(settings)).await;
            if compression.is_some() {
                self.set_wal_compression(None).await?;
            }
            phases.push(phase?);
        }

        step!(self, "reloading the expired rows for the single DELETE");
        self.reload().await?;
        phases.push(
            self.phase("single unbatched DELETE", window, Background::Delete)
                .await?,
        );
        self.vacuum_analyze().await?;
        phases.push(
            self.phase("no sweep (control, after)", window, Background::Nothing)
                .await?,
        );

        let mut audits = Vec::new();
        step!(self, "auditor: {}-row ledger", self.args.audit_rows);
        audits.push(self.auditor_ledger(self.args.audit_rows).await?);
        if self.args.ten_million {
            step!(self, "auditor: 10M-row ledger");
            audits.push(self.auditor_ledger(10_000_000).await?);
        }
        Ok(self.report(&facts, load, &sizes, &plan, &phases, &audits))
    }

    /// Sets `wal_compression` server-wide (`ALTER SYSTEM`, reload), or resets it with `None`.
    async fn set_wal_compression(&self, method: Option<&str>) -> Result<()> {
        let statement = match method {
            Some(m) => format!("ALTER SYSTEM SET wal_compression = '{m}'"),
            None => "ALTER SYSTEM RESET wal_compression".to_owned(),
        };
        self.admin.batch_execute(&statement).await?;
        self.admin.batch_execute("SELECT pg_reload_conf()").await?;
        // Backends read the new setting at their next command; give the postmaster a moment.
        tokio::time::sleep(Duration::from_millis(500)).await;
        Ok(())
    }

    /// Before a phase: `CHECKPOINT`, then wait until no autovacuum worker runs and the server
    /// wrote less than 64 KB of WAL in a second (the previous phase's background work is
    /// done), checkpointing again each time round. Returns the seconds it waited.
    async fn settle(&self) -> Result<f64> {
        let started = Instant::now();
        loop {
            self.admin.batch_execute("CHECKPOINT").await?;
            let before = self.server_stats().await?.lsn_bytes;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let wrote = self.server_stats().await?.lsn_bytes - before;
            let workers: i64 = self
                .admin
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE backend_type = 'autovacuum worker'",
                    &[],
                )
                .await?
                .get(0);
            if workers == 0 && wrote < 65_536.0 {
                break;
            }
            if started.elapsed() > Duration::from_secs(300) {
                step!(
                    self,
                    "not quiet after 300 s ({workers} autovacuum workers, {wrote:.0} WAL bytes/s): measuring anyway"
                );
                break;
            }
        }
        self.admin.batch_execute("CHECKPOINT").await?;
        Ok(started.elapsed().as_secs_f64())
    }

    async fn machine_facts(&self) -> Result<Vec<(String, String)>> {
        let mut facts = Vec::new();
        let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let model = cpu
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, m)| m.trim().to_owned())
            .unwrap_or_else(|| "unknown".to_owned());
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        facts.push(("CPU".to_owned(), format!("{cores} cores, {model}")));
        let mem = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        if let Some(total) = mem.lines().find(|l| l.starts_with("MemTotal")) {
            let kb: f64 = total
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            facts.push(("Memory".to_owned(), format!("{:.0} GiB", kb / 1048576.0)));
        }
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        facts.push((
            "Load average at start (1, 5, 15 min)".to_owned(),
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(", "),
        ));
        let version: String = self.admin.query_one("SELECT version()", &[]).await?.get(0);
        facts.push(("PostgreSQL".to_owned(), version));
        for row in self
            .admin
            .query(
                "SELECT name, setting || coalesce(' ' || unit, '') FROM pg_settings \
                 WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', \
                 'wal_level', 'shared_buffers', 'max_wal_size', 'min_wal_size', \
                 'checkpoint_timeout', 'checkpoint_completion_target', 'wal_compression', \
                 'autovacuum', 'effective_io_concurrency', 'work_mem') ORDER BY name",
                &[],
            )
            .await?
        {
            facts.push((format!("`{}`", row.get::<_, String>(0)), row.get(1)));
        }
        Ok(facts)
    }

    /// Loads the expired rows (`refill`: only those missing, after batches deleted some).
    /// Returns the seconds it took.
    async fn load_expired(&self, refill: bool) -> Result<f64> {
        let started = Instant::now();
        let sql = format!(
            "{LOAD_EXPIRED}{}",
            if refill {
                " ON CONFLICT (source, event_id) DO NOTHING"
            } else {
                ""
            }
        );
        self.admin
            .execute(&sql, &[&1i64, &self.args.expired_rows])
            .await
            .context("loading the expired rows")?;
        Ok(started.elapsed().as_secs_f64())
    }

    /// Deletes what expired rows are left and loads all of them again (a fresh ledger).
    async fn reload(&self) -> Result<()> {
        self.delete_unbatched().await?;
        self.vacuum_analyze().await?;
        let secs = self.load_expired(false).await?;
        step!(self, "reloaded in {secs:.1} s");
        self.vacuum_analyze().await
    }

    async fn load_live(&self) -> Result<()> {
        self.admin
            .execute(LOAD_LIVE, &[&1i64, &self.args.live_rows])
            .await
            .context("loading the live rows")?;
        Ok(())
    }

    async fn vacuum_analyze(&self) -> Result<()> {
        // Two messages: VACUUM refuses to run inside a multi-statement (implicit) transaction.
        self.admin
            .batch_execute("VACUUM (ANALYZE) webhook_event")
            .await?;
        self.admin.batch_execute("CHECKPOINT").await?;
        Ok(())
    }

    async fn sizes(&self) -> Result<Vec<(String, String)>> {
        let row = self
            .admin
            .query_one(
                "SELECT count(*), \
                 count(*) FILTER (WHERE claimed_at < now() - interval '30 days'), \
                 pg_size_pretty(pg_table_size('webhook_event')), \
                 pg_size_pretty(pg_indexes_size('webhook_event')), \
                 avg(octet_length(payload))::int8 \
                 FROM webhook_event",
                &[],
            )
            .await?;
        Ok(vec![
            ("Rows".to_owned(), row.get::<_, i64>(0).to_string()),
            ("Expired rows".to_owned(), row.get::<_, i64>(1).to_string()),
            ("Table (heap + TOAST)".to_owned(), row.get(2)),
            ("Indexes".to_owned(), row.get(3)),
            (
                "Mean payload bytes".to_owned(),
                row.get::<_, i64>(4).to_string(),
            ),
        ])
    }

    /// Runs `n` batches of the first source's expired keys as the sweep does, then the
    /// `EXPLAIN (ANALYZE, BUFFERS)` of the next one (rolled back).
    async fn explain_after_batches(&self, n: usize) -> Result<String> {
        let conn = self.pool.get().await?;
        let now = SystemTime::now();
        let cutoff = self.sources.retention(SOURCES[0]).completed_cutoff(now);
        let limit = SweepSettings::default().batch_size;
        let mut after = SystemTime::UNIX_EPOCH;
        for _ in 0..n {
            conn.begin().await?;
            let deleted = ledger::sweep::delete_expired(
                &conn,
                SOURCES[0],
                ledger::sweep::Expired::Completed,
                after,
                cutoff,
                limit,
            )
            .await?;
            conn.batch_execute("COMMIT").await?;
            after = deleted.last.unwrap_or(after);
        }
        let text = format!(
            "EXPLAIN (ANALYZE, BUFFERS) {}",
            ledger::sweep::DELETE_COMPLETED.text
        );
        let statement = self
            .admin
            .prepare_typed(
                &text,
                &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
            )
            .await?;
        self.admin.batch_execute("BEGIN").await?;
        let rows = self
            .admin
            .query(&statement, &[&SOURCES[0], &after, &cutoff, &limit])
            .await;
        self.admin.batch_execute("ROLLBACK").await?;
        let mut plan = String::new();
        for row in rows? {
            plan.push_str(row.get::<_, &str>(0));
            plan.push('\n');
        }
        Ok(plan)
    }

    async fn server_stats(&self) -> Result<ServerStats> {
        let row = self
            .admin
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8, \
                 (SELECT wal_fpi FROM pg_stat_wal), \
                 checkpoints_timed, checkpoints_req, buffers_backend_fsync, \
                 (SELECT autovacuum_count FROM pg_stat_user_tables \
                  WHERE relname = 'webhook_event') \
                 FROM pg_stat_bgwriter",
                &[],
            )
            .await?;
        Ok(ServerStats {
            lsn_bytes: row.get(0),
            wal_fpi: row.get(1),
            checkpoints_timed: row.get(2),
            checkpoints_req: row.get(3),
            buffers_backend_fsync: row.get(4),
            autovacuum_count: row.get(5),
        })
    }

    async fn phase(&self, name: &str, window: Duration, background: Background) -> Result<Phase> {
        let settle_secs = self.settle().await?;
        // Counters of other backends reach pg_stat_* within a second.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let before = self.server_stats().await?;
        step!(self, "phase: {name} (settled in {settle_secs:.0} s)");
        let deadline = Instant::now() + window;
        let finished = Arc::new(AtomicBool::new(false));
        let deleting = async {
            match background {
                Background::Nothing => Ok::<_, anyhow::Error>(None),
                Background::Sweep(settings) => {
                    let pool = shared::db::pool(&self.settings)?;
                    let conn = pool.get().await?;
                    let report = shared::sweep::run(
                        &conn,
                        &self.sources,
                        &settings,
                        SystemTime::now(),
                        move || deadline.saturating_duration_since(Instant::now()),
                    )
                    .await;
                    // Done early (or failed): the phase ends with the sweep.
                    finished.store(true, Ordering::Relaxed);
                    let report = report?;
                    Ok(Some(Deletion {
                        rows: report.deleted,
                        secs: report.duration_ms as f64 / 1000.0,
                        batches: report.batches,
                        stopped: format!("{:?}", report.stopped),
                    }))
                }
                Background::Delete => {
                    let started = Instant::now();
                    let rows = self.delete_unbatched().await?;
                    let secs = started.elapsed().as_secs_f64();
                    Ok(Some(Deletion {
                        rows,
                        secs,
                        batches: 1,
                        stopped: "Done".to_owned(),
                    }))
                }
            }
        };
        let (traffic, deletion) =
            tokio::join!(self.traffic(deadline, Some(finished.clone())), deleting);
        let ((samples, measured), deletion) = (traffic?, deletion?);
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let after = self.server_stats().await?;
        Ok(Phase {
            name: name.to_owned(),
            window: measured,
            planned: window,
            settle_secs,
            samples,
            deletion,
            stats: ServerStats {
                lsn_bytes: after.lsn_bytes - before.lsn_bytes,
                wal_fpi: after.wal_fpi - before.wal_fpi,
                checkpoints_timed: after.checkpoints_timed - before.checkpoints_timed,
                checkpoints_req: after.checkpoints_req - before.checkpoints_req,
                buffers_backend_fsync: after.buffers_backend_fsync - before.buffers_backend_fsync,
                autovacuum_count: after.autovacuum_count - before.autovacuum_count,
            },
        })
    }

    /// One unbatched `DELETE` of every expired completed row; returns the rows deleted.
    async fn delete_unbatched(&self) -> Result<u64> {
        let cutoff = Retention::default().completed_cutoff(SystemTime::now());
        Ok(self
            .admin
            .execute(
                "DELETE FROM webhook_event WHERE status = 'completed' AND claimed_at < $1",
                &[&cutoff],
            )
            .await?)
    }

    /// Paced claim traffic on every connection until `deadline`, or until `finished` is set
    /// (the phase's sweep is done). Returns the samples and how long it ran.
    async fn traffic(
        &self,
        deadline: Instant,
        finished: Option<Arc<AtomicBool>>,
    ) -> Result<(Samples, Duration)> {
        let started = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let period = Duration::from_secs_f64(self.args.connections as f64 / self.args.rate);
        let mut tasks = Vec::new();
        for task in 0..self.args.connections {
            let conn = self.pool.get().await?;
            let (stop, completed, next_id) =
                (stop.clone(), self.completed.clone(), self.next_id.clone());
            let every = self.args.duplicate_every.max(2);
            tasks.push(tokio::spawn(async move {
                let mut samples = Samples::default();
                // Spread the tasks' ticks over one period.
                tokio::time::sleep(period.mul_f64(task as f64 / 8.0)).await;
                let mut ticks = tokio::time::interval(period);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    ticks.tick().await;
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    n += 1;
                    let duplicate = if n % every == every / 2 {
                        let pool = completed.lock().map_or(None, |events| {
                            (!events.is_empty()).then(|| {
                                let pick = (n.wrapping_mul(2_654_435_761) as usize)
                                    % events.len().min(2_000);
                                events[events.len() - 1 - pick].clone()
                            })
                        });
                        pool
                    } else {
                        None
                    };
                    let outcome = match duplicate {
                        Some(event) => {
                            let baseline = (n / every) & 1 == 0;
                            let started = Instant::now();
                            let answered = if baseline {
                                baseline_duplicate(&conn, &event.as_new()).await
                            } else {
                                current_duplicate(&conn, &event.as_new()).await
                            };
                            let micros = started.elapsed().as_micros() as u64;
                            answered.inspect(|_| {
                                if baseline {
                                    samples.dup_baseline.push(micros);
                                } else {
                                    samples.dup_current.push(micros);
                                }
                            })
                        }
                        None => {
                            let event = LiveEvent::new(next_id.fetch_add(1, Ordering::Relaxed));
                            let started = Instant::now();
                            let won = claim_new(&conn, &event).await;
                            let micros = started.elapsed().as_micros() as u64;
                            won.inspect(|won| {
                                samples.new.push(micros);
                                if *won {
                                    if let Ok(mut events) = completed.lock() {
                                        events.push(event);
                                    }
                                }
                            })
                        }
                    };
                    match outcome {
                        Ok(true) => {}
                        Ok(false) => samples.unexpected += 1,
                        Err(error) => {
                            samples.errors += 1;
                            if samples.first_error.is_none() {
                                samples.first_error = Some(format!("{error:#}"));
                            }
                        }
                    }
                }
                samples
            }));
        }
        loop {
            let now = Instant::now();
            if now >= deadline || finished.as_ref().is_some_and(|f| f.load(Ordering::Relaxed)) {
                break;
            }
            tokio::time::sleep((deadline - now).min(Duration::from_millis(20))).await;
        }
        let ran = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        let mut all = Samples::default();
        for task in tasks {
            all.merge(task.await?);
        }
        all.new.sort_unstable();
        all.dup_current.sort_unstable();
        all.dup_baseline.sort_unstable();
        Ok((all, ran))
    }

    /// The auditor's ledger: `TRUNCATE`, then `rows` rows in the mix of [`LOAD_AUDIT_MIX`]
    /// (and 0.05% as many ordering ties), `VACUUM (ANALYZE)`, and every statement the audit
    /// issues timed on it.
    async fn auditor_ledger(&self, rows: i64) -> Result<AuditTimes> {
        self.admin
            .batch_execute(
                "TRUNCATE webhook_event, ordering_tie; UPDATE audit_run SET last_run_at = NULL",
            )
            .await?;
        let started = Instant::now();
        self.admin
            .execute(LOAD_AUDIT_MIX, &[&rows])
            .await
            .context("loading the auditor's ledger")?;
        self.admin
            .execute(LOAD_AUDIT_TIES, &[&(rows / 2000).max(10)])
            .await?;
        self.vacuum_analyze().await?;
        self.admin
            .batch_execute("VACUUM (ANALYZE) ordering_tie")
            .await?;
        let load_secs = started.elapsed().as_secs_f64();
        step!(
            self,
            "loaded {rows} rows in {load_secs:.0} s; timing the auditor"
        );
        let mut mix = Vec::new();
        for row in self
            .admin
            .query(
                "SELECT status::text, count(*) FROM webhook_event GROUP BY 1 ORDER BY 1",
                &[],
            )
            .await?
        {
            mix.push((row.get::<_, String>(0), row.get::<_, i64>(1)));
        }
        let past: i64 = self
            .admin
            .query_one(
                "SELECT count(*) FROM webhook_event \
                 WHERE status = 'completed' AND claimed_at < now() - interval '30 days'",
                &[],
            )
            .await?
            .get(0);
        mix.push(("completed past retention".to_owned(), past));
        let sizes = self.sizes().await?;

        let conn = self.pool.get().await?;
        let settings = AuditSettings::default();
        let now = SystemTime::now();
        // Warm: the whole audit a few times.
        for _ in 0..3 {
            shared::audit::peek(&conn, &self.audit_sources, &settings, now).await?;
        }
        let mut peek = Vec::new();
        let mut last_report = None;
        for _ in 0..AUDIT_RUNS {
            let t = Instant::now();
            let report = shared::audit::peek(&conn, &self.audit_sources, &settings, now).await?;
            peek.push(t.elapsed().as_micros() as u64);
            last_report = Some(report);
        }
        peek.sort_unstable();
        let findings = last_report.map_or_else(String::new, |r| {
            let total =
                |f: fn(&shared::audit::SourceAudit) -> u64| r.sources.values().map(f).sum::<u64>();
            format!(
                "stuck_claims {}, backlog_due {}, past_retention {}, dead_letters {}, \
                 dead_letters_new {}, ordering_ties_new {} (all sources)",
                total(|a| a.stuck_claims),
                total(|a| a.backlog_due),
                total(|a| a.past_retention),
                total(|a| a.dead_letters),
                total(|a| a.dead_letters_new),
                total(|a| a.ordering_ties_new)
            )
        });

        // The parameters as `shared::audit` issues them on a first run at `now`.
        let cap = shared::audit::CAP as i64;
        let keys = shared::audit::STUCK_KEYS_LOGGED as i64;
        let pids = shared::audit::IDLE_PIDS_LOGGED as i64;
        let idle_after = settings.idle_in_transaction_after_secs as i64;
        let claimed_before = now - Duration::from_secs(settings.stuck_after_secs);
        let since = now - shared::audit::FIRST_RUN_WINDOW;
        use shared::ledger::audit as q;
        let global: Vec<(&str, &'static Sql, Vec<&(dyn ToSql + Sync)>)> = vec![
            ("LOCK_RUN", &q::LOCK_RUN, vec![]),
            (
                "STUCK_SUMMARY",
                &q::STUCK_SUMMARY,
                vec![&claimed_before, &now, &cap],
            ),
            (
                "STUCK_KEYS",
                &q::STUCK_KEYS,
                vec![&claimed_before, &now, &keys],
            ),
            ("BACKLOG", &q::BACKLOG, vec![&now, &cap]),
            ("TIES_SINCE", &q::TIES_SINCE, vec![&since, &now, &cap]),
            (
                "IDLE_IN_TRANSACTION",
                &q::IDLE_IN_TRANSACTION,
                vec![&idle_after, &pids],
            ),
            (
                "sweep SOURCES_PRESENT",
                &shared::ledger::sweep::SOURCES_PRESENT,
                vec![],
            ),
            ("RECORD_RUN", &q::RECORD_RUN, vec![&now]),
        ];
        let mut times = Vec::new();
        for (name, sql, params) in &global {
            let runs = time_statement(&conn, sql, params).await?;
            let plan = self.explain_analyze(sql, params).await?;
            times.push(StatementTime {
                name: (*name).to_owned(),
                median_ms: pct(&runs, 0.5),
                p95_ms: pct(&runs, 0.95),
                plan,
            });
        }
        // Per source: every source timed, the slowest (by median) reported.
        let per_source: [(&str, &'static Sql); 4] = [
            ("sweep OLDEST_KEY", &shared::ledger::sweep::OLDEST_KEY),
            ("NEWEST_KEY", &q::NEWEST_KEY),
            ("PAST_RETENTION", &q::PAST_RETENTION),
            ("DEAD_LETTERS", &q::DEAD_LETTERS),
        ];
        for (name, sql) in per_source {
            let mut slowest: Option<StatementTime> = None;
            for source in AUDIT_SOURCE_NAMES {
                let retention = self.audit_sources.retention(source);
                let (completed_cutoff, dead_cutoff) =
                    (retention.completed_cutoff(now), retention.dead_cutoff(now));
                let params: Vec<&(dyn ToSql + Sync)> = match name {
                    "PAST_RETENTION" => vec![&source, &completed_cutoff, &dead_cutoff, &cap],
                    "DEAD_LETTERS" => vec![&source, &since, &now, &cap],
                    _ => vec![&source],
                };
                let runs = time_statement(&conn, sql, &params).await?;
                let median = pct(&runs, 0.5);
                if slowest.as_ref().is_none_or(|s| median > s.median_ms) {
                    slowest = Some(StatementTime {
                        name: format!("{name} (slowest source: {source})"),
                        median_ms: median,
                        p95_ms: pct(&runs, 0.95),
                        plan: self.explain_analyze(sql, &params).await?,
                    });
                }
            }
            times.extend(slowest);
        }
        Ok(AuditTimes {
            rows,
            load_secs,
            mix,
            sizes,
            statements: times,
            peek_median_ms: pct(&peek, 0.5),
            peek_p95_ms: pct(&peek, 0.95),
            findings,
        })
    }

    /// `EXPLAIN (ANALYZE, BUFFERS)` of `sql` with `params`, with custom plans as the audit
    /// runs it, rolled back.
    async fn explain_analyze(&self, sql: &Sql, params: &[&(dyn ToSql + Sync)]) -> Result<String> {
        let statement = self
            .admin
            .prepare_typed(
                &format!("EXPLAIN (ANALYZE, BUFFERS) {}", sql.text),
                sql.types,
            )
            .await?;
        self.admin
            .batch_execute("BEGIN; SET LOCAL plan_cache_mode = force_custom_plan")
            .await?;
        let rows = self.admin.query(&statement, params).await;
        self.admin.batch_execute("ROLLBACK").await?;
        let mut plan = String::new();
        for row in rows? {
            plan.push_str(row.get::<_, &str>(0));
            plan.push('\n');
        }
        Ok(plan)
    }

    fn report(
        &self,
        facts: &[(String, String)],
        load_secs: f64,
        sizes: &[(String, String)],
        plan: &str,
        phases: &[Phase],
        audits: &[AuditTimes],
    ) -> Report {
        let mut md = String::new();
        let a = &self.args;
        let _ = writeln!(md, "# Sweep benchmark (`make bench-sweep`)\n");
        let _ = writeln!(
            md,
            "Generated by `bench/src/main.rs` on {} (regenerated on every run). Claim traffic: \
             {} connections, {:.0} claims/s offered in all (paced), one in {} a duplicate of a \
             recently completed event (half through `shared::ledger::claim`, half through the \
             baseline lookup), phases of {} s in the order below. Before every phase: \
             `CHECKPOINT`, then wait until no autovacuum worker runs and the server writes \
             under 64 KB of WAL a second (the previous phase's background work is done), so \
             each phase starts from the same state. A sweep phase is measured only while \
             `shared::sweep::run` runs (its `max_batches` raised so only time stops it). A \
             new claim's latency is the whole inline transaction: `claim` (BEGIN + INSERT) and \
             `Tx::complete` (completion + COMMIT), with an empty handler.\n",
            shared::timestamp::rfc3339(SystemTime::now()),
            a.connections,
            a.rate,
            a.duplicate_every,
            a.phase_secs
        );
        let _ = writeln!(md, "## Machine\n\n| | |\n|---|---|");
        for (k, v) in facts {
            let _ = writeln!(md, "| {k} | {v} |");
        }
        let _ = writeln!(
            md,
            "\nThe machine's 2 cores are shared with other builds while this runs: compare the \
             phases of this one run with each other, not with another run.\n"
        );
        let _ = writeln!(md, "## Ledger\n");
        let _ = writeln!(
            md,
            "Loaded with one `INSERT ... SELECT generate_series` in {load_secs:.1} s \
             ({:.0} rows/s): sources `github` and `stripe` alternating, claimed 60 to 31 days \
             ago in insertion order (a ledger is appended in time order), payloads 1.0-1.8 KB \
             (stored inline, uncompressed), all `completed` with a response; plus {} recent \
             rows. `VACUUM (ANALYZE)` after every load.\n",
            a.expired_rows as f64 / load_secs,
            a.live_rows
        );
        for (k, v) in sizes {
            let _ = writeln!(md, "- {k}: {v}");
        }
        let _ = writeln!(md, "\n## Results per phase\n");
        let _ = writeln!(
            md,
            "Claims: new events only (claim + complete + COMMIT). rows/s deleted: rows over the \
             sweep's own wall time. WAL MB/s over the measured window.\n"
        );
        let _ = writeln!(
            md,
            "| phase | measured s | new claims | claims/s (all) | p50 ms | p99 ms | p99.9 ms | p99 vs no sweep | target (≤ +20%) | rows/s deleted | WAL MB/s | checkpoints requested | errors |"
        );
        let _ = writeln!(
            md,
            "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"
        );
        let base_p99 = phases
            .first()
            .map_or(f64::NAN, |p| pct(&p.samples.new, 0.99));
        for p in phases {
            let s = &p.samples;
            let total = s.new.len() + s.dup_current.len() + s.dup_baseline.len();
            let p99 = pct(&s.new, 0.99);
            let secs = p.window.as_secs_f64();
            let rise = (p99 / base_p99 - 1.0) * 100.0;
            let target = if p.name.starts_with("batched sweep") {
                if rise <= 20.0 {
                    "MET"
                } else {
                    "NOT MET"
                }
            } else {
                ""
            };
            let _ = writeln!(
                md,
                "| {} | {secs:.1} | {} | {:.0} | {:.2} | {p99:.2} | {:.2} | {rise:+.0}% | {target} | {} | {:.1} | {} | {} |",
                p.name,
                s.new.len(),
                total as f64 / secs,
                pct(&s.new, 0.50),
                pct(&s.new, 0.999),
                p.deletion
                    .as_ref()
                    .map_or(String::new(), |d| format!("{:.0}", d.rows as f64 / d.secs)),
                p.stats.lsn_bytes / 1_048_576.0 / secs,
                p.stats.checkpoints_req,
                s.errors + s.unexpected
            );
        }
        let errors: Vec<&str> = phases
            .iter()
            .filter_map(|p| p.samples.first_error.as_deref())
            .collect();
        if !errors.is_empty() {
            let _ = writeln!(md, "\nFirst error: `{}`", errors[0]);
        }
        let _ = writeln!(md, "\nServer side, per phase (after minus before):\n");
        let _ = writeln!(
            md,
            "| phase | settled s before | WAL MB | full-page images | checkpoints (timed/requested) | autovacuums of webhook_event | backend fsyncs | max ms |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
        for p in phases {
            let st = &p.stats;
            let _ = writeln!(
                md,
                "| {} | {:.0} | {:.0} | {} | {}/{} | {} | {} | {:.1} |",
                p.name,
                p.settle_secs,
                st.lsn_bytes / 1_048_576.0,
                st.wal_fpi,
                st.checkpoints_timed,
                st.checkpoints_req,
                st.autovacuum_count,
                st.buffers_backend_fsync,
                pct(&p.samples.new, 1.0)
            );
        }
        let _ = writeln!(md, "\n## Deletion rates\n");
        let _ = writeln!(
            md,
            "| phase | rows deleted | ran s (of the phase's s) | rows/s | batches | mean ms per batch + pause | rows per 5 minutes at this rate | stopped |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---|");
        for p in phases {
            if let Some(d) = &p.deletion {
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.1} ({:.0}) | {:.0} | {} | {:.0} | {:.0} | {} |",
                    p.name,
                    d.rows,
                    d.secs,
                    p.planned.as_secs_f64(),
                    d.rows as f64 / d.secs,
                    d.batches,
                    d.secs * 1000.0 / f64::from(d.batches.max(1)),
                    d.rows as f64 / d.secs * 300.0,
                    d.stopped
                );
            }
        }
        let _ = writeln!(
            md,
            "\n`OutOfTime`: the sweep was still deleting when the phase ended (it ran the whole \
             phase); `Done`: it ran out of expired rows and ended the phase early. The single \
             DELETE runs to the end however long it takes, and claims are measured over the \
             whole phase window (so its p99 is diluted by the seconds after it finished)."
        );
        let _ = writeln!(md, "\n## The hot duplicate\n");
        let _ = writeln!(
            md,
            "A duplicate of a completed event: the INSERT conflicts, `ROLLBACK` and the lookup \
             are pipelined, the stored response is the answer. **current**: \
             `shared::ledger::claim` (the lookup reads `claimed_at, dead_at` too and \
             `EventRow::is_expired` judges the age); **baseline**: the same statements with the \
             lookup as it was before retention (text reproduced in `bench/src/main.rs`, \
             `BASELINE_LOOKUP`) and no age check. Interleaved on the same connections in every \
             phase.\n"
        );
        let _ = writeln!(
            md,
            "| phase | current n | current p50 ms | current p99 ms | baseline n | baseline p50 ms | baseline p99 ms | p50 ratio | p99 ratio |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        let mut all_current = Vec::new();
        let mut all_baseline = Vec::new();
        let mut dup_rows = Vec::new();
        for p in phases {
            let s = &p.samples;
            all_current.extend_from_slice(&s.dup_current);
            all_baseline.extend_from_slice(&s.dup_baseline);
            dup_rows.push((
                p.name.clone(),
                s.dup_current.clone(),
                s.dup_baseline.clone(),
            ));
        }
        all_current.sort_unstable();
        all_baseline.sort_unstable();
        dup_rows.push((
            "**all phases**".to_owned(),
            all_current.clone(),
            all_baseline.clone(),
        ));
        for (name, c, b) in &dup_rows {
            let _ = writeln!(
                md,
                "| {name} | {} | {:.3} | {:.3} | {} | {:.3} | {:.3} | {:.2} | {:.2} |",
                c.len(),
                pct(c, 0.5),
                pct(c, 0.99),
                b.len(),
                pct(b, 0.5),
                pct(b, 0.99),
                pct(c, 0.5) / pct(b, 0.5),
                pct(c, 0.99) / pct(b, 0.99)
            );
        }
        let _ = writeln!(
            md,
            "\n## The batch statement's plan\n\n`EXPLAIN (ANALYZE, BUFFERS)` of \
             `shared::ledger::sweep::DELETE_COMPLETED` (source `{}`, batch {}) after 10 batches \
             of it have run on the {}-row ledger, the keyset `$2` = the 10th batch's last \
             `claimed_at` (rolled back):\n\n```\n{}```\n",
            SOURCES[0],
            SweepSettings::default().batch_size,
            a.expired_rows + a.live_rows,
            plan
        );
        let _ = writeln!(md, "{}\n", plan_sentence(plan));
        md.push_str(&audit_section(audits));
        md.push_str(&verdict_section(phases));
        md.push_str(&findings_section(phases, audits));
        let mut summary = String::new();
        for p in phases {
            let s = &p.samples;
            let _ = writeln!(
                summary,
                "{:<42} new claims p50 {:>7.2} ms  p99 {:>7.2} ms  p99.9 {:>7.2} ms  errors {}{}",
                p.name,
                pct(&s.new, 0.5),
                pct(&s.new, 0.99),
                pct(&s.new, 0.999),
                s.errors + s.unexpected,
                p.deletion.as_ref().map_or(String::new(), |d| format!(
                    "  deleted {} in {:.1} s ({:.0} rows/s)",
                    d.rows,
                    d.secs,
                    d.rows as f64 / d.secs
                ))
            );
        }
        let _ = writeln!(
            summary,
            "duplicate p50/p99: current {:.3}/{:.3} ms, baseline {:.3}/{:.3} ms",
            pct(&all_current, 0.5),
            pct(&all_current, 0.99),
            pct(&all_baseline, 0.5),
            pct(&all_baseline, 0.99)
        );
        summary.push_str(verdict_line(phases).as_str());
        for a in audits {
            let slowest = a
                .statements
                .iter()
                .max_by(|x, y| x.median_ms.total_cmp(&y.median_ms));
            let _ = write!(
                summary,
                "\nauditor at {} rows: peek median {:.1} ms (p95 {:.1}); slowest statement {}",
                a.rows,
                a.peek_median_ms,
                a.peek_p95_ms,
                slowest.map_or(String::new(), |s| format!(
                    "{} median {:.2} ms (p95 {:.2})",
                    s.name, s.median_ms, s.p95_ms
                ))
            );
        }
        Report {
            markdown: md,
            summary,
        }
    }
}

struct Report {
    markdown: String,
    summary: String,
}

/// The auditor timed on one ledger.
struct AuditTimes {
    rows: i64,
    load_secs: f64,
    /// Rows by status, and completed past retention.
    mix: Vec<(String, i64)>,
    sizes: Vec<(String, String)>,
    statements: Vec<StatementTime>,
    peek_median_ms: f64,
    peek_p95_ms: f64,
    /// What the audit reported, in one line.
    findings: String,
}

struct StatementTime {
    name: String,
    median_ms: f64,
    p95_ms: f64,
    /// `EXPLAIN (ANALYZE, BUFFERS)`.
    plan: String,
}

impl StatementTime {
    /// The plan's top node and the indexes it reads, e.g. `Limit; webhook_event_due_idx`.
    fn plan_summary(&self) -> String {
        let top = self
            .plan
            .lines()
            .next()
            .and_then(|l| l.split("  (").next())
            .unwrap_or("?")
            .trim()
            .to_owned();
        let mut indexes: Vec<String> = Vec::new();
        for line in self.plan.lines() {
            let Some(name) = line
                .find(" using ")
                .map(|at| &line[at + 7..])
                .or_else(|| {
                    line.find("Bitmap Index Scan on ")
                        .map(|at| &line[at + 21..])
                })
                .and_then(|rest| rest.split_whitespace().next())
            else {
                continue;
            };
            let scan = if line.contains("Index Only Scan") {
                " (index only)"
            } else if line.contains("Bitmap") {
                " (bitmap)"
            } else {
                ""
            };
            let entry = format!("`{name}`{scan}");
            if !name.is_empty() && !indexes.contains(&entry) {
                indexes.push(entry);
            }
        }
        if self.plan.contains("Seq Scan on webhook_event") {
            indexes.push("**Seq Scan on webhook_event**".to_owned());
        }
        if indexes.is_empty() {
            top
        } else {
            format!("{top}; {}", indexes.join(", "))
        }
    }

    /// The plan's `Execution Time`, milliseconds.
    fn execution_ms(&self) -> f64 {
        self.plan
            .lines()
            .find_map(|l| l.trim().strip_prefix("Execution Time: "))
            .and_then(|v| v.trim_end_matches(" ms").parse().ok())
            .unwrap_or(f64::NAN)
    }
}

/// `sql` with `params` on `conn` inside one transaction with custom plans (as the audit runs
/// it), rolled back: 3 warm-up runs, then [`AUDIT_RUNS`] timed ones (microseconds, sorted;
/// client round trip included).
async fn time_statement(
    conn: &Connection,
    sql: &'static Sql,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<u64>> {
    conn.begin().await?;
    conn.batch_execute("SET LOCAL plan_cache_mode = force_custom_plan")
        .await?;
    let statement = conn.prepare(sql).await?;
    let mut times = Vec::with_capacity(AUDIT_RUNS);
    for run in 0..AUDIT_RUNS + 3 {
        let started = Instant::now();
        conn.query(&statement, params).await?;
        if run >= 3 {
            times.push(started.elapsed().as_micros() as u64);
        }
    }
    conn.batch_execute("ROLLBACK").await?;
    times.sort_unstable();
    Ok(times)
}

/// A sweep phase's name.
fn sweep_name(settings: &SweepSettings, compression: Option<&str>, default: bool) -> String {
    format!(
        "batched sweep ({}{} rows, duty {}%{})",
        if default { "default: " } else { "" },
        settings.batch_size,
        settings.duty_percent,
        compression.map_or(String::new(), |c| format!(", wal_compression={c}"))
    )
}

fn verdict_line(phases: &[Phase]) -> String {
    let (Some(base), Some(sweep)) = (phases.first(), phases.get(1)) else {
        return String::new();
    };
    let (b, s) = (pct(&base.samples.new, 0.99), pct(&sweep.samples.new, 0.99));
    let rise = (s / b - 1.0) * 100.0;
    format!(
        "target (batched sweep raises claim p99 by at most 20%): {} ({:.2} ms -> {:.2} ms, {:+.0}%)",
        if rise <= 20.0 { "MET" } else { "NOT MET" },
        b,
        s,
        rise
    )
}

fn verdict_section(phases: &[Phase]) -> String {
    let mut md = format!("\n## Verdict\n\n{}\n\n", verdict_line(phases));
    let quiet = |name: &str| phases.iter().find(|p| p.name == name);
    let (Some(base), control) = (quiet("no sweep"), quiet("no sweep (control, after)")) else {
        return md;
    };
    let b99 = pct(&base.samples.new, 0.99);
    let c99 = control.map_or(f64::NAN, |c| pct(&c.samples.new, 0.99));
    let _ = writeln!(
        md,
        "Each phase against the first no-sweep phase ({b99:.2} ms) and the control at the end \
         ({c99:.2} ms); WAL written per second of the phase:\n"
    );
    let _ = writeln!(
        md,
        "| phase | p99 ms | vs no sweep | vs control | WAL MB/s | full-page images/s |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
    for p in phases {
        let p99 = pct(&p.samples.new, 0.99);
        let secs = p.window.as_secs_f64();
        let _ = writeln!(
            md,
            "| {} | {p99:.2} | {:+.0}% | {:+.0}% | {:.1} | {:.0} |",
            p.name,
            (p99 / b99 - 1.0) * 100.0,
            (p99 / c99 - 1.0) * 100.0,
            p.stats.lsn_bytes / 1_048_576.0 / secs,
            p.stats.wal_fpi as f64 / secs
        );
    }
    md
}

/// The auditor's section: one table of every statement at every ledger size, the whole
/// `peek`, and the plans.
fn audit_section(audits: &[AuditTimes]) -> String {
    let mut md = "## Auditor query times\n\n".to_owned();
    let _ = writeln!(
        md,
        "Each statement as `shared::audit` issues it on a first run (`now` = the timing's start, \
         stuck after 300 s, the window since the last run = the 5 minutes before `now`, caps \
         `CAP` = {}, 50 keys, 50 pids; per-source statements, which the audit runs once per source, \
         timed for each of the four sources and the slowest shown), on one warm connection, inside a transaction with \
         `plan_cache_mode = force_custom_plan` as the audit sets it: 3 warm-up runs, then the \
         median and p95 of {AUDIT_RUNS} (client round trip included). `peek`: the whole \
         `shared::audit::peek` (its own transaction, four sources), same count.\n",
        shared::audit::CAP
    );
    for a in audits {
        let _ = writeln!(
            md,
            "**{} rows** (loaded with `LOAD_AUDIT_MIX` in {:.0} s, then `VACUUM (ANALYZE)`): {}. \
             {}. The audit found: {}.\n",
            a.rows,
            a.load_secs,
            a.mix
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            a.sizes
                .iter()
                .filter(|(k, _)| k.starts_with("Table") || k.starts_with("Indexes"))
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            a.findings
        );
    }
    let mut header = "| statement |".to_owned();
    let mut rule = "|---|".to_owned();
    for a in audits {
        let _ = write!(
            header,
            " {0} median ms | {0} p95 ms | {0} EXPLAIN ANALYZE ms |",
            millions(a.rows)
        );
        rule.push_str("---:|---:|---:|");
    }
    let _ = write!(
        header,
        " plan at {}: top node; indexes |",
        audits.last().map_or(String::new(), |a| millions(a.rows))
    );
    rule.push_str("---|");
    let _ = writeln!(md, "{header}\n{rule}");
    let Some(last) = audits.last() else {
        return md;
    };
    for (i, st) in last.statements.iter().enumerate() {
        let mut row = format!("| `{}` |", st.name);
        for a in audits {
            let t = &a.statements[i];
            let _ = write!(
                row,
                " {:.2} | {:.2} | {:.2} |",
                t.median_ms,
                t.p95_ms,
                t.execution_ms()
            );
        }
        let _ = write!(row, " {} |", st.plan_summary());
        let _ = writeln!(md, "{row}");
    }
    let mut row = "| **whole `peek`** |".to_owned();
    for a in audits {
        let _ = write!(row, " {:.2} | {:.2} | |", a.peek_median_ms, a.peek_p95_ms);
    }
    let _ = writeln!(md, "{row} |");
    let over: Vec<&StatementTime> = last
        .statements
        .iter()
        .filter(|s| s.median_ms > 10.0 || s.p95_ms > 10.0)
        .collect();
    let _ = writeln!(
        md,
        "\nTarget (each query under 10 ms at {} rows): {}.\n",
        last.rows,
        if over.is_empty() {
            "MET (median and p95 of every statement)".to_owned()
        } else {
            format!(
                "NOT MET by {}",
                over.iter()
                    .map(|s| format!(
                        "`{}` ({:.1} ms median, {:.1} ms p95)",
                        s.name, s.median_ms, s.p95_ms
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    let _ = writeln!(
        md,
        "<details><summary>EXPLAIN (ANALYZE, BUFFERS) of every statement at {} rows</summary>\n",
        last.rows
    );
    for st in &last.statements {
        let _ = writeln!(md, "`{}`:\n\n```\n{}```\n", st.name, st.plan);
    }
    let _ = writeln!(md, "</details>\n");
    md
}

fn millions(rows: i64) -> String {
    if rows % 1_000_000 == 0 {
        format!("{}M", rows / 1_000_000)
    } else {
        format!("{rows}")
    }
}

/// The findings, computed from the numbers of this run.
fn findings_section(phases: &[Phase], audits: &[AuditTimes]) -> String {
    let mut md = "\n## Findings (computed by the program from this run's numbers)\n\n".to_owned();
    let p99 = |p: &Phase| pct(&p.samples.new, 0.99);
    let Some(base) = phases.first() else {
        return md;
    };
    let b99 = p99(base);
    if let Some(control) = phases
        .iter()
        .find(|p| p.name.starts_with("no sweep (control"))
    {
        let c99 = p99(control);
        let drift = (c99 / b99 - 1.0) * 100.0;
        let _ = writeln!(
            md,
            "- **Noise.** The two no-sweep phases (first and last, same traffic) had claim p99 \
             {b99:.2} ms and {c99:.2} ms ({drift:+.0}%). {}",
            if drift.abs() > 20.0 {
                "That difference is itself larger than the 20% target: read a sweep phase's \
                 rise against both."
            } else {
                "Within the 20% target: the comparison below is meaningful."
            }
        );
    }
    let defaults = SweepSettings::default();
    let mut candidates = Vec::new();
    for p in phases
        .iter()
        .filter(|p| p.name.starts_with("batched sweep"))
    {
        let Some(d) = &p.deletion else { continue };
        let rise = (p99(p) / b99 - 1.0) * 100.0;
        let rate = d.rows as f64 / d.secs;
        let met = rise <= 20.0;
        let _ = writeln!(
            md,
            "- **{}**: claim p99 {:.2} ms ({rise:+.0}% vs no sweep: {}), p99.9 {:.2} ms; deleted \
             {} rows in {:.1} s ({rate:.0} rows/s, {:.0} per 5 minutes at that rate), WAL \
             {:.1} MB/s, {} requested checkpoints; stopped `{}`{}.",
            p.name,
            p99(p),
            if met { "target MET" } else { "target NOT MET" },
            pct(&p.samples.new, 0.999),
            d.rows,
            d.secs,
            rate * 300.0,
            p.stats.lsn_bytes / 1_048_576.0 / p.window.as_secs_f64(),
            p.stats.checkpoints_req,
            d.stopped,
            if d.stopped == "Done" {
                format!(
                    " after {:.1} s of the {:.0} s phase (measured only while it ran)",
                    p.window.as_secs_f64(),
                    p.planned.as_secs_f64()
                )
            } else {
                String::new()
            }
        );
        if met && rate >= 1000.0 {
            candidates.push((p, rise, rate));
        }
    }
    match candidates.iter().max_by(|a, b| a.2.total_cmp(&b.2)) {
        Some((p, rise, rate)) => {
            let _ = writeln!(
                md,
                "- **Recommendation.** Of the sweeps that met the target and still delete at \
                 least 1,000 rows/s (300,000 per 5-minute run), the fastest is **{}**: claim p99 \
                 {rise:+.0}% over no sweep at {rate:.0} rows/s.",
                p.name
            );
        }
        None => {
            let best = phases
                .iter()
                .filter(|p| p.name.starts_with("batched sweep"))
                .min_by(|a, b| p99(a).total_cmp(&p99(b)));
            let _ = writeln!(
                md,
                "- **No sweep variant met the target** with at least 1,000 rows/s.{}",
                best.map_or(String::new(), |p| format!(
                    " The lowest claim p99 was {} ({:.2} ms, {:+.0}%).",
                    p.name,
                    p99(p),
                    (p99(p) / b99 - 1.0) * 100.0
                ))
            );
        }
    }
    let _ = writeln!(
        md,
        "- **Rows per run.** A run deletes at most `max_batches` × `batch_size` rows \
         (shared default {} × {} = {}; the bench lifts `max_batches` so only time stops it): \
         with 1,000-row batches the default {} batches is 100,000 rows per run, below 300,000, \
         so a smaller batch needs `max_batches` ≥ 300.",
        defaults.max_batches,
        defaults.batch_size,
        u64::from(defaults.max_batches) * defaults.batch_size as u64,
        defaults.max_batches
    );
    if let Some(p) = phases.iter().find(|p| p.name == "single unbatched DELETE") {
        if let Some(d) = &p.deletion {
            let _ = writeln!(
                md,
                "- **Single unbatched DELETE**: {} rows in {:.1} s ({:.0} rows/s); claim p99 over \
                 its {:.0} s window {:.2} ms, p99.9 {:.2} ms, max {:.1} ms; WAL {:.0} MB.",
                d.rows,
                d.secs,
                d.rows as f64 / d.secs,
                p.window.as_secs_f64(),
                p99(p),
                pct(&p.samples.new, 0.999),
                pct(&p.samples.new, 1.0),
                p.stats.lsn_bytes / 1_048_576.0
            );
        }
    }
    if let Some(last) = audits.last() {
        let slow: Vec<String> = last
            .statements
            .iter()
            .filter(|s| s.median_ms > 10.0 || s.p95_ms > 10.0)
            .map(|s| format!("`{}` ({:.1} ms median)", s.name, s.median_ms))
            .collect();
        let slowest = last
            .statements
            .iter()
            .max_by(|x, y| x.p95_ms.total_cmp(&y.p95_ms));
        let _ = writeln!(
            md,
            "- **Auditor at {} rows**: {}; the whole `peek` (every statement, four sources) \
             median {:.1} ms, p95 {:.1} ms.",
            last.rows,
            if slow.is_empty() {
                format!(
                    "every statement under 10 ms (slowest p95: {})",
                    slowest.map_or(String::new(), |s| format!(
                        "`{}` {:.2} ms",
                        s.name, s.p95_ms
                    ))
                )
            } else {
                format!("over 10 ms: {}", slow.join(", "))
            },
            last.peek_median_ms,
            last.peek_p95_ms
        );
    }
    md
}

/// One sentence on what the plan shows, from its text.
fn plan_sentence(plan: &str) -> String {
    let tid = plan.contains("Tid Scan");
    let index = plan
        .lines()
        .find(|l| l.contains("Index Scan") || l.contains("Index Only Scan"))
        .map(|l| l.trim().trim_start_matches("->").trim().to_owned());
    let lines: Vec<&str> = plan.lines().collect();
    let buffers_after = |node: &str| {
        lines
            .iter()
            .position(|l| l.contains(node))
            .and_then(|at| {
                lines[at..]
                    .iter()
                    .find(|l| l.trim_start().starts_with("Buffers:"))
            })
            .map_or("?".to_owned(), |l| {
                l.trim().trim_start_matches("Buffers:").trim().to_owned()
            })
    };
    let rows = |node: &str| {
        lines
            .iter()
            .find(|l| l.contains(node))
            .and_then(|l| l.split("rows=").nth(2))
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("?")
            .to_owned()
    };
    format!(
        "What it shows: the DELETE is {} over the ARRAY of ctids ({} rows, buffers {}), and the \
         inner SELECT {} ({} rows, buffers {}): the work is proportional to the batch, not to \
         the ledger or to what earlier batches already emptied.",
        if tid {
            "a TID scan"
        } else {
            "NOT a TID scan (check the plan)"
        },
        rows("Tid Scan"),
        buffers_after("Tid Scan"),
        index.map_or(
            "is not an index scan (check the plan)".to_owned(),
            |i| format!(
                "is one range of `{}` starting at the keyset (`claimed_at >= $2`)",
                i.split(" on ")
                    .next()
                    .unwrap_or(&i)
                    .trim_start_matches("Index Scan using ")
            )
        ),
        rows("Index Scan"),
        buffers_after("Index Scan"),
    )
}

/// The expired rows: `$1..=$2` numbered, `github`/`stripe` alternating, claimed from 60 days
/// ago to 31 days ago in insertion order, 1.0-1.8 KB payloads.
const LOAD_EXPIRED: &str = "\
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, payload_identity, status, attempts,
     response_status, response_body, claimed_at, completed_at)
SELECT source, 'evt_old_' || i, 'payment_intent.succeeded', digest,
       convert_to(rpad('{\"id\":\"evt_old_' || i || '\",\"object\":\"event\",\"data\":\"',
                       1000 + (i * 7919 % 800)::int, md5(i::text)), 'UTF8'),
       digest, 'completed', 1, 200, '{\"received\":true}'::jsonb, at, at + interval '40 ms'
FROM (
    SELECT i,
           CASE WHEN i % 2 = 0 THEN 'stripe' ELSE 'github' END AS source,
           sha256(int8send(i)) AS digest,
           now() - interval '60 days' + (i - $1) * (interval '29 days' / ($2 - $1 + 1)) AS at
    FROM generate_series($1::int8, $2::int8) AS i
) AS g";

/// The auditor's ledger, `$1` rows numbered from 0, four sources (by a multiplicative hash of
/// the row number, so each status class below spreads over all four):
/// - `completed`: the bulk, claimed over the last 29 days 23 hours in insertion order (a ledger
///   appended in time order, the sweeper keeping up), 1.0-1.8 KB payloads; one in 10,000
///   claimed up to 10 minutes past the 30-day retention (what accrues between two sweeps);
/// - `dead`: one in 400 (0.25%: dead letters are kept 90 days), died over the last 88 days;
/// - `claimed`: one in 5,000 (the deferred backlog), claimed 0-20 minutes ago and due since, so
///   about three quarters are stuck by the 5-minute rule (a worker that is behind);
/// - `failed`: one in 10,000, next attempt from 10 minutes ago to 50 minutes ahead;
/// - `processing`: one in 20,000, leases from 10 s expired to 110 s ahead.
const LOAD_AUDIT_MIX: &str = "\
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, payload_identity, status, attempts,
     last_error, response_status, response_body, claimed_at, lease_expires_at, next_attempt_at,
     completed_at, dead_at)
SELECT source, 'evt_audit_' || i, 'payment_intent.succeeded', digest,
       convert_to(rpad('{\"id\":\"evt_audit_' || i || '\",\"object\":\"event\",\"data\":\"',
                       1000 + (i * 7919 % 800)::int, md5(i::text)), 'UTF8'),
       digest, status,
       CASE status WHEN 'failed' THEN 3 WHEN 'dead' THEN 8 ELSE 1 END,
       CASE WHEN status IN ('failed', 'dead') THEN 'handler: upstream answered 503' END,
       CASE WHEN status = 'completed' THEN 200 END,
       CASE WHEN status = 'completed' THEN '{\"received\":true}'::jsonb END,
       at,
       CASE WHEN status = 'processing' THEN now() + ((i / 20000 * 397) % 120 - 10) * interval '1 s' END,
       CASE WHEN status IN ('claimed', 'processing') THEN at
            WHEN status = 'failed' THEN now() + ((i / 10000 * 397) % 3600 - 600) * interval '1 s' END,
       CASE WHEN status = 'completed' THEN at + interval '40 ms' END,
       CASE WHEN status = 'dead' THEN at + interval '2 hours' END
FROM (
    SELECT i, source, digest, status,
           CASE status
               WHEN 'completed' THEN
                   CASE WHEN i % 10000 = 1
                        THEN now() - interval '30 days' - (i % 600) * interval '1 s'
                        ELSE now() - interval '29 days 23 hours'
                             + i * (interval '29 days 23 hours' / $1::int8) END
               WHEN 'dead' THEN now() - interval '3 hours'
                                - interval '88 days' * ((i * 7919) % 1000) / 1000.0
               WHEN 'claimed' THEN now() - ((i / 5000 * 397) % 1200) * interval '1 s'
               WHEN 'failed' THEN now() - ((i / 10000 * 397) % 86400) * interval '1 s'
               ELSE now() - ((i / 20000 * 397) % 300) * interval '1 s'
           END AS at
    FROM (
        SELECT i,
               (ARRAY['stripe', 'github', 'shopify', 'stripe-deferred'])
                   [1 + (i * 2654435761 / 4096) % 4] AS source,
               sha256(int8send(i)) AS digest,
               (CASE WHEN i % 10000 = 5 THEN 'failed'
                     WHEN i % 5000 = 7 THEN 'claimed'
                     WHEN i % 20000 = 9 THEN 'processing'
                     WHEN i % 400 = 3 THEN 'dead'
                     ELSE 'completed' END)::event_status AS status
        FROM generate_series(1, $1::int8) AS i
    ) AS g
) AS h";

/// Ordering ties for the auditor's ledger: `$1` of them over the last 30 days, a few in the
/// last five minutes.
const LOAD_AUDIT_TIES: &str = "\
INSERT INTO ordering_tie (source, entity_type, entity_id, version, applied_event_id, event_id,
                          seen_at)
SELECT 'stripe', 'subscription', 'sub_' || i, 1, 'evt_a' || i, 'evt_b' || i,
       now() - interval '30 days' * i / $1::int8
FROM generate_series(0, $1::int8 - 1) AS i";

/// The live rows: claimed during the last 29 days.
const LOAD_LIVE: &str = "\
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, payload_identity, status, attempts,
     response_status, response_body, claimed_at, completed_at)
SELECT source, 'evt_recent_' || i, 'payment_intent.succeeded', digest,
       convert_to(rpad('{\"id\":\"evt_recent_' || i || '\",\"data\":\"',
                       1000 + (i * 7919 % 800)::int, md5(i::text)), 'UTF8'),
       digest, 'completed', 1, 200, '{\"received\":true}'::jsonb, at, at + interval '40 ms'
FROM (
    SELECT i,
           CASE WHEN i % 2 = 0 THEN 'stripe' ELSE 'github' END AS source,
           sha256(int8send(i)) AS digest,
           now() - interval '29 days' + (i - $1) * (interval '29 days' / ($2 - $1 + 1)) AS at
    FROM generate_series($1::int8, $2::int8) AS i
) AS g";

/// A new event: claim, then complete with a small response. `Ok(true)` when it was won and
/// committed.
async fn claim_new(conn: &Connection, event: &LiveEvent) -> Result<bool> {
    let expiry = Expiry {
        retention: Retention::default(),
        now: SystemTime::now(),
    };
    match ledger::claim(conn, &event.as_new(), &expiry).await? {
        Claim::Won(tx) => {
            tx.complete(
                (event.source, &event.id),
                200,
                &serde_json::json!({"received": true}),
            )
            .await?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// A duplicate through `shared::ledger::claim`: `Ok(true)` when answered with the stored
/// response.
async fn current_duplicate(conn: &Connection, event: &NewEvent<'_>) -> Result<bool> {
    let expiry = Expiry {
        retention: Retention::default(),
        now: SystemTime::now(),
    };
    Ok(matches!(
        ledger::claim(conn, event, &expiry).await?,
        Claim::Completed(_)
    ))
}

// ---------------------------------------------------------------------------------------------
// BASELINE: the duplicate path as it was before retention (commit 94d4246, before c443efa):
// the claim's INSERT (unchanged), then ROLLBACK pipelined with a lookup that does not read
// `claimed_at, dead_at`, and no age check. Kept here only to measure what the expiry check
// costs the hot duplicate; the receive path never runs it.
// ---------------------------------------------------------------------------------------------

/// BASELINE: the lookup before retention (no `claimed_at, dead_at`).
static BASELINE_LOOKUP: Sql = Sql {
    text: "\
SELECT status::text, payload_digest, response_status, response_body::text, payload_identity
FROM webhook_event
WHERE source = $1
  AND event_id = $2",
    types: &[Type::TEXT, Type::TEXT],
};

/// BASELINE duplicate: `Ok(true)` when it would be answered with the stored response.
async fn baseline_duplicate(conn: &Connection, event: &NewEvent<'_>) -> Result<bool> {
    // The claim's INSERT is unchanged by retention: the real one.
    let claim = conn.prepare(&shared::ledger::claim::CLAIM).await?;
    let lookup = conn.prepare(&BASELINE_LOOKUP).await?;
    let digest: &[u8] = event.digest;
    let identity: &[u8] = event.identity;
    let params: [&(dyn ToSql + Sync); 6] = [
        &event.source,
        &event.event_id,
        &event.event_type,
        &digest,
        &event.payload,
        &identity,
    ];
    let (begin, inserted) = in_order(conn.begin(), conn.query_opt(&claim, &params)).await;
    begin?;
    if inserted?.is_some() {
        conn.batch_execute("ROLLBACK").await?;
        return Ok(false);
    }
    let (rolled_back, row) = in_order(
        conn.batch_execute("ROLLBACK"),
        conn.query_opt(&lookup, &[&event.source, &event.event_id]),
    )
    .await;
    rolled_back?;
    let Some(row) = row? else {
        return Ok(false);
    };
    let status = Status::parse(row.try_get::<_, &str>(0)?)?;
    let payload_digest: Vec<u8> = row.try_get(1)?;
    let response_status: Option<i16> = row.try_get(2)?;
    let response_body: Option<String> = row.try_get(3)?;
    let payload_identity: Option<Vec<u8>> = row.try_get(4)?;
    let same = match &payload_identity {
        Some(identity) => identity.as_slice() == event.identity.as_slice(),
        None => payload_digest.as_slice() == event.digest.as_slice(),
    };
    Ok(same && status == Status::Completed && response_status.is_some() && response_body.is_some())
}

/// Awaits both futures, polling `first` before `second` (what `shared`'s crate-private
/// pipelining does): the two statements go out back to back, one round trip.
async fn in_order<A: Future, B: Future>(first: A, second: B) -> (A::Output, B::Output) {
    let mut first = std::pin::pin!(maybe_done(first));
    let mut second = std::pin::pin!(maybe_done(second));
    std::future::poll_fn(|cx| {
        let a = first.as_mut().poll(cx).is_ready();
        let b = second.as_mut().poll(cx).is_ready();
        if a && b {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    match (first.as_mut().take_output(), second.as_mut().take_output()) {
        (Some(a), Some(b)) => (a, b),
        _ => unreachable!("both futures completed"),
    }
}
