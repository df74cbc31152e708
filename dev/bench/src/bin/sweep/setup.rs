//! The run's set-up: its options, its connections, its sources, and the completed events the
//! claim traffic shares ([`Bench`]).

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Result;
use shared::config::DatabaseSettings;
use shared::db::Pool;
use shared::Sources;

use crate::args::Args;
use crate::claims::LiveEvent;
use crate::sources::{AUDIT_SOURCES_JSON, SOURCES_JSON};

/// One run: its options, its connections, and the completed events the claim traffic draws
/// its duplicates from.
pub struct Bench {
    /// The command line.
    pub args: Args,
    /// The throwaway database (`--database-url`), pool size `--connections`.
    pub settings: DatabaseSettings,
    /// The bench's two sources ([`SOURCES_JSON`]).
    pub sources: Sources,
    /// The auditor's sources ([`AUDIT_SOURCES_JSON`]).
    pub audit_sources: Sources,
    /// Claim traffic.
    pub pool: Pool,
    /// Setup, statistics, the unbatched DELETE: no per-transaction limits.
    pub admin: tokio_postgres::Client,
    /// The run's start, for the progress lines (`step!`).
    pub t0: Instant,
    /// Completed live events the duplicates are drawn from.
    pub completed: Arc<Mutex<Vec<LiveEvent>>>,
    /// The next new live event's number.
    pub next_id: Arc<AtomicU64>,
}

impl Bench {
    /// Connects to the database (the admin session and the claim pool) and parses the sources.
    pub async fn new(args: Args) -> Result<Self> {
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
}
