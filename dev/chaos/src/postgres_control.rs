//! Restarting the harness's PostgreSQL under load: `pg_ctl restart -m immediate` (every backend
//! is killed without a checkpoint, as a crash or a failover does; the server replays its WAL on
//! start, so only committed transactions survive, which the durable cluster of
//! [`crate::cluster`] guarantees), as the cluster's owner, on the same data directory, port and
//! options (pg_ctl reuses `postmaster.opts`), then waits until it accepts connections again.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::cluster::Cluster;

/// How long a restart may take before the harness gives up.
pub const RESTART_TIMEOUT: Duration = Duration::from_secs(60);

/// One restart's timings.
#[derive(Debug, Clone, Copy)]
pub struct Restarted {
    /// From the command to `pg_ctl` returning (the server is up).
    pub pg_ctl: Duration,
    /// From the command to the first successful `SELECT 1` on the cluster's URL.
    pub accepting: Duration,
}

/// `pg_ctl restart -m immediate -w` on `cluster`, then waits for a `SELECT 1` to succeed.
///
/// # Errors
/// `pg_ctl` fails, or the server does not accept a connection within [`RESTART_TIMEOUT`].
pub async fn restart_immediate(cluster: &Cluster) -> Result<Restarted> {
    let started = Instant::now();
    let mut command = cluster.as_owner(&cluster.pg_ctl());
    command
        .arg("-D")
        .arg(&cluster.data_dir)
        .arg("-l")
        .arg(cluster.dir.join("server.log"))
        .args(["-m", "immediate", "-w", "-t"])
        .arg(RESTART_TIMEOUT.as_secs().to_string())
        .arg("restart");
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .context("joining pg_ctl")?
        .context("running pg_ctl restart")?;
    if !output.status.success() {
        bail!(
            "pg_ctl restart failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let pg_ctl = started.elapsed();
    wait_accepting(&cluster.url, RESTART_TIMEOUT).await?;
    Ok(Restarted {
        pg_ctl,
        accepting: started.elapsed(),
    })
}

/// Polls `url` with `SELECT 1` until it succeeds; returns how long it took.
///
/// # Errors
/// No success within `timeout`.
pub async fn wait_accepting(url: &str, timeout: Duration) -> Result<Duration> {
    let started = Instant::now();
    loop {
        let attempt = async {
            let client = crate::cluster::connect(url).await?;
            client.simple_query("SELECT 1").await?;
            anyhow::Ok(())
        };
        match tokio::time::timeout(Duration::from_secs(2), attempt).await {
            Ok(Ok(())) => return Ok(started.elapsed()),
            _ if started.elapsed() > timeout => {
                bail!("PostgreSQL did not accept a connection within {timeout:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
