//! Measurement helpers: CPU from /proc and getrusage, percentiles and rounding, Stripe
//! signing, machine facts.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use hmac::{KeyInit, Mac};

/// Clock ticks per second of /proc's CPU times (`sysconf(_SC_CLK_TCK)`; 100 on every Linux
/// this runs on, used if sysconf fails).
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// CPU time a process (or a set of processes) used, in seconds, user and system apart.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// User-mode seconds (`utime`, field 14 of /proc/<pid>/stat).
    pub user_s: f64,
    /// Kernel-mode seconds (`stime`, field 15).
    pub sys_s: f64,
}

impl CpuTimes {
    /// `self - earlier`, field by field.
    pub fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            user_s: self.user_s - earlier.user_s,
            sys_s: self.sys_s - earlier.sys_s,
        }
    }
}

/// The fields after the command name of /proc/<pid>/stat (field 3, the state, is index 0).
fn stat_fields(pid: u32) -> Result<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // The command name (field 2) is in parentheses and may itself hold spaces or ')'.
    let (_, rest) = stat
        .rsplit_once(')')
        .with_context(|| format!("/proc/{pid}/stat has no command name"))?;
    Ok(rest.split_whitespace().map(str::to_owned).collect())
}

/// User and system CPU of process `pid` itself (threads included, children not), from
/// /proc/<pid>/stat fields 14 and 15 (proc(5)), in seconds.
///
/// # Errors
/// The process does not exist or its stat line does not parse.
pub fn process_cpu(pid: u32) -> Result<CpuTimes> {
    let fields = stat_fields(pid)?;
    let tick = |i: usize| -> Result<f64> {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .with_context(|| format!("/proc/{pid}/stat field {}", i + 3))
    };
    let hz = clock_ticks_per_second();
    Ok(CpuTimes {
        user_s: tick(11)? / hz,
        sys_s: tick(12)? / hz,
    })
}

/// User and system CPU of this process (every thread), from getrusage(2) `RUSAGE_SELF`: the
/// scheduler's own accounting to the microsecond, where /proc/<pid>/stat counts clock ticks
/// (10 ms). Zero when getrusage fails.
pub fn own_cpu() -> CpuTimes {
    // SAFETY: `rusage` is plain data (integers and timevals): all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one `rusage` through the pointer, valid for writes here.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return CpuTimes::default();
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    CpuTimes {
        user_s: secs(usage.ru_utime),
        sys_s: secs(usage.ru_stime),
    }
}

/// `root` and every live descendant of it (from each /proc/<pid>/stat's parent pid, field 4).
pub fn process_tree(root: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Ok(fields) = stat_fields(pid) {
                if let Some(ppid) = fields.get(1).and_then(|v| v.parse::<u32>().ok()) {
                    parents.push((pid, ppid));
                }
            }
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        for (pid, ppid) in &parents {
            if *ppid == parent && !tree.contains(pid) {
                tree.push(*pid);
            }
        }
        i += 1;
    }
    tree
}

/// The summed CPU of `pids` (a process that has gone counts as nothing).
pub fn processes_cpu(pids: &[u32]) -> CpuTimes {
    pids.iter()
        .filter_map(|pid| process_cpu(*pid).ok())
        .fold(CpuTimes::default(), |a, b| CpuTimes {
            user_s: a.user_s + b.user_s,
            sys_s: a.sys_s + b.sys_s,
        })
}

/// The `q`-quantile (0..=1) of `sorted` (ascending) by the nearest-rank method; 0 when empty.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `v` rounded to 3 decimals (the JSON reports' figures).
pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The `Stripe-Signature` header value for `body` signed with `secret` at `t` (unix seconds):
/// `t=<t>,v1=<hex HMAC-SHA256(secret, "{t}.{body}")>` (Stripe's "Verify webhook signatures
/// manually": the signed payload is the timestamp, a dot, and the raw body).
pub fn stripe_signature(secret: &str, t: i64, body: &[u8]) -> String {
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// A Stripe `payment_intent.succeeded` event (the shape the example order handler reads:
/// `data.object.{id,amount,amount_received,currency,metadata.order_id}`), `id` as its event id.
pub fn stripe_payment_event(id: &str, created: i64, amount: i64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": id, "object": "event", "api_version": "2024-06-20", "created": created,
        "type": "payment_intent.succeeded", "livemode": false, "pending_webhooks": 1,
        "data": {"object": {"id": format!("pi_{id}"), "object": "payment_intent",
            "amount": amount, "amount_received": amount, "currency": "usd", "status": "succeeded",
            "metadata": {"order_id": format!("ord_{id}")}}}
    }))
    .unwrap_or_default()
}

/// Unix seconds now.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn first_line_of(command: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(command).args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().map(|l| l.trim().to_owned())
}

fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The CPU's model, from the first `model name` line of /proc/cpuinfo; `None` when there is
/// none (or no /proc/cpuinfo).
pub fn cpu_model() -> Option<String> {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

/// The load averages over 1, 5 and 15 minutes from /proc/loadavg, as `0.52, 0.58, 0.59`
/// (empty when unreadable).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Facts about this machine (no database): CPU model, logical cores, memory, load average,
/// kernel, rustc. A JSON object of strings and numbers.
pub fn machine_facts() -> serde_json::Value {
    let cpu_model = cpu_model().unwrap_or_else(|| "unknown".into());
    let mem_kib = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    serde_json::json!({
        "cpu_model": cpu_model,
        "logical_cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "memory_gib": (mem_kib as f64 / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        "load_average": read_trimmed("/proc/loadavg").unwrap_or_default(),
        "kernel": read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default(),
        "rustc": first_line_of("rustc", &["--version"]).unwrap_or_default(),
        "clock_ticks_per_second": clock_ticks_per_second(),
    })
}

/// PostgreSQL's version and the settings that decide commit cost, from a live connection:
/// `server_version`, `fsync`, `synchronous_commit`, `full_page_writes`, `wal_level`,
/// `shared_buffers`, `max_connections`, `wal_sync_method`.
///
/// # Errors
/// A `SHOW` fails.
pub async fn postgres_facts(client: &tokio_postgres::Client) -> Result<serde_json::Value> {
    let mut facts = serde_json::Map::new();
    for name in [
        "server_version",
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "wal_level",
        "wal_sync_method",
        "shared_buffers",
        "max_connections",
    ] {
        let row = client
            .query_one(&format!("SHOW {name}"), &[])
            .await
            .with_context(|| format!("SHOW {name}"))?;
        let value: String = row.get(0);
        facts.insert(name.to_owned(), serde_json::Value::String(value));
    }
    Ok(serde_json::Value::Object(facts))
}

/// The receiver login's limits in template.yaml (the Schema resource's `Logins`), set on the
/// bench database for every session: the receiver runs as deployed, with its limits on the
/// database side and `HOOKLEDGER_DB_TRANSACTION_LIMITS=false` (no `SET LOCAL` per
/// transaction), so a plain-SQL handler's new event is one statement. The peer and pgbench get
/// the same limits, which cost them nothing.
pub const DEPLOYED_LIMITS: &str = "DO $$ BEGIN \
    EXECUTE format('ALTER DATABASE %I SET statement_timeout = 5000', current_database()); \
    EXECUTE format('ALTER DATABASE %I SET lock_timeout = 2000', current_database()); \
    EXECUTE format('ALTER DATABASE %I SET idle_in_transaction_session_timeout = 10000', current_database()); \
    END $$";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 500.0);
        assert_eq!(percentile(&v, 0.99), 990.0);
        assert_eq!(percentile(&v, 0.999), 999.0);
        assert_eq!(percentile(&v, 1.0), 1000.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
        assert_eq!(percentile(&[7.0], 0.999), 7.0);
    }

    #[test]
    fn stripe_signature_matches_stripes_scheme() {
        // HMAC-SHA256("whsec_test", "1700000000.{}") computed independently with Python's hmac.
        let header = stripe_signature("whsec_test", 1_700_000_000, b"{}");
        assert_eq!(
            header,
            "t=1700000000,v1=35495024f4ef3f94e5a93e22221544c4b75e9a42300cd965ab81cb85cd994e91"
        );
    }

    #[test]
    fn own_cpu_is_readable() {
        let cpu = process_cpu(std::process::id()).expect("own stat");
        assert!(cpu.user_s >= 0.0 && cpu.sys_s >= 0.0);
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(5) {}
        let own = own_cpu();
        assert!(own.user_s + own.sys_s > 0.0);
        assert!(process_tree(std::process::id()).contains(&std::process::id()));
    }
}
