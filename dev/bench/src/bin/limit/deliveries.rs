//! The in-process receiver configured as deployed, and the signed deliveries
//! ([`bench::signed_deliveries`]) delivered to it at a concurrency, each timed.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use bench::Delivery;
use shared::config::DatabaseSettings;

/// One inline Stripe source, as bench-load's.
const SOURCES_JSON: &str = r#"[
  {"name": "stripe", "scheme": "stripe", "secrets": ["whsec_bench_limit_placeholder"], "mode": "inline"}
]"#;

/// The same source with the example Rust handler's effect declared as a SQL handler instead:
/// the same `INSERT` into `orders`, its parameters taken from the same fields
/// (`handlers/src/examples/stripe_orders.rs`), so the two differ only in who decides the write.
const SQL_SOURCES_JSON: &str = r#"[
  {"name": "stripe", "scheme": "stripe", "secrets": ["whsec_bench_limit_placeholder"], "mode": "inline",
   "handlers": [
     {"event_types": ["payment_intent.succeeded"],
      "sql": [
        {"statement": "INSERT INTO orders (order_id, total_minor, currency, source, event_id) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (order_id) DO NOTHING",
         "params": [{"path": "/data/object/metadata/order_id", "type": "text"},
                    {"path": "/data/object/amount_received", "type": "bigint"},
                    {"path": "/data/object/currency", "type": "text"},
                    {"event": "source"},
                    {"event": "id"}]}],
      "response": {"status": 200, "body": {"status": "recorded"}}}]}
]"#;

/// Which handler decides a new event's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// The example Rust handler (plain SQL).
    Rust,
    /// The same effect as a SQL handler in the sources JSON.
    Sql,
}

/// The in-process receiver and its Stripe source (to sign deliveries with).
pub struct Bench {
    /// `shared::Receiver` over its own pool.
    pub receiver: Arc<shared::Receiver>,
    /// The `stripe` source of [`SOURCES_JSON`].
    pub stripe: Arc<shared::SourceConfig>,
}

/// The receiver over `url` with a pool of `pool_size`, configured as deployed (limits on the
/// database, none sent per transaction).
///
/// # Errors
/// When the sources do not parse or the pool cannot be built.
pub fn receiver(url: &str, pool_size: usize) -> Result<Bench> {
    receiver_with(url, pool_size, Handler::Rust)
}

/// As [`receiver`], with `handler` deciding the `payment_intent.succeeded` effect.
///
/// # Errors
/// When the sources do not parse or the pool cannot be built.
pub fn receiver_with(url: &str, pool_size: usize, handler: Handler) -> Result<Bench> {
    let mut database = DatabaseSettings::with_url(url.to_owned());
    database.pool_size = pool_size;
    // As template.yaml configures the receiver: the limits live on its login (`migrate`).
    database.transaction_limits = false;
    let (receiver, stripe) = match handler {
        Handler::Rust => bench::in_process_receiver(database, SOURCES_JSON, "stripe", true, None)?,
        Handler::Sql => {
            bench::in_process_receiver(database, SQL_SOURCES_JSON, "stripe", false, None)?
        }
    };
    Ok(Bench { receiver, stripe })
}

/// Delivers `list` at `concurrency`; returns each delivery's latency (ms) and how many were
/// answered 200.
pub async fn deliver(
    receiver: Arc<shared::Receiver>,
    list: Vec<Delivery>,
    concurrency: usize,
    now: i64,
) -> Result<(Vec<f64>, usize)> {
    let list = Arc::new(list);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (receiver, list, next) = (receiver.clone(), list.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            let mut ok = 0usize;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((headers, body)) = list.get(i) else {
                    return (times, ok);
                };
                let start = Instant::now();
                let reply = receiver.receive("stripe", headers, body, now).await;
                times.push(start.elapsed().as_secs_f64() * 1000.0);
                if reply.status == 200 {
                    ok += 1;
                }
            }
        }));
    }
    let (mut times, mut ok) = (Vec::new(), 0);
    for task in tasks {
        let (t, o) = task.await?;
        times.extend(t);
        ok += o;
    }
    Ok((times, ok))
}
