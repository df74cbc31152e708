//! `hookledger-dev`: local tooling for `make demo`, `make run` and maintainers.
//!
//! - `migrate`: apply the migrations to `DATABASE_URL`.
//! - `deliver PLAN`: send the deliveries listed in a plan (e.g. `events/demo-plan.json`) to a
//!   running receiver over HTTP, re-signed now with the local development secrets, and print
//!   one line per delivery.
//! - `ledger`: print the `webhook_event` rows and the `orders` rows.
//! - `sign-events`: re-sign every event file in `events/receiver/` at the timestamp it carries
//!   (after editing a body), except files named `*bad-signature*` and `*invalid-base64*`.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use clap::{Parser, Subcommand};
use hookledger_tests::{events_dir, local_source, verifier_with_secret, EventFile};
use serde::Deserialize;
use shared::config::DatabaseSettings;
use shared::verify::Scheme;

#[derive(Parser)]
#[command(about = "hookledger local tooling")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply pending migrations to DATABASE_URL.
    Migrate {
        #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
        database_url: String,
    },
    /// Read the configuration exactly as the functions do at cold start (the same environment
    /// variables) and print what was found, or the start-up error (exit status 1).
    CheckConfig,
    /// Send a plan's deliveries to a receiver and print what happened.
    Deliver {
        /// The plan: a JSON array of {"event", "note", "signature": "valid"|"wrong-secret"|"key:N",
        /// "signed_seconds_ago": n}.
        plan: std::path::PathBuf,
        /// The receiver's base URL; the event's path (`/webhooks/{source}`) is appended.
        #[arg(long, default_value = "http://127.0.0.1:9000/lambda-url/receiver")]
        url: String,
    },
    /// Print the ledger, the subscriptions and the orders.
    Ledger {
        #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
        database_url: String,
    },
    /// Re-sign the event files in events/receiver/ at their own timestamps.
    SignEvents,
    /// Rough throughput check of the inline receive path (not a benchmark suite): sends `n`
    /// new Stripe payment_intent.succeeded deliveries through the receive path in-process, at
    /// `concurrency`, and prints deliveries/s and this process's CPU per delivery.
    Load {
        #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
        database_url: String,
        #[arg(long, default_value_t = 5000)]
        n: usize,
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        /// Send the limits as SET LOCAL with every BEGIN (HOOKLEDGER_DB_TRANSACTION_LIMITS).
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        transaction_limits: bool,
        /// Named statements prepared once per connection (HOOKLEDGER_DB_STATEMENT_CACHE).
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        statement_cache: bool,
    },
    /// Lease due events, print "leased N", then hang without processing them (the crash
    /// recovery test kills this process with SIGKILL).
    LeaseAndHang {
        #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
        database_url: String,
        /// Lease length, seconds.
        #[arg(long, default_value_t = 60)]
        lease_secs: u64,
        /// Start an attempt of this many of the leased events (as a worker does just before
        /// running a handler) before hanging.
        #[arg(long, default_value_t = 0)]
        start: usize,
    },
}

#[derive(Deserialize)]
struct Step {
    event: String,
    note: String,
    #[serde(default = "valid")]
    signature: String,
    /// Sign this many seconds before now (to show the tolerance check).
    #[serde(default)]
    signed_seconds_ago: i64,
}

fn valid() -> String {
    "valid".to_owned()
}

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Migrate { database_url } => {
            let applied = shared::db::migrate(&DatabaseSettings::with_url(database_url)).await?;
            if applied.is_empty() {
                println!("migrations: up to date");
            } else {
                println!("migrations applied: {}", applied.join(", "));
            }
        }
        Command::CheckConfig => {
            // Display, as the functions print it at start-up.
            let settings = shared::Settings::from_env()
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let mut names: Vec<&str> = settings.sources.iter().map(|s| s.name.as_str()).collect();
            names.sort_unstable();
            println!("configuration: sources {}", names.join(", "));
        }
        Command::Deliver { plan, url } => deliver(&plan, &url).await?,
        Command::Ledger { database_url } => ledger(&database_url).await?,
        Command::SignEvents => sign_events()?,
        Command::Load {
            database_url,
            n,
            concurrency,
            transaction_limits,
            statement_cache,
        } => {
            let mut database = DatabaseSettings::with_url(database_url);
            database.pool_size = concurrency;
            database.transaction_limits = transaction_limits;
            database.statement_cache = statement_cache;
            load(database, n, concurrency).await?
        }
        Command::LeaseAndHang {
            database_url,
            lease_secs,
            start,
        } => {
            let pool = shared::db::pool(&DatabaseSettings::with_url(database_url))?;
            let conn = pool.get().await?;
            let now = SystemTime::now();
            let leased = shared::ledger::lease_due(
                &conn,
                now,
                now + std::time::Duration::from_secs(lease_secs),
                100,
            )
            .await?;
            let mut started = 0;
            for event in leased.iter().take(start) {
                if shared::ledger::start(&conn, event).await?.is_some() {
                    started += 1;
                }
            }
            println!("leased {}, started {started}", leased.len());
            std::future::pending::<()>().await;
        }
    }
    Ok(())
}

async fn deliver(plan: &std::path::Path, base: &str) -> Result<()> {
    let steps: Vec<Step> = serde_json::from_str(
        &std::fs::read_to_string(plan).with_context(|| format!("reading {}", plan.display()))?,
    )?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    let client = reqwest::Client::new();
    for (n, step) in steps.iter().enumerate() {
        let mut event = EventFile::load(&step.event)?;
        let source = event.source()?.to_owned();
        let config = local_source(&source)?;
        let at = now - step.signed_seconds_ago;
        match step.signature.as_str() {
            "valid" => event.sign(&config.verifier, 0, at)?,
            // An older secret still configured during a rotation.
            kind if kind.starts_with("key:") => {
                let index: usize = kind[4..].parse().context("key:<index>")?;
                event.sign(
                    &config.verifier,
                    index.min(config.verifier.key_count() - 1),
                    at,
                )?
            }
            "wrong-secret" => {
                let wrong = verifier_with_secret(&config, wrong_secret(config.scheme))?;
                event.sign(&wrong, 0, at)?
            }
            other => return Err(anyhow!("unknown signature kind {other:?}")),
        }
        let mut request = client
            .post(format!("{base}/webhooks/{source}"))
            .body(event.body()?);
        for (name, value) in event.headers() {
            request = request.header(name, value);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("sending {} to {base}", step.event))?;
        let status = response.status().as_u16();
        let replayed = response
            .headers()
            .get("idempotent-replayed")
            .map(|_| " [Idempotent-Replayed]")
            .unwrap_or("");
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(|v| format!(" [Retry-After: {v}]"))
            .unwrap_or_default();
        let body = response.text().await?;
        println!(
            "{:>2}. {:<52} -> {status} {body}{replayed}{retry_after}",
            n + 1,
            format!("{} ({source})", step.note),
        );
    }
    Ok(())
}

/// A secret of the right shape for `scheme` that is not the configured one.
fn wrong_secret(scheme: Scheme) -> &'static str {
    match scheme {
        // Standard Webhooks secrets are base64 after the prefix: keep it decodable.
        Scheme::StandardWebhooks => "whsec_bm90IHRoZSBjb25maWd1cmVkIHNlY3JldA==",
        _ => "whsec_not_the_configured_secret",
    }
}

async fn ledger(database_url: &str) -> Result<()> {
    let client = shared::db::connect(&DatabaseSettings::with_url(database_url)).await?;
    println!("webhook_event:");
    println!(
        "  {:<16} {:<38} {:<30} {:<10} {:>4}  response_body",
        "source", "event_id", "event_type", "status", "http"
    );
    for row in client
        .query(
            "SELECT source, event_id, event_type, status::text, response_status, \
             coalesce(response_body::text, '') FROM webhook_event ORDER BY claimed_at, event_id",
            &[],
        )
        .await?
    {
        let status: Option<i16> = row.get(4);
        println!(
            "  {:<16} {:<38} {:<30} {:<10} {:>4}  {}",
            row.get::<_, String>(0),
            row.get::<_, String>(1),
            row.get::<_, String>(2),
            row.get::<_, String>(3),
            status.map(|s| s.to_string()).unwrap_or_default(),
            row.get::<_, String>(5),
        );
    }
    println!("subscriptions:");
    for row in client
        .query(
            "SELECT subscription_id, plan, status, version, event_id FROM subscriptions \
             ORDER BY subscription_id",
            &[],
        )
        .await?
    {
        println!(
            "  {:<24} {:<22} {:<10} version {}  (from {})",
            row.get::<_, String>(0),
            row.get::<_, Option<String>>(1).unwrap_or_default(),
            row.get::<_, String>(2),
            row.get::<_, i64>(3),
            row.get::<_, String>(4),
        );
    }
    println!("orders:");
    for row in client
        .query(
            "SELECT order_id, total_minor, currency, event_id FROM orders ORDER BY recorded_at",
            &[],
        )
        .await?
    {
        println!(
            "  {:<20} {:>8} {}  (from {})",
            row.get::<_, String>(0),
            row.get::<_, i64>(1),
            row.get::<_, String>(2),
            row.get::<_, String>(3),
        );
    }
    Ok(())
}

fn sign_events() -> Result<()> {
    let dir = events_dir().join("receiver");
    let mut names: Vec<_> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.ends_with(".json") && !n.contains("bad-signature") && !n.contains("invalid-base64")
        })
        .collect();
    names.sort();
    for name in names {
        let mut event = EventFile::load(&format!("receiver/{name}"))?;
        let config = local_source(event.source()?)?;
        let at = event.signed_at().unwrap_or(0);
        event.sign(&config.verifier, 0, at)?;
        let text = serde_json::to_string_pretty(&event.json)? + "\n";
        std::fs::write(dir.join(&name), text)?;
        println!("signed receiver/{name} at t={at}");
    }
    Ok(())
}

/// User + system CPU time of this process, from /proc/self/stat (Linux), in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command name.
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    ticks / 100.0
}

async fn load(database: DatabaseSettings, n: usize, concurrency: usize) -> Result<()> {
    let settings = shared::Settings {
        database,
        sources: shared::Sources::from_json(&hookledger_tests::local_sources_json()?)?,
        sources_reload: Default::default(),
        worker: Default::default(),
        worker_function: None,
        sweep: Default::default(),
        audit: Default::default(),
    };
    let pool = shared::db::pool(&settings.database)?;
    let receiver = std::sync::Arc::new(shared::Receiver::new(&settings, pool));
    let stripe = local_source("stripe")?;
    // Log every delivery as the function does (redirect stdout to discard it); results go to
    // stderr.
    shared::telemetry::init();
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    let run = format!("{now}");
    let deliveries: Vec<(http::HeaderMap, Vec<u8>)> = (0..n)
        .map(|i| {
            let body = serde_json::to_vec(&serde_json::json!({
                "id": format!("evt_load_{run}_{i}"), "object": "event", "created": now,
                "type": "payment_intent.succeeded",
                "data": {"object": {"id": format!("pi_load_{run}_{i}"), "amount": 1000 + i,
                    "amount_received": 1000 + i, "currency": "usd",
                    "metadata": {"order_id": format!("ord_load_{run}_{i}")}}}
            }))
            .unwrap_or_default();
            let mut headers = http::HeaderMap::new();
            for (name, value) in stripe.verifier.sign(0, "", now, &body) {
                if let (Ok(name), Ok(value)) = (
                    http::HeaderName::from_bytes(name.as_bytes()),
                    http::HeaderValue::from_str(&value),
                ) {
                    headers.insert(name, value);
                }
            }
            (headers, body)
        })
        .collect();
    // Warm up the pool's connections and their prepared statements.
    let warm: Vec<_> = deliveries.iter().take(concurrency).cloned().collect();
    let deliveries = std::sync::Arc::new(deliveries);
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(concurrency));
    let mut tasks = Vec::new();
    for (headers, body) in warm {
        let receiver = receiver.clone();
        tasks.push(tokio::spawn(async move {
            receiver
                .receive("stripe", &headers, &body, now)
                .await
                .status
        }));
    }
    for task in tasks {
        task.await?;
    }
    let (cpu_start, wall_start) = (cpu_seconds(), std::time::Instant::now());
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (receiver, deliveries, next) = (receiver.clone(), deliveries.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut ok = 0usize;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((headers, body)) = deliveries.get(i) else {
                    return ok;
                };
                if receiver.receive("stripe", headers, body, now).await.status == 200 {
                    ok += 1;
                }
            }
        }));
    }
    let mut ok = 0;
    for task in tasks {
        ok += task.await?;
    }
    let wall = wall_start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_start;
    let measured = n - concurrency;
    eprintln!(
        "{measured} deliveries at concurrency {concurrency}: {ok} answered 200, {:.0} deliveries/s, \
         {:.0} us of this process's CPU per delivery",
        measured as f64 / wall,
        cpu * 1e6 / measured as f64
    );
    Ok(())
}
