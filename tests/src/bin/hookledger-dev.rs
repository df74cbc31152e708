//! `hookledger-dev`: test and development tooling for `make demo`, `make run`, the end-to-end
//! tests and maintainers. Not for operators: their commands (`migrate`, `check-config`,
//! `redrive`, `inspect`, `stuck`, `sweep`, `audit`) are the `hookledger` CLI's (cli/), and the
//! throughput check is the bench crate's `bench-load`.
//!
//! - `deliver PLAN`: send the deliveries listed in a plan (e.g. `events/demo-plan.json`) to a
//!   running receiver over HTTP, re-signed now with the local development secrets, and print
//!   one line per delivery.
//! - `ledger`: print the `webhook_event` rows and the `orders` rows.
//! - `sign-events`: re-sign every event file in `events/receiver/` at the timestamp it carries
//!   (after editing a body), except files named `*bad-signature*` and `*invalid-base64*`.
//! - `lease-and-hang`: lease due events and hang (the crash-recovery test kills it).
//! - `lease-outbox-and-hang`: lease due outbox messages and hang without dispatching them (the
//!   outbox's crash test kills it between commit and dispatch).
//! - `drain`: one worker drain as the worker function runs it, settings from the environment
//!   (the outbox's crash test kills it in the middle of a dispatch).

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use clap::{Parser, Subcommand};
use hookledger_tests::{events_dir, local_source, verifier_with_secret, EventFile};
use hookledger_verify::Scheme;
use serde::Deserialize;
use shared::config::DatabaseSettings;

#[derive(Parser)]
#[command(about = "hookledger local tooling")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
    /// Lease due outbox messages, print "leased N", then hang without dispatching them (the
    /// outbox crash test kills this process with SIGKILL).
    LeaseOutboxAndHang {
        #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
        database_url: String,
        /// Lease length, seconds.
        #[arg(long, default_value_t = 60)]
        lease_secs: u64,
    },
    /// Run one worker drain with no handlers (settings from the environment, as the worker
    /// function reads them) and print its summary as JSON.
    Drain,
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
        Command::Deliver { plan, url } => deliver(&plan, &url).await?,
        Command::Ledger { database_url } => ledger(&database_url).await?,
        Command::SignEvents => sign_events()?,
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
        Command::LeaseOutboxAndHang {
            database_url,
            lease_secs,
        } => {
            let pool = shared::db::pool(&DatabaseSettings::with_url(database_url))?;
            let conn = pool.get().await?;
            let now = SystemTime::now();
            let leased = shared::ledger::outbox::lease_due(
                &conn,
                now,
                now + std::time::Duration::from_secs(lease_secs),
                100,
            )
            .await?;
            println!("leased {}", leased.len());
            std::future::pending::<()>().await;
        }
        Command::Drain => {
            let settings = shared::Settings::from_lookup(|name| std::env::var(name).ok())
                .map_err(|e| anyhow!("{e}"))?;
            let pool = shared::db::pool(&settings.database)?;
            let worker =
                shared::work::Worker::new(&settings, pool, shared::handler::Registry::new());
            let summary = worker
                .drain(SystemTime::now, || std::time::Duration::from_secs(600))
                .await?;
            println!("{}", serde_json::to_string(&summary)?);
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
    // The stripe source's SQL handler writes it (docs/guide/without-rust.md).
    println!("refunds:");
    for row in client
        .query(
            "SELECT charge_id, amount_minor, currency, refunded_at::text, event_id FROM refunds \
             ORDER BY refunded_at, event_id",
            &[],
        )
        .await?
    {
        println!(
            "  {:<20} {:>8} {}  refunded {}  (from {})",
            row.get::<_, String>(0),
            row.get::<_, i64>(1),
            row.get::<_, String>(2),
            row.get::<_, String>(3),
            row.get::<_, String>(4),
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
