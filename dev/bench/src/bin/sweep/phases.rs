//! The measured phases: the server settled, then the claim traffic beside a background
//! deletion (nothing, `shared::sweep::run`, or one unbatched `DELETE`), with the server's
//! counters read before and after.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use shared::config::SweepSettings;
use shared::retention::Retention;

use crate::setup::Bench;
use crate::traffic::Samples;

/// What runs beside the claim traffic in a phase.
pub enum Background {
    /// Nothing: the quiet baseline.
    Nothing,
    /// `shared::sweep::run` with these settings; it ends the phase when it finishes early.
    Sweep(SweepSettings),
    /// One unbatched `DELETE` of every expired row ([`Bench::delete_unbatched`]).
    Delete,
}

/// What a phase's background deleted, and how it stopped.
#[derive(Default, Clone)]
pub struct Deletion {
    /// Rows deleted.
    pub rows: u64,
    /// Seconds the deletion ran.
    pub secs: f64,
    /// Batches (1 for the unbatched `DELETE`).
    pub batches: u32,
    /// Why it stopped: the sweep report's `stopped` (`OutOfTime`, `Done`, ...), `Done` for the
    /// `DELETE`.
    pub stopped: String,
}

/// Server counters (`pg_stat_wal`, `pg_stat_bgwriter`, `pg_stat_user_tables`), and the WAL
/// position in bytes.
#[derive(Default, Clone, Copy)]
pub struct ServerStats {
    pub lsn_bytes: f64,
    pub wal_fpi: i64,
    pub checkpoints_timed: i64,
    pub checkpoints_req: i64,
    pub autovacuum_count: i64,
    pub buffers_backend_fsync: i64,
}

/// One measured phase.
pub struct Phase {
    /// Its name in the report's tables.
    pub name: String,
    /// How long the phase was measured (a sweep that finishes early ends it).
    pub window: Duration,
    /// The phase's planned length.
    pub planned: Duration,
    /// Seconds [`Bench::settle`] waited before it.
    pub settle_secs: f64,
    /// Claim latencies.
    pub samples: Samples,
    /// What the background deleted (`None` for no sweep).
    pub deletion: Option<Deletion>,
    /// Server counters, after minus before (WAL bytes from the LSN).
    pub stats: ServerStats,
}

impl Bench {
    /// Sets `wal_compression` server-wide (`ALTER SYSTEM`, reload), or resets it with `None`.
    pub async fn set_wal_compression(&self, method: Option<&str>) -> Result<()> {
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

    /// The server's counters now.
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

    /// One phase: settle, read the counters, run the traffic beside `background` for `window`
    /// (less when a sweep finishes early), read the counters again.
    pub async fn phase(
        &self,
        name: &str,
        window: Duration,
        background: Background,
    ) -> Result<Phase> {
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
    pub async fn delete_unbatched(&self) -> Result<u64> {
        let cutoff = Retention::default().completed_cutoff(SystemTime::now());
        Ok(self
            .admin
            .execute(
                "DELETE FROM webhook_event WHERE status = 'completed' AND claimed_at < $1",
                &[&cutoff],
            )
            .await?)
    }
}
