//! pgbench runs of the scripts (a), (b), (c): the variables taken from one real delivery, and
//! the summary parsed from pgbench's output.

use std::fmt::Write as _;

use anyhow::{bail, Context, Result};
use bench::{order_event_body, unix_now};
use serde_json::json;
use sha2::Digest;

/// The scripts by their letter, in `--scripts`.
pub const SCRIPTS: [(&str, &str); 3] = [
    ("a", "a-receiver.sql"),
    ("b", "b-seeds.sql"),
    ("c", "c-one-statement.sql"),
];

/// The pgbench variables every script uses, from one real delivery's values.
fn pgbench_vars(run: u64) -> Vec<String> {
    // The same length as the receiver's per-event bodies (tag `limit_<10 digits>`, i >= 1000).
    let body = order_event_body("limit_0000000000", 1000, unix_now());
    let digest = sha2::Sha256::digest(&body);
    let identity = sha2::Sha256::digest(digest);
    let response = json!({"order_id": "ord_pgbench_000000000000", "status": "recorded"});
    [
        "n=0".to_owned(),
        format!("run={run}"),
        "source=stripe".to_owned(),
        "event_type=payment_intent.succeeded".to_owned(),
        format!("digest=\\x{}", hex(&digest)),
        format!("payload=\\x{}", hex(&body)),
        format!("identity=\\x{}", hex(&identity)),
        "replayed=false".to_owned(),
        "amount=1000".to_owned(),
        "currency=usd".to_owned(),
        "status=200".to_owned(),
        format!("response={response}"),
    ]
    .into_iter()
    .flat_map(|v| ["-D".to_owned(), v])
    .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// One pgbench run's parsed summary.
#[derive(Debug, Clone, Default)]
pub struct PgbenchRun {
    /// Transactions per second.
    pub tps: f64,
    /// Mean latency, milliseconds.
    pub latency_avg_ms: f64,
    /// Transactions processed.
    pub processed: u64,
    /// Transactions failed.
    pub failed: u64,
}

static RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Runs pgbench with `mode` (`prepared` or `extended`), `clients`, and either `-T seconds` or
/// `-t transactions`, against `url`.
pub async fn pgbench(
    url: &str,
    script: &str,
    mode: &str,
    clients: usize,
    limit: (&str, u64),
) -> Result<PgbenchRun> {
    let run =
        RUN.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + unix_now() as u64 % 1000 * 100;
    let threads = clients.clamp(1, 2);
    let mut args: Vec<String> = vec![
        "-n".into(),
        "-M".into(),
        mode.into(),
        "-c".into(),
        clients.to_string(),
        "-j".into(),
        threads.to_string(),
        limit.0.into(),
        limit.1.to_string(),
    ];
    args.extend(pgbench_vars(run));
    args.extend(["-f".into(), script.into()]);
    let output = tokio::process::Command::new("pgbench")
        .args(&args)
        .arg(url)
        .output()
        .await
        .context("running pgbench (is it on PATH?)")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let field = |prefix: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .and_then(|rest| {
                rest.trim()
                    .split([' ', '/'])
                    .next()
                    .and_then(|v| v.parse().ok())
            })
    };
    let result = PgbenchRun {
        tps: field("tps =").unwrap_or(f64::NAN),
        latency_avg_ms: field("latency average =").unwrap_or(f64::NAN),
        processed: field("number of transactions actually processed:").unwrap_or(0.0) as u64,
        failed: field("number of failed transactions:").unwrap_or(0.0) as u64,
    };
    if !output.status.success() || result.tps.is_nan() {
        bail!("pgbench failed ({}):\n{text}", output.status);
    }
    Ok(result)
}
