//! The erasure's run in bounded batches ([`forget`]), its dry run ([`preview`]), the entry
//! points that take a connection from the pool and log ([`run`], [`run_target`]), and the
//! report.

use serde::Serialize;

use super::request::{Erasure, ForgetError, ForgetRequest, Target};
use super::sql;
use crate::config::Sources;
use crate::db::Pool;
use crate::ledger::Connection;

/// Events erased per statement by [`run`].
pub const BATCH: i64 = 500;

/// Batches one [`run`] goes to at most (so at most `BATCH * MAX_BATCHES` events): a subject
/// with more events is finished by running the same request again (`done: false`).
pub const MAX_BATCHES: u32 = 200;

/// Most unfinished ids a report lists ([`ForgetReport::unfinished`]).
pub const LISTED_IDS: usize = 100;

/// What an erasure did (or, in a dry run, would do). Names no erased value and no subject.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ForgetReport {
    /// The source.
    pub source: String,
    /// `event` or `subject`.
    pub target: String,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// The target's events in the ledger, whatever their status (0: none is there).
    pub events: u64,
    /// Events erased (a dry run: that would be erased now).
    pub erased: u64,
    /// Outbox messages emptied (a dry run: that would be).
    pub outbox_messages: u64,
    /// How many of the target's events are unfinished (claimed, processing, failed, or with a
    /// message to dispatch) and were left with their payload: forget again once they finish.
    pub unfinished_count: u64,
    /// Their ids, the first [`LISTED_IDS`] in id order.
    pub unfinished: Vec<String>,
    /// Statements run (0 in a dry run).
    pub batches: u32,
    /// Whether every finished event of the target is erased now (a dry run: whether there is
    /// nothing to erase). `false` after `max_batches`: run the same request again.
    pub done: bool,
}

/// Erases `target`'s finished events on `conn` in batches of at most `batch_size` events, one
/// statement each committed on its own ([`sql::erase_batch`]), until a batch comes back short
/// or after `max_batches`; then counts what is left ([`sql::tally`]) for the report.
///
/// # Errors
/// [`ForgetError::Invalid`] for a `batch_size` or `max_batches` under 1;
/// [`ForgetError::Ledger`] when PostgreSQL fails (batches before it stay committed).
pub async fn forget(
    conn: &Connection,
    target: &Target,
    erasure: &Erasure,
    batch_size: i64,
    max_batches: u32,
) -> Result<ForgetReport, ForgetError> {
    if batch_size < 1 || max_batches < 1 {
        return Err(ForgetError::Invalid(
            "batch_size and max_batches must be at least 1".to_owned(),
        ));
    }
    let mut report = ForgetReport {
        source: target.source().to_owned(),
        target: target.kind().to_owned(),
        ..ForgetReport::default()
    };
    while report.batches < max_batches {
        let erased = sql::erase_batch(conn, target, erasure, batch_size).await?;
        report.batches += 1;
        report.erased += erased.events;
        report.outbox_messages += erased.messages;
        if erased.events < batch_size.unsigned_abs() {
            break;
        }
    }
    let left = sql::tally(conn, target, LISTED_IDS).await?;
    report.events = left.events;
    report.unfinished_count = left.unfinished;
    report.unfinished = left.unfinished_ids;
    report.done = left.erasable == 0;
    Ok(report)
}

/// What [`forget`] would erase of `target` now, writing nothing: `erased` and
/// `outbox_messages` count what would go.
///
/// # Errors
/// [`ForgetError::Ledger`] when PostgreSQL fails.
pub async fn preview(conn: &Connection, target: &Target) -> Result<ForgetReport, ForgetError> {
    let tally = sql::tally(conn, target, LISTED_IDS).await?;
    Ok(ForgetReport {
        source: target.source().to_owned(),
        target: target.kind().to_owned(),
        dry_run: true,
        events: tally.events,
        erased: tally.erasable,
        outbox_messages: tally.messages,
        unfinished_count: tally.unfinished,
        unfinished: tally.unfinished_ids,
        batches: 0,
        done: tally.erasable == 0,
    })
}

/// Runs `request` against `sources` (its source must be configured; by subject, with a
/// `subject`) through [`run_target`].
///
/// # Errors
/// [`ForgetError`].
pub async fn run(
    pool: &Pool,
    sources: &Sources,
    request: &ForgetRequest,
) -> Result<ForgetReport, ForgetError> {
    let (target, erasure) = request.target(sources)?;
    run_target(pool, &target, &erasure, request.dry_run).await
}

/// A dry run of `target` ([`preview`]) or its erasure ([`forget`], [`BATCH`] events a
/// statement, at most [`MAX_BATCHES`]) on a connection of `pool`; logs one `forget` line
/// (counts, and the event id of an erasure by id: never a subject, never a value).
///
/// # Errors
/// [`ForgetError`].
pub async fn run_target(
    pool: &Pool,
    target: &Target,
    erasure: &Erasure,
    dry_run: bool,
) -> Result<ForgetReport, ForgetError> {
    let conn = pool.get().await.map_err(|e| ForgetError::Pool(e.into()))?;
    let report = if dry_run {
        preview(&conn, target).await?
    } else {
        forget(&conn, target, erasure, BATCH, MAX_BATCHES).await?
    };
    let event_id = match target {
        Target::Event { event_id, .. } => Some(event_id.as_str()),
        Target::Subject { .. } => None,
    };
    tracing::info!(
        source = report.source.as_str(),
        target = report.target.as_str(),
        event_id,
        dry_run = report.dry_run,
        erased = report.erased,
        outbox_messages = report.outbox_messages,
        unfinished = report.unfinished_count,
        done = report.done,
        "forget"
    );
    Ok(report)
}

/// The subject of `source`'s event `event_id`: [`Target::Subject`] with the hash its claim
/// stored, for erasing every event of the subject of an event at hand (the console) without
/// its identifier. `Ok(None)` when the event is not in the ledger or names no subject.
///
/// # Errors
/// [`ForgetError::Ledger`] when PostgreSQL fails.
pub async fn subject_of(
    pool: &Pool,
    source: &str,
    event_id: &str,
) -> Result<Option<Target>, ForgetError> {
    let conn = pool.get().await.map_err(|e| ForgetError::Pool(e.into()))?;
    Ok(sql::subject_hash(&conn, source, event_id)
        .await?
        .map(|hash| Target::Subject {
            source: source.to_owned(),
            hash,
        }))
}
