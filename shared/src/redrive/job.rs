//! The re-drive's run: the request and its validation ([`RedriveSpec::selection`]), the moves in
//! batches under the invocation's time ([`run`]), its report, and one event read in full
//! ([`inspect`]).

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{outbox_sql, sql};
use crate::config::Sources;
use crate::db::Pool;
use crate::doorbell::Doorbell;
use crate::handler::Registry;
use crate::ledger::{self, LedgerError};
use crate::timestamp::parse_rfc3339;

/// Rows moved per statement.
pub const BATCH: i64 = 500;

/// Most event ids one request may name.
pub const MAX_EVENT_IDS: usize = 10_000;

/// Most event ids a report lists ([`RedriveReport::event_ids`]).
pub const LISTED_IDS: usize = 100;

/// Start no batch with less invocation time left than this, milliseconds.
pub const MARGIN_MS: u64 = 5_000;

/// What to re-drive, as the function's input `redrive` object and the CLI's flags give it:
/// `{"status": "dead", "event_ids": [...]}`, `{"status": "dead", "since": "...", "until":
/// "..."}` or `{"status": "ignored", "event_type": "...", "since": "...", "until": "..."}`
/// (times RFC 3339; `until` defaults to now); with `"outbox": true`, a dead-letter request
/// takes the events' dead outbox messages instead of the events.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RedriveSpec {
    /// `dead` or `ignored`.
    pub status: Which,
    /// Dead letters by id (at most [`MAX_EVENT_IDS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_ids: Option<Vec<String>>,
    /// Ignored events: the event type that has a handler now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Window start (inclusive), RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Window end (exclusive), RFC 3339; now when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Status `dead` only: re-drive dead outbox messages (by their events' ids, or by when
    /// they went dead) instead of dead events.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outbox: bool,
}

/// Which finished rows a re-drive takes.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Which {
    /// Dead letters.
    Dead,
    /// Events completed as `ignored`.
    Ignored,
}

/// What a re-drive did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RedriveReport {
    /// The source.
    pub source: String,
    /// `dead`, `ignored` or `outbox` (dead outbox messages).
    pub status: String,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// Rows matched that can run again (a dry run's "would re-drive"); for the outbox,
    /// messages.
    pub matched: u64,
    /// Rows moved back to `claimed` (outbox messages: to `pending`; 0 in a dry run).
    pub redriven: u64,
    /// Rows matched but refused: no stored payload.
    pub no_payload: u64,
    /// Named ids that are in the ledger but not dead (left alone); for the outbox, events
    /// whose messages are none of them dead.
    pub not_dead: Vec<String>,
    /// Named ids not in the ledger (for the outbox: with no outbox message).
    pub not_found: Vec<String>,
    /// Named ids refused for want of a payload.
    pub no_payload_ids: Vec<String>,
    /// The ids moved, oldest first (a dry run: the ids that would move), the first
    /// [`LISTED_IDS`] of them: what to `inspect` or watch. Empty for the outbox.
    pub event_ids: Vec<String>,
    /// For the outbox: the messages moved (a dry run: that would move), as their idempotency
    /// keys `{source}:{event_id}:{n}`, the first [`LISTED_IDS`] of them. Left out of the JSON
    /// when empty (every report but the outbox's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub idempotency_keys: Vec<String>,
    /// `false` when time ran short before every matching row moved: run the same request again.
    pub complete: bool,
}

/// Why a re-drive was refused or stopped. A refusal (`Invalid`, `UnknownSource`, `NoHandler`)
/// is fatal to the request: fix it and ask again; a database failure is retryable: the same
/// request again continues (what moved stays moved).
#[derive(Debug, thiserror::Error)]
pub enum RedriveError {
    /// The request is malformed (the message says what to change).
    #[error("{0}")]
    Invalid(String),
    /// The source is not configured: the worker would not process its events.
    #[error("source {0:?} is not configured")]
    UnknownSource(String),
    /// Re-running ignored events of a type that still has no handler would ignore them again.
    #[error("source {name:?} has no handler for event type {event_type:?}: register one before re-running its ignored events")]
    NoHandler {
        /// The source.
        name: String,
        /// The event type.
        event_type: String,
    },
    /// No database connection.
    #[error("no database connection")]
    Pool(#[from] crate::db::NoConnection),
    /// A ledger statement failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// A validated re-drive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Dead letters by id.
    DeadIds(Vec<String>),
    /// Dead letters that went dead in `[since, until)`.
    DeadBetween {
        /// Window start.
        since: SystemTime,
        /// Window end; the database's now when `None`.
        until: Option<SystemTime>,
    },
    /// The dead outbox messages of these events.
    OutboxIds(Vec<String>),
    /// Outbox messages that went dead in `[since, until)`.
    OutboxBetween {
        /// Window start.
        since: SystemTime,
        /// Window end; the database's now when `None`.
        until: Option<SystemTime>,
    },
    /// Ignored events of `event_type` first delivered in `[since, until)`.
    IgnoredBetween {
        /// The event type.
        event_type: String,
        /// Window start.
        since: SystemTime,
        /// Window end; the database's now when `None`.
        until: Option<SystemTime>,
    },
}

impl Selection {
    /// The window's end as given (`None`: now); `None` for ids.
    fn until(&self) -> Option<SystemTime> {
        match self {
            Selection::DeadIds(_) | Selection::OutboxIds(_) => None,
            Selection::DeadBetween { until, .. }
            | Selection::OutboxBetween { until, .. }
            | Selection::IgnoredBetween { until, .. } => *until,
        }
    }
}

impl RedriveSpec {
    /// Validates the spec.
    ///
    /// # Errors
    /// [`RedriveError::Invalid`] naming the field to change.
    pub fn selection(&self) -> Result<Selection, RedriveError> {
        let invalid = |why: &str| Err(RedriveError::Invalid(why.to_owned()));
        let time = |value: &Option<String>| -> Result<Option<SystemTime>, RedriveError> {
            value
                .as_deref()
                .map(parse_rfc3339)
                .transpose()
                .map_err(RedriveError::Invalid)
        };
        let since = time(&self.since)?;
        let until = time(&self.until)?;
        if let (Some(since), Some(until)) = (since, until) {
            if until <= since {
                return invalid("until must be after since");
            }
        }
        match self.status {
            Which::Dead => {
                if self.event_type.is_some() {
                    return invalid("event_type applies to status \"ignored\" only");
                }
                match (&self.event_ids, since.or(until)) {
                    (Some(_), Some(_)) => invalid("give event_ids or since/until, not both"),
                    (Some(ids), None) => {
                        if ids.is_empty() {
                            return invalid("event_ids is empty");
                        }
                        if ids.len() > MAX_EVENT_IDS {
                            return invalid(&format!(
                                "at most {MAX_EVENT_IDS} event_ids per request"
                            ));
                        }
                        if ids.iter().any(|id| id.is_empty() || id.len() > 255) {
                            return invalid("an event id is empty or longer than 255 bytes");
                        }
                        if self.outbox {
                            Ok(Selection::OutboxIds(ids.clone()))
                        } else {
                            Ok(Selection::DeadIds(ids.clone()))
                        }
                    }
                    (None, Some(_)) => match since {
                        Some(since) if self.outbox => Ok(Selection::OutboxBetween { since, until }),
                        Some(since) => Ok(Selection::DeadBetween { since, until }),
                        None => invalid("until needs since"),
                    },
                    (None, None) => invalid("give event_ids, or since (and until)"),
                }
            }
            Which::Ignored => {
                if self.outbox {
                    return invalid("outbox applies to status \"dead\" only");
                }
                if self.event_ids.is_some() {
                    return invalid("event_ids applies to status \"dead\" only");
                }
                let Some(event_type) = self.event_type.clone().filter(|t| !t.is_empty()) else {
                    return invalid("status \"ignored\" needs event_type");
                };
                let Some(since) = since else {
                    return invalid("status \"ignored\" needs since");
                };
                Ok(Selection::IgnoredBetween {
                    event_type,
                    since,
                    until,
                })
            }
        }
    }
}

/// Re-drives `selection` of `source`: checks the source is configured (and, for ignored
/// events, that a handler exists now in `handlers`), moves the rows in batches while
/// `remaining()` exceeds [`MARGIN_MS`], calls `progress(report)` after each batch (`matched` is counted before the first), rings
/// the worker once when anything moved, and logs one `redrive` line.
///
/// # Errors
/// [`RedriveError`]; rows moved before a failure stay moved (each batch commits on its own).
#[allow(clippy::too_many_arguments)]
pub async fn run(
    pool: &Pool,
    sources: &Sources,
    handlers: &Registry,
    doorbell: &Doorbell,
    source: &str,
    selection: &Selection,
    dry_run: bool,
    remaining: impl Fn() -> Duration,
    mut progress: impl FnMut(&RedriveReport),
) -> Result<RedriveReport, RedriveError> {
    if sources.get(source).is_none() {
        return Err(RedriveError::UnknownSource(source.to_owned()));
    }
    if let Selection::IgnoredBetween { event_type, .. } = selection {
        if handlers.get(source, event_type).is_none() {
            return Err(RedriveError::NoHandler {
                name: source.to_owned(),
                event_type: event_type.clone(),
            });
        }
    }
    let conn = pool.get().await.map_err(|e| RedriveError::Pool(e.into()))?;
    let mut report = RedriveReport {
        source: source.to_owned(),
        status: match selection {
            Selection::IgnoredBetween { .. } => "ignored",
            Selection::OutboxIds(_) | Selection::OutboxBetween { .. } => "outbox",
            _ => "dead",
        }
        .to_owned(),
        dry_run,
        complete: true,
        ..RedriveReport::default()
    };
    let margin = Duration::from_millis(MARGIN_MS);
    match selection {
        Selection::DeadIds(ids) => {
            let classes = sql::classify_ids(&conn, source, ids).await?;
            report.matched = classes.dead.len() as u64;
            report.no_payload = classes.no_payload.len() as u64;
            report.no_payload_ids = classes.no_payload;
            report.not_dead = classes.not_dead;
            report.not_found = classes.not_found;
            if dry_run {
                list(&mut report.event_ids, classes.dead.clone());
            } else {
                for chunk in classes.dead.chunks(BATCH as usize) {
                    if remaining() < margin {
                        report.complete = false;
                        break;
                    }
                    let moved = sql::redrive_ids(&conn, source, chunk).await?;
                    report.redriven += moved.len() as u64;
                    list(&mut report.event_ids, moved);
                    progress(&report);
                }
            }
        }
        Selection::OutboxIds(_) | Selection::OutboxBetween { .. } => {
            // By the events' ids (those with a dead message), or by a window of dead_at.
            let (ids, window) = match selection {
                Selection::OutboxIds(ids) => {
                    let classes = outbox_sql::classify_ids(&conn, source, ids).await?;
                    report.matched = classes.dead_messages;
                    report.not_dead = classes.not_dead;
                    report.not_found = classes.not_found;
                    (classes.with_dead, None)
                }
                Selection::OutboxBetween { since, .. } => {
                    let until = window_end(&conn, selection.until()).await?;
                    report.matched =
                        outbox_sql::count_between(&conn, source, *since, until).await?;
                    (Vec::new(), Some((*since, until)))
                }
                _ => return Err(RedriveError::Invalid("not an outbox selection".to_owned())),
            };
            let limit = if dry_run { LISTED_IDS as i64 } else { BATCH };
            loop {
                if !dry_run && remaining() < margin {
                    report.complete = false;
                    break;
                }
                let keys = match (window, dry_run) {
                    (None, true) => outbox_sql::list_ids(&conn, source, &ids, limit).await?,
                    (None, false) => outbox_sql::redrive_ids(&conn, source, &ids, limit).await?,
                    (Some((since, until)), true) => {
                        outbox_sql::list_between(&conn, source, since, until, limit).await?
                    }
                    (Some((since, until)), false) => {
                        outbox_sql::redrive_between(&conn, source, since, until, limit).await?
                    }
                };
                let done = dry_run || (keys.len() as i64) < limit;
                if !dry_run {
                    report.redriven += keys.len() as u64;
                }
                list(&mut report.idempotency_keys, keys);
                if done {
                    break;
                }
                progress(&report);
            }
            if !dry_run {
                progress(&report);
            }
        }
        Selection::DeadBetween { since, .. } | Selection::IgnoredBetween { since, .. } => {
            let until = window_end(&conn, selection.until()).await?;
            let (with, without) = match selection {
                Selection::IgnoredBetween { event_type, .. } => {
                    sql::count_ignored_between(&conn, source, event_type, *since, until).await?
                }
                _ => sql::count_dead_between(&conn, source, *since, until).await?,
            };
            report.matched = with;
            report.no_payload = without;
            if dry_run {
                report.event_ids = batch(
                    &conn,
                    source,
                    selection,
                    *since,
                    until,
                    true,
                    LISTED_IDS as i64,
                )
                .await?;
            } else {
                loop {
                    if remaining() < margin {
                        report.complete = false;
                        break;
                    }
                    let moved =
                        batch(&conn, source, selection, *since, until, false, BATCH).await?;
                    report.redriven += moved.len() as u64;
                    let done = (moved.len() as i64) < BATCH;
                    list(&mut report.event_ids, moved);
                    progress(&report);
                    if done {
                        break;
                    }
                }
            }
        }
    }
    drop(conn);
    let moved_first = report.event_ids.first().or(report.idempotency_keys.first());
    if let Some(event_id) = moved_first.filter(|_| !dry_run) {
        if let Err(error) = doorbell.ring(source, event_id).await {
            tracing::warn!(
                source,
                error = %crate::error_chain::error_chain(&error),
                "doorbell failed; the worker's schedule will drain the re-driven events"
            );
        }
    }
    tracing::info!(
        source,
        status = report.status.as_str(),
        dry_run,
        matched = report.matched,
        redriven = report.redriven,
        no_payload = report.no_payload,
        not_dead = report.not_dead.len(),
        not_found = report.not_found.len(),
        complete = report.complete,
        "redrive"
    );
    Ok(report)
}

/// The end of a window as the statements use it: `until`, but never later than the database's
/// time now (the start of the run). A row moved back to `claimed` by this run that dies again,
/// or completes as ignored again, before the run ends is then stamped after the window and is
/// not taken a second time by the same run: without this, a window ending in the future taken
/// while the handler still fails fatally kept re-driving the same rows for as long as the worker
/// kept killing them (and the CLI, without a deadline, never stopped).
async fn window_end(
    conn: &crate::db::Connection,
    until: Option<SystemTime>,
) -> Result<SystemTime, RedriveError> {
    let now = crate::db::now(conn).await.map_err(LedgerError::from)?;
    Ok(until.map_or(now, |until| until.min(now)))
}

/// One statement of a window re-drive: the next `limit` rows of `selection` in `[since, until)`
/// moved back to `claimed` (or, with `list_only`, only their ids, for a dry run).
async fn batch(
    conn: &crate::db::Connection,
    source: &str,
    selection: &Selection,
    since: SystemTime,
    until: SystemTime,
    list_only: bool,
    limit: i64,
) -> Result<Vec<String>, LedgerError> {
    match (selection, list_only) {
        (Selection::IgnoredBetween { event_type, .. }, true) => {
            sql::list_ignored_between(conn, source, event_type, since, until, limit).await
        }
        (Selection::IgnoredBetween { event_type, .. }, false) => {
            sql::rerun_ignored_between(conn, source, event_type, since, until, limit).await
        }
        (_, true) => sql::list_dead_between(conn, source, since, until, limit).await,
        (_, false) => sql::redrive_between(conn, source, since, until, limit).await,
    }
}

/// Reads one event in full ([`ledger::inspect`]).
///
/// # Errors
/// [`RedriveError::Pool`] or [`RedriveError::Ledger`].
pub async fn inspect(
    pool: &Pool,
    source: &str,
    event_id: &str,
) -> Result<Option<ledger::EventDetail>, RedriveError> {
    let conn = pool.get().await.map_err(|e| RedriveError::Pool(e.into()))?;
    Ok(ledger::inspect(&conn, source, event_id).await?)
}

/// Appends `ids` to `listed` up to [`LISTED_IDS`].
fn list(listed: &mut Vec<String>, ids: Vec<String>) {
    let room = LISTED_IDS.saturating_sub(listed.len());
    listed.extend(ids.into_iter().take(room));
}
