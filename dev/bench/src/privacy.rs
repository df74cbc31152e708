//! The privacy part (issue 28): what payload privacy at rest costs the receiver per delivery:
//! CPU, latency and throughput with `encrypt_payload` off and on (and with `redact` instead),
//! and the bytes a stored payload takes. Run by `bench-privacy` (`make bench PARTS=privacy`);
//! [`Measured::json`] and [`Measured::markdown`] write `dev/bench/results/privacy.*`.
//!
//! One in-process receiver ([`crate::in_process_receiver`], the example order handler on every
//! Stripe source, as bench-load and bench-limit run it), configured as deployed (the receiver's
//! limits on the database, none sent per transaction), with three inline Stripe sources
//! identical but for one setting: `stripe-off` (the payload stored as received), `stripe-on`
//! (`"encrypt_payload": true`: sealed with AES-256-GCM under a data key wrapped by a local
//! master key; `Settings::payload_keys` = `PayloadKeys::local`) and `stripe-redact` (`"redact":
//! ["/data/object/metadata/order_id"]`, not sealed). Each gets [`Plan::n`] new signed
//! `payment_intent.succeeded` deliveries ([`crate::signed_deliveries`]) per round at
//! [`Plan::concurrency`], in [`Plan::rounds`] interleaved rounds (every variant once per round,
//! the first variant rotating from round to round) so that a burst of load on the shared
//! machine falls on every variant alike; [`Plan::concurrency`] deliveries per variant first
//! warm the pool and the keyring up (its one data key made there) and are not measured.
//!
//! Per round and variant: this process's CPU (getrusage `RUSAGE_SELF`, user and system, every
//! thread: the receiver's work, the pool's connections, the log lines) over the deliveries;
//! each delivery's latency (`Instant` around `Receiver::receive`); wall time. PostgreSQL's own
//! CPU is not counted. Afterwards: the stored payload's bytes per row (`octet_length(payload)`)
//! per source, one sealed payload opened again, what the receiver seals and opens per delivery
//! timed apart ([`alone`]), and the keyring's calls to its wrapper (on the KMS path, KMS calls).
//! Every delivery is logged as the function logs it, on stdout.

mod alone;
mod report;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;
use shared::config::DatabaseSettings;
use shared::privacy::keys::{Column, PayloadKeys, DEFAULT_ROTATION};
use shared::privacy::seal::WrapperCalls;
use shared::privacy::wrap::LocalKeys;

use crate::{CpuTimes, Delivery};
pub use alone::Alone;

/// What to measure.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Interleaved rounds (every variant measured once per round).
    pub rounds: usize,
    /// New deliveries per variant and round.
    pub n: usize,
    /// Deliveries in flight at once (and pool connections).
    pub concurrency: usize,
    /// Measure the redacting source too.
    pub redact: bool,
}

/// What one run measured ([`run`]).
pub struct Measured {
    plan: Plan,
    /// `off` first: the base of every ratio.
    variants: Vec<Variant>,
    summaries: Vec<Summary>,
    stored: Vec<Stored>,
    measured_s: f64,
    /// Load averages before and after.
    load: (String, String),
    calls: WrapperCalls,
    /// Whether the sealed payload read back opened to its event.
    opened: bool,
    alone: Alone,
}

/// The three sources, identical but for `encrypt_payload` and `redact`; the secret only signs
/// and verifies this run's deliveries.
const SOURCES_JSON: &str = r#"[
  {"name": "stripe-off", "scheme": "stripe", "secrets": ["whsec_bench_privacy_placeholder"], "mode": "inline"},
  {"name": "stripe-on", "scheme": "stripe", "secrets": ["whsec_bench_privacy_placeholder"], "mode": "inline",
   "encrypt_payload": true},
  {"name": "stripe-redact", "scheme": "stripe", "secrets": ["whsec_bench_privacy_placeholder"], "mode": "inline",
   "redact": ["/data/object/metadata/order_id"]}
]"#;

/// The pointer `stripe-redact` redacts (as in [`SOURCES_JSON`]).
const REDACTED_POINTER: &str = "/data/object/metadata/order_id";

/// Local master keys in `HOOKLEDGER_PAYLOAD_KEYS`' format: one key, bytes 0 to 31 (a
/// benchmark's key, anyone can see it).
const LOCAL_KEYS_JSON: &str =
    r#"{"current": "bench", "keys": {"bench": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}}"#;

/// One measured configuration: a source and what was measured of it.
struct Variant {
    /// JSON key and short name: `off`, `on`, `redact`.
    key: &'static str,
    /// Row label.
    label: &'static str,
    /// The source's name in [`SOURCES_JSON`].
    source: &'static str,
    /// Its source's configuration, to sign deliveries with.
    config: Arc<shared::SourceConfig>,
    /// Its place in the table, in its deliveries' tags (`v0`, `v1`, `v2`: tags of one length,
    /// so that every variant's bodies are as long).
    index: usize,
    /// Bytes of the bodies sent in the measured rounds, summed.
    sent_bytes: usize,
    /// What each round measured, in round order.
    rounds: Vec<Round>,
    /// Every measured delivery's latency, ms.
    latencies_ms: Vec<f64>,
}

/// One round of one variant.
#[derive(Debug, Clone, Copy)]
struct Round {
    deliveries: usize,
    wall_s: f64,
    cpu: CpuTimes,
    p99_ms: f64,
}

/// A variant's figures over all its rounds.
#[derive(Debug, Clone, Copy)]
struct Summary {
    deliveries: usize,
    cpu_us: f64,
    user_us: f64,
    sys_us: f64,
    p50_ms: f64,
    p99_ms: f64,
    rps: f64,
    body_bytes: f64,
}

impl Variant {
    /// `n` new deliveries of this variant for `round` (`None`: the warm-up), signed at `now`.
    /// Tags `privacy_<run>_v<index>_<r000|warm>`: the same length for every variant and round.
    fn deliveries(&self, run: i64, round: Option<usize>, n: usize, now: i64) -> Vec<Delivery> {
        let round = round.map_or_else(|| "warm".to_owned(), |r| format!("r{r:03}"));
        let tag = format!("privacy_{run}_v{}_{round}", self.index);
        crate::signed_deliveries(&self.config, &tag, n, now)
    }

    fn summary(&self) -> Summary {
        let deliveries: usize = self.rounds.iter().map(|r| r.deliveries).sum();
        let wall: f64 = self.rounds.iter().map(|r| r.wall_s).sum();
        let user: f64 = self.rounds.iter().map(|r| r.cpu.user_s).sum();
        let sys: f64 = self.rounds.iter().map(|r| r.cpu.sys_s).sum();
        let per = |v: f64| v / deliveries.max(1) as f64;
        let mut sorted = self.latencies_ms.clone();
        sorted.sort_by(f64::total_cmp);
        Summary {
            deliveries,
            cpu_us: per((user + sys) * 1e6),
            user_us: per(user * 1e6),
            sys_us: per(sys * 1e6),
            p50_ms: crate::percentile(&sorted, 0.5),
            p99_ms: crate::percentile(&sorted, 0.99),
            rps: deliveries as f64 / wall.max(f64::MIN_POSITIVE),
            body_bytes: per(self.sent_bytes as f64),
        }
    }

    /// CPU µs per delivery (user + sys) of each round.
    fn cpu_us_per_round(&self) -> Vec<f64> {
        self.rounds
            .iter()
            .map(|r| (r.cpu.user_s + r.cpu.sys_s) * 1e6 / r.deliveries.max(1) as f64)
            .collect()
    }
}

/// What the ledger stores of one source's measured rows.
#[derive(Debug, Clone, Copy, Default)]
struct Stored {
    rows: i64,
    completed: i64,
    with_payload: i64,
    sealed: i64,
    redacted: i64,
    payload_bytes: f64,
}

/// Migrates `url` and measures `plan` on it (see the module's docs).
///
/// # Errors
/// When the database cannot be migrated or reached, the sources or keys do not parse, a
/// delivery is not answered 200, or a sealed payload does not open.
pub async fn run(url: &str, plan: Plan) -> Result<Measured> {
    ensure!(
        plan.rounds > 0 && plan.n > 0 && plan.concurrency > 0,
        "the rounds, deliveries per round and concurrency must be positive"
    );
    let load_before = crate::load_average();
    migrate(url).await?;
    let keys = Arc::new(PayloadKeys::local(
        LocalKeys::from_json(LOCAL_KEYS_JSON).context("the bench's local keys")?,
        DEFAULT_ROTATION,
    ));
    let mut database = DatabaseSettings::with_url(url.to_owned());
    database.pool_size = plan.concurrency;
    // As template.yaml configures the receiver: the limits live on its login (`migrate`).
    database.transaction_limits = false;
    let (receiver, _) = crate::in_process_receiver(
        database,
        SOURCES_JSON,
        "stripe-off",
        true,
        Some(keys.clone()),
    )?;
    let mut variants = variants(plan.redact)?;
    // Log every delivery as the function does (the caller redirects stdout).
    shared::telemetry::init();
    let now = crate::unix_now();

    // Warm up the pool's connections, their prepared statements and the keyring's data key.
    for v in &variants {
        let list = Arc::new(v.deliveries(now, None, plan.concurrency, now));
        let (_, ok) = deliver(&receiver, v.source, list, plan.concurrency, now).await?;
        ensure!(
            ok == plan.concurrency,
            "warm-up of {}: {ok} of {} answered 200",
            v.source,
            plan.concurrency
        );
    }

    let started = Instant::now();
    for r in 0..plan.rounds {
        let count = variants.len();
        for k in 0..count {
            let v = &mut variants[(r + k) % count];
            // Signed before the round: signing is the provider's work, not measured.
            let list = Arc::new(v.deliveries(now, Some(r), plan.n, now));
            v.sent_bytes += list.iter().map(|(_, body)| body.len()).sum::<usize>();
            let cpu_before = crate::own_cpu();
            let wall = Instant::now();
            let (mut latencies, ok) =
                deliver(&receiver, v.source, list, plan.concurrency, now).await?;
            let wall_s = wall.elapsed().as_secs_f64();
            let cpu = crate::own_cpu().since(cpu_before);
            if ok != plan.n {
                bail!(
                    "round {r}, {}: {ok} of {} deliveries answered 200",
                    v.source,
                    plan.n
                );
            }
            v.latencies_ms.extend_from_slice(&latencies);
            latencies.sort_by(f64::total_cmp);
            v.rounds.push(Round {
                deliveries: plan.n,
                wall_s,
                cpu,
                p99_ms: crate::percentile(&latencies, 0.99),
            });
        }
    }
    let measured_s = started.elapsed().as_secs_f64();
    let load_after = crate::load_average();

    let stored = stored(url, &variants).await?;
    let opened = open_one(url, &keys).await?;
    let alone = alone::measure(&keys, &variants[1], now, plan.concurrency).await?;
    let calls = keys.keyring(Column::Payload).await?.calls();
    let summaries = variants.iter().map(Variant::summary).collect();
    Ok(Measured {
        plan,
        variants,
        summaries,
        stored,
        measured_s,
        load: (load_before, load_after),
        calls,
        opened,
        alone,
    })
}

/// The variants measured, in table order (`off` first: the base of every ratio).
fn variants(redact: bool) -> Result<Vec<Variant>> {
    let sources = shared::Sources::from_json(SOURCES_JSON)?;
    let mut wanted = vec![
        ("off", "encryption off", "stripe-off"),
        ("on", "encryption on", "stripe-on"),
    ];
    if redact {
        wanted.push(("redact", "redaction (one field)", "stripe-redact"));
    }
    wanted
        .into_iter()
        .enumerate()
        .map(|(index, (key, label, source))| {
            Ok(Variant {
                key,
                label,
                source,
                config: sources
                    .get(source)
                    .cloned()
                    .with_context(|| format!("the {source} source"))?,
                index,
                sent_bytes: 0,
                rounds: Vec::new(),
                latencies_ms: Vec::new(),
            })
        })
        .collect()
}

/// The bench's own session on `url`, with the receiver's limits lifted.
async fn admin(url: &str) -> Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connecting to DATABASE_URL")?;
    tokio::spawn(connection);
    client
        .batch_execute("SET statement_timeout = 0; SET lock_timeout = 0")
        .await
        .context("lifting the limits for the bench's own session")?;
    Ok(client)
}

/// Migrates `url` (the shared schema and the example handlers' tables) and sets the receiver's
/// limits on the database ([`crate::DEPLOYED_LIMITS`]), as bench-limit does.
async fn migrate(url: &str) -> Result<()> {
    let settings = DatabaseSettings::with_url(url.to_owned());
    shared::db::migrate_with(&settings, &handlers::examples::migrations())
        .await
        .context("migrating")?;
    admin(url)
        .await?
        .batch_execute(crate::DEPLOYED_LIMITS)
        .await
        .context("setting the receiver's limits on the database")?;
    Ok(())
}

/// Delivers `list` to `source` at `concurrency`; returns each delivery's latency (ms) and how
/// many were answered 200.
async fn deliver(
    receiver: &Arc<shared::Receiver>,
    source: &'static str,
    list: Arc<Vec<Delivery>>,
    concurrency: usize,
    now: i64,
) -> Result<(Vec<f64>, usize)> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (receiver, list, next) = (receiver.clone(), list.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            let mut ok = 0usize;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((headers, body)) = list.get(i) else {
                    return (times, ok);
                };
                let start = Instant::now();
                let reply = receiver.receive(source, headers, body, now).await;
                times.push(start.elapsed().as_secs_f64() * 1000.0);
                if reply.status == 200 {
                    ok += 1;
                }
            }
        }));
    }
    let (mut times, mut ok) = (Vec::with_capacity(list.len()), 0);
    for task in tasks {
        let (t, o) = task.await?;
        times.extend(t);
        ok += o;
    }
    Ok((times, ok))
}

/// What the ledger stores of each variant's measured rows (not the warm-up's), in `variants`'
/// order.
async fn stored(url: &str, variants: &[Variant]) -> Result<Vec<Stored>> {
    let client = admin(url).await?;
    let mut out = Vec::with_capacity(variants.len());
    for v in variants {
        let row = client
            .query_one(
                "SELECT count(*),
                        count(*) FILTER (WHERE status = 'completed'),
                        count(payload),
                        -- an envelope begins with its magic, HLS1
                        count(*) FILTER (WHERE substring(payload FROM 1 FOR 4) = 'HLS1'::bytea),
                        count(*) FILTER (WHERE position('\"[redacted]\"'::bytea IN payload) > 0),
                        coalesce(avg(octet_length(payload)), 0)::float8
                 FROM webhook_event
                 WHERE source = $1
                   AND event_id NOT LIKE '%\\_warm\\_%'",
                &[&v.source],
            )
            .await
            .with_context(|| format!("reading {}'s rows", v.source))?;
        out.push(Stored {
            rows: row.get(0),
            completed: row.get(1),
            with_payload: row.get(2),
            sealed: row.get(3),
            redacted: row.get(4),
            payload_bytes: row.get(5),
        });
    }
    Ok(out)
}

/// Opens one payload `stripe-on` stored and checks it is its event's body: the sealed rows are
/// what they should be, not only as long.
async fn open_one(url: &str, keys: &PayloadKeys) -> Result<bool> {
    let client = admin(url).await?;
    let row = client
        .query_one(
            "SELECT event_id, payload FROM webhook_event
             WHERE source = 'stripe-on' AND payload IS NOT NULL
             ORDER BY event_id
             LIMIT 1",
            &[],
        )
        .await
        .context("reading one sealed row")?;
    let (event_id, sealed): (String, Vec<u8>) = (row.get(0), row.get(1));
    let plain = keys
        .open("stripe-on", &event_id, Column::Payload, &sealed)
        .await
        .context("opening a sealed payload")?;
    let event: Value = serde_json::from_slice(&plain).context("the opened payload")?;
    Ok(event["id"] == event_id.as_str())
}
