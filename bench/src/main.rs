//! `bench-sweep` (`make bench-sweep`): what the retention sweep costs the receivers' claims.
//!
//! On its own throwaway PostgreSQL (`DATABASE_URL`), in one run:
//! 1. loads a ledger of `--expired-rows` expired `completed` keys (one `INSERT ... SELECT
//!    generate_series`, 1.0-1.8 KB payloads, two sources, claimed 60 to 31 days ago, in time
//!    order as a ledger is appended) and `--live-rows` recent ones, then `VACUUM ANALYZE`;
//! 2. `EXPLAIN (ANALYZE, BUFFERS)` of the sweep's batch statement after 10 batches;
//! 3. paced live claim traffic (`--connections` tasks, `--rate` claims/s in all, through
//!    `shared::ledger::claim` and `Tx::complete`, ~10% duplicates) in phases of equal length:
//!    no sweep, during `shared::sweep::run` (default settings), during one unbatched
//!    `DELETE` of the same rows (reloaded first), and no sweep again as a noise control;
//! 4. the hot duplicate through `claim` (with the expiry check) interleaved with the lookup as
//!    it was before retention (BASELINE below);
//! 5. writes the Markdown report (`--out`, default `bench/SWEEP.md`) and prints a summary.
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
use shared::config::{DatabaseSettings, SweepSettings};
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
    #[arg(long, default_value_t = 24)]
    phase_secs: u64,
    /// Segments the no-sweep and batched-sweep phases are cut into, alternating.
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// Concurrent claim tasks, one connection each.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Offered claims per second, all tasks together (paced, not a closed loop).
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// One claim in this many is a duplicate of an event completed earlier (10: ~10%).
    #[arg(long, default_value_t = 10)]
    duplicate_every: u64,
    /// More batched-sweep phases after the default one, as `batch_size:pause_ms` (e.g.
    /// `1000:100,5000:500`; a third field sets `wal_compression` on the sweep's session only,
    /// e.g. `5000:100:lz4`), each on a freshly reloaded ledger (about a minute more each).
    #[arg(long, value_delimiter = ',')]
    sweep_variants: Vec<String>,
    /// Also load a 10,000,000-row ledger at the end for the auditor's query times.
    #[arg(long)]
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
    /// The sweep, with `wal_compression` set to this on its session when given.
    Sweep(SweepSettings, Option<String>),
    Delete,
}

#[derive(Default, Clone)]
struct Deletion {
    rows: u64,
    secs: f64,
    batches: u32,
    stopped: String,
    /// Time spent inside batches (wall time minus the pauses), seconds.
    busy_secs: f64,
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
    window: Duration,
    samples: Samples,
    deletion: Option<Deletion>,
    /// Server counters, after minus before (WAL bytes from the LSN).
    stats: ServerStats,
}

impl Phase {
    /// This phase and a later segment of it, as one.
    fn merge(mut self, other: Phase) -> Phase {
        self.window += other.window;
        self.samples.merge(other.samples);
        for v in [
            &mut self.samples.new,
            &mut self.samples.dup_current,
            &mut self.samples.dup_baseline,
        ] {
            v.sort_unstable();
        }
        self.deletion = match (self.deletion, other.deletion) {
            (Some(a), Some(b)) => Some(Deletion {
                rows: a.rows + b.rows,
                secs: a.secs + b.secs,
                batches: a.batches + b.batches,
                stopped: format!("{}, {}", a.stopped, b.stopped),
                busy_secs: a.busy_secs + b.busy_secs,
            }),
            (a, b) => a.or(b),
        };
        let (s, o) = (&mut self.stats, other.stats);
        s.lsn_bytes += o.lsn_bytes;
        s.wal_fpi += o.wal_fpi;
        s.checkpoints_timed += o.checkpoints_timed;
        s.checkpoints_req += o.checkpoints_req;
        s.autovacuum_count += o.autovacuum_count;
        s.buffers_backend_fsync += o.buffers_backend_fsync;
        self
    }
}

impl Bench {
    async fn new(args: Args) -> Result<Self> {
        let mut settings = DatabaseSettings::with_url(args.database_url.clone());
        settings.pool_size = args.connections;
        let admin = shared::db::connect(&settings).await?;
        Ok(Self {
            sources: Sources::from_json(SOURCES_JSON)?,
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
        self.traffic(Duration::from_secs(3)).await?;

        // No sweep and the default batched sweep alternate in `--rounds` segments (each half
        // of the phase length), so a slow drift of the machine's other load hits both alike.
        let default = SweepSettings {
            max_batches: 1_000_000,
            margin_ms: 1,
            ..SweepSettings::default()
        };
        let default_name = format!(
            "batched sweep ({} rows, {} ms pause)",
            default.batch_size, default.pause_ms
        );
        let rounds = self.args.rounds.max(1);
        let segment = Duration::from_secs_f64(self.args.phase_secs as f64 / rounds as f64);
        let mut quiet: Option<Phase> = None;
        let mut swept: Option<Phase> = None;
        for _ in 0..rounds {
            let q = self.phase("no sweep", segment, Background::Nothing).await?;
            quiet = Some(match quiet {
                Some(p) => p.merge(q),
                None => q,
            });
            let s = self
                .phase(&default_name, segment, Background::Sweep(default, None))
                .await?;
            swept = Some(match swept {
                Some(p) => p.merge(s),
                None => s,
            });
        }
        let mut phases: Vec<Phase> = quiet.into_iter().chain(swept).collect();
        let window = Duration::from_secs(self.args.phase_secs);
        for variant in &self.args.sweep_variants {
            let mut parts = variant.split(':');
            let (Some(batch), Some(pause)) = (parts.next(), parts.next()) else {
                return Err(anyhow!(
                    "--sweep-variants takes batch_size:pause_ms[:wal_compression]"
                ));
            };
            let compression = parts.next().map(|c| c.trim().to_owned());
            let settings = SweepSettings {
                batch_size: batch.trim().parse()?,
                pause_ms: pause.trim().parse()?,
                ..default
            };
            let name = format!(
                "batched sweep ({} rows, {} ms pause{})",
                settings.batch_size,
                settings.pause_ms,
                compression
                    .as_deref()
                    .map_or(String::new(), |c| format!(", wal_compression={c}"))
            );
            step!(self, "reloading the expired rows for {name}");
            self.reload().await?;
            phases.push(
                self.phase(&name, window, Background::Sweep(settings, compression))
                    .await?,
            );
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

        let audit = if self.args.ten_million {
            step!(self, "10M-row ledger for the auditor");
            Some(self.ten_million().await?)
        } else {
            None
        };
        Ok(self.report(&facts, load, &sizes, &plan, &phases, audit.as_deref()))
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
        self.admin.batch_execute("CHECKPOINT").await?;
        // Counters of other backends reach pg_stat_* within a second.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let before = self.server_stats().await?;
        step!(self, "phase: {name}");
        let deadline = Instant::now() + window;
        let deleting = async {
            match background {
                Background::Nothing => Ok::<_, anyhow::Error>(None),
                Background::Sweep(settings, compression) => {
                    let pool = shared::db::pool(&self.settings)?;
                    let conn = pool.get().await?;
                    if let Some(method) = compression {
                        // A superuser setting, per session: only the sweep's WAL is compressed.
                        conn.batch_execute(&format!("SET wal_compression = {method}"))
                            .await?;
                    }
                    let report = shared::sweep::run(
                        &conn,
                        &self.sources,
                        &settings,
                        SystemTime::now(),
                        move || deadline.saturating_duration_since(Instant::now()),
                    )
                    .await?;
                    let secs = report.duration_ms as f64 / 1000.0;
                    let pauses =
                        f64::from(report.batches.saturating_sub(1)) * settings.pause_ms as f64;
                    Ok(Some(Deletion {
                        rows: report.deleted,
                        secs,
                        batches: report.batches,
                        stopped: format!("{:?}", report.stopped),
                        busy_secs: secs - pauses / 1000.0,
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
                        busy_secs: secs,
                    }))
                }
            }
        };
        let (samples, deletion) = tokio::join!(self.traffic(window), deleting);
        let (samples, deletion) = (samples?, deletion?);
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let after = self.server_stats().await?;
        Ok(Phase {
            name: name.to_owned(),
            window,
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

    /// Paced claim traffic for `window` on every connection.
    async fn traffic(&self, window: Duration) -> Result<Samples> {
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
        tokio::time::sleep(window).await;
        stop.store(true, Ordering::Relaxed);
        let mut all = Samples::default();
        for task in tasks {
            all.merge(task.await?);
        }
        all.new.sort_unstable();
        all.dup_current.sort_unstable();
        all.dup_baseline.sort_unstable();
        Ok(all)
    }

    /// Behind `--ten-million`: a 10M-row ledger (9M more expired rows) for the auditor's
    /// query times. Returns the Markdown of its section.
    async fn ten_million(&self) -> Result<String> {
        let started = Instant::now();
        self.admin
            .execute(
                &format!("{LOAD_EXPIRED} ON CONFLICT DO NOTHING"),
                &[&1i64, &9_950_000i64],
            )
            .await?;
        self.vacuum_analyze().await?;
        let load = started.elapsed().as_secs_f64();
        let sizes = self.sizes().await?;
        let mut md = format!("10M-row ledger loaded in {load:.0} s:\n\n");
        for (k, v) in sizes {
            let _ = writeln!(md, "- {k}: {v}");
        }
        md.push_str(&self.time_auditor().await?);
        Ok(md)
    }

    /// The auditor's query times on the ledger as it is now. `shared::audit` is not on this
    /// branch yet: when it is, time `shared::audit::run(conn, sources, &AuditSettings, now)`
    /// here (a few runs, report min and median).
    async fn time_auditor(&self) -> Result<String> {
        Ok("\n`shared::audit` does not exist on this branch: auditor not timed.\n".to_owned())
    }

    fn report(
        &self,
        facts: &[(String, String)],
        load_secs: f64,
        sizes: &[(String, String)],
        plan: &str,
        phases: &[Phase],
        audit: Option<&str>,
    ) -> Report {
        let mut md = String::new();
        let a = &self.args;
        let _ = writeln!(md, "# Sweep benchmark (`make bench-sweep`)\n");
        let _ = writeln!(
            md,
            "Generated by `bench/src/main.rs` on {} (regenerated on every run). Claim traffic: \
             {} connections, {:.0} claims/s offered in all (paced), one in {} a duplicate of a \
             recently completed event (half through `shared::ledger::claim`, half through the \
             baseline lookup), phases of {} s, each after a `CHECKPOINT`. A new claim's latency \
             is the whole inline transaction: `claim` (BEGIN + INSERT) and `Tx::complete` \
             (completion + COMMIT), with an empty handler.\n",
            shared::telemetry::rfc3339(SystemTime::now()),
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
        let _ = writeln!(md, "\n## Claim latency per phase\n");
        let _ = writeln!(
            md,
            "| phase | new claims | claims/s (all) | p50 ms | p99 ms | p99.9 ms | max ms | p99 vs no sweep | errors |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        let base_p99 = phases
            .first()
            .map_or(f64::NAN, |p| pct(&p.samples.new, 0.99));
        for p in phases {
            let s = &p.samples;
            let total = s.new.len() + s.dup_current.len() + s.dup_baseline.len();
            let p99 = pct(&s.new, 0.99);
            let _ = writeln!(
                md,
                "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:+.0}% | {} |",
                p.name,
                s.new.len(),
                total as f64 / p.window.as_secs_f64(),
                pct(&s.new, 0.50),
                p99,
                pct(&s.new, 0.999),
                pct(&s.new, 1.0),
                (p99 / base_p99 - 1.0) * 100.0,
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
            "| phase | WAL MB | full-page images | checkpoints (timed/requested) | autovacuums of webhook_event | backend fsyncs |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
        for p in phases {
            let st = &p.stats;
            let _ = writeln!(
                md,
                "| {} | {:.0} | {} | {}/{} | {} | {} |",
                p.name,
                st.lsn_bytes / 1_048_576.0,
                st.wal_fpi,
                st.checkpoints_timed,
                st.checkpoints_req,
                st.autovacuum_count,
                st.buffers_backend_fsync
            );
        }
        let _ = writeln!(md, "\n## Deletion rates\n");
        let _ = writeln!(
            md,
            "| phase | rows deleted | wall s | rows/s (wall) | batches | rows/s inside batches | stopped |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---|");
        for p in phases {
            if let Some(d) = &p.deletion {
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.1} | {:.0} | {} | {:.0} | {} |",
                    p.name,
                    d.rows,
                    d.secs,
                    d.rows as f64 / d.secs,
                    d.batches,
                    d.rows as f64 / d.busy_secs,
                    d.stopped
                );
            }
        }
        let _ = writeln!(
            md,
            "\nThe batched sweep stops at the end of its phase (the run's time budget); the \
             single DELETE runs to the end however long it takes, and claims are measured only \
             during the phase window."
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
        let _ = writeln!(md, "## Auditor query times at 1M and 10M rows\n");
        match audit {
            Some(section) => md.push_str(section),
            None => {
                let _ = writeln!(
                    md,
                    "Not measured: `shared::audit` (the auditor, `shared::audit::run(conn, \
                     sources, &AuditSettings, now)`) is not on this branch yet. The 10M-row load \
                     is written (`bench-sweep --ten-million`); the timing call goes in \
                     `Bench::time_auditor` once the module lands."
                );
            }
        }
        md.push_str(&verdict_section(phases));
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
        "Each phase against the interleaved no-sweep phase ({b99:.2} ms) and the control \
         after the DELETE ({c99:.2} ms); WAL written per second of the phase:\n"
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

/// BASELINE: the claim's INSERT, text as in `shared/src/ledger/claim.rs` (unchanged by
/// retention).
static BASELINE_CLAIM: Sql = Sql {
    text: "\
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, status, payload_identity)
VALUES ($1, $2, $3, $4, $5, 'claimed', $6)
-- A concurrent claim of the same key waits here for the first to commit or roll back.
ON CONFLICT (source, event_id) DO NOTHING
RETURNING 1",
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::BYTEA,
        Type::BYTEA,
        Type::BYTEA,
    ],
};

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
    let claim = conn.prepare(&BASELINE_CLAIM).await?;
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
