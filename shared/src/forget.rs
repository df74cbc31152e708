//! Erasure that keeps deduplication (issue 28): `hookledger forget`, the console's Forget
//! action and the replay function's `forget` input all call [`run`] (or [`forget`] on a
//! connection).
//!
//! What goes, for one event ([`Target::Event`]) or every event of a data subject
//! ([`Target::Subject`], found through `webhook_event_subject_idx`: an index lookup, never a
//! scan of payloads; see `crate::privacy::subject`): the stored payload (the redacted copy, as
//! the ledger keeps it), the stored response, `last_error`, the values in earlier `history`
//! entries (an earlier answer, an earlier error), and the payload and `last_error` of the
//! event's outbox messages.
//!
//! What stays: the key, event type, status, digests (`payload_digest`, `payload_identity`, the
//! replay guard), times, the subject hash, and the response's status code, so a provider's
//! retry is still answered as a duplicate and nothing runs twice. What the retry's body says
//! once erased: as after payload retention (`crate::sweep::payload`), the recorded no-op of an
//! ignored event (it holds only the type), `{"status": "stale"}` for a stale one, else
//! [`ERASED_RESPONSE`]; with `Idempotent-Replayed: true`. A deferred source answers its
//! duplicates 202 as always. An inline dead letter keeps its fixed answer
//! (`crate::apply::fatal_body`); a provider's redelivery of it runs it again, as for any dead
//! letter (the provider brings the body back, and it is stored again: forget it again after).
//!
//! Who erased it and why is appended to the row's `history` (`{"action": "forget", "at",
//! "by", "reason", "erased": [...]}`, no erased value), and `erased_at` is set.
//!
//! Only finished events are erased: `completed` and `dead` ones whose outbox messages are
//! delivered or dead. An unfinished one (claimed, processing, failed, or with a message still
//! to dispatch) keeps its payload, which the worker needs; it is counted and named in the
//! report, to be forgotten again once it finishes. Erasing again erases nothing new and
//! appends nothing: an erased row with nothing left is skipped.
//!
//! The request is in `request`, the run in `job`; the statements, each beside the one
//! function that runs it, in [`sql`].

mod job;
mod request;
pub mod sql;

pub use job::{
    forget, preview, run, run_target, subject_of, ForgetReport, BATCH, LISTED_IDS, MAX_BATCHES,
};
pub use request::{Erasure, ForgetError, ForgetRequest, Target, MAX_BY_LEN, MAX_REASON_LEN};
pub use sql::{ERASED_RESPONSE, ERASED_TEXT};
