//! Re-drive: put dead letters, or events that completed as `ignored` before their type had a
//! handler, back to `claimed` for the worker, which then runs each through its handler once
//! (`crate::work`), exactly as a deferred delivery. The replay function (`{"source",
//! "redrive": {...}}`) and the operator CLI (`hookledger redrive`) both call [`run`].
//!
//! - **Dead letters** (`"status": "dead"`): by event ids, or every one that went dead in a
//!   window (`since`, `until`: `dead_at`). Deferred events whose attempts ran out and inline
//!   events a handler refused fatally alike. Attempts start again at 0; the row's previous
//!   status, attempts, error and times are appended to its `history`.
//! - **Ignored events** (`"status": "ignored"`): by event type and a window of first delivery
//!   (`claimed_at`); refused unless a handler for that type is registered now.
//! - **Dead outbox messages** (`"status": "dead", "outbox": true`): the dead messages of the
//!   named events, or every message that went dead in a window (`dead_at`), back to `pending`
//!   for the worker's next dispatch with attempts from 0 and the same idempotency key; the
//!   report lists their idempotency keys. The events themselves are not touched.
//! - A row without a stored payload (a source with `store_payload: false`) cannot be run again:
//!   it is counted as `no_payload` and left as it is.
//! - Runs in batches of [`BATCH`] rows, each its own short transaction, and stops starting
//!   batches when the invocation's time runs short (`complete: false`): invoke again with the
//!   same request; rows already moved no longer match, so nothing moves twice.
//! - `dry_run` counts what would move and writes nothing.
//! - A window's end is never later than the run's start (the database's now): a row this run
//!   moves that goes dead again while the run continues is left for the next run.
//!
//! The request, the run and its report are in `job`; the statements it runs, each beside the one
//! function that runs it, in [`sql`] (events) and [`outbox_sql`] (outbox messages).

mod job;
pub mod outbox_sql;
pub mod sql;

pub use job::{
    inspect, run, RedriveError, RedriveReport, RedriveSpec, Selection, Which, BATCH, LISTED_IDS,
    MARGIN_MS, MAX_EVENT_IDS,
};
