//! The sweep: deletes expired ledger keys in bounded batches, each batch its own short
//! transaction, so the ledger stays the size of its retention window and the receivers' claims
//! never wait long behind it.
//!
//! What goes, per source ([`crate::retention`]): `completed` keys claimed longer ago than the
//! source's retention, and `dead` keys that died longer ago than its dead-letter retention. A
//! source that is no longer configured keeps the defaults (30 and 90 days), so its keys still
//! expire. `claimed`, `processing` and `failed` rows are never deleted (unfinished work; the
//! auditor reports them), nor are the handlers' business rows. Outbox messages go by the same
//! rules: `delivered` ones delivered longer ago than the retention, `dead` ones dead longer
//! ago than the dead-letter retention; `pending` and `processing` ones never. A message always
//! outlives its event's key (it is delivered after its event is claimed), so a re-run of a
//! still-kept event finds its messages and never queues them twice.
//!
//! A source with `payload_retention_hours` also has its completed events' payloads and stored
//! responses dropped once that long past their claim, the rows themselves staying until their
//! key expires ([`payload`]).
//!
//! The counts of rejected deliveries (`crate::rejected`) go too: the hours that started longer
//! ago than `HOOKLEDGER_REJECTED_RETENTION_DAYS` (default 30), every source's at once.
//!
//! A run plans the work once (every source with keys: completed and dead keys; every source with
//! keys or outbox messages: delivered and dead outbox messages; then the rejected deliveries'
//! counts), then runs
//! batches: a batch deletes up to `batch_size` rows, taking the work items in order and
//! continuing with the next when one runs dry, in one transaction. The run stops when a batch
//! comes back short (nothing expired is left), after `max_batches`, or when less than the
//! margin of the invocation's time is left. It pauses between batches, at least `pause_ms` and
//! long enough that batches fill at most `duty_percent` of the time ([`pause_after`]): the
//! deletes' WAL (full page images after each checkpoint) is what slows the claims' commits.
//!
//! The run, its batches and its report are in `job`; the statements it runs, each beside the one
//! function that runs it, in [`sql`] (the auditor reads the ledger's sources and oldest keys
//! with the same ones).

mod job;
pub mod payload;
pub mod sql;

pub use job::{pause_after, run, run_with_progress, Stopped, Sweep, SweepReport};
