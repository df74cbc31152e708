//! The transactional outbox: effects that cannot roll back (an HTTP call to the user's service, a
//! queue, an event bus) are written as `outbox` rows in the claim's own transaction, committed
//! with the claim and the business writes or not at all, and dispatched by the worker after
//! commit: leased like deferred events (`FOR UPDATE SKIP LOCKED`), retried with backoff, dead
//! after the source's `max_attempts`, re-drivable by an operator.
//!
//! Each message has an idempotency key derived from its event, `{source}:{event_id}:{n}`
//! ([`idempotency_key`]), the same on every dispatch attempt: a downstream that deduplicates on
//! it sees each message once even when a dispatch is retried after a crash (the worker can die
//! after the target accepted a message and before it recorded that; the message is then sent
//! again, with the same key). That is at-least-once delivery with a stable key, the only honest
//! promise across a network.
//!
//! Where messages come from, numbered in this order within one event:
//! 1. the source's built-in targets (`"targets"` in its configuration, [`crate::config::targets::Target`]) that
//!    take the event (`event_types` match and the `filter`, if any, holds:
//!    `crate::apply::takers`): the provider's body as it was verified, marked
//!    [`Message::verified_body`];
//! 2. the handler's own, `tx.outbox(target, payload)`, in the order it added them.
//!
//! Built-in target kinds ([`crate::config::targets::TargetKind`]): `forward` (HTTP POST re-signed as a Standard Webhooks
//! delivery), `sqs` (FIFO queues deduplicate on the key) and `eventbridge` (`PutEvents`).
//!
//! How the pieces fit:
//!
//! - **Queueing** (in the claim's transaction): `crate::apply::apply` queues the built-in
//!   targets' messages (payload = the raw body as verified; `application/json`, or
//!   `application/x-www-form-urlencoded` for a form body), then the handler adds its own with
//!   `crate::ledger::Tx::outbox` (JSON; the target must be one of the source's, else the event
//!   fails fatally). `Tx::complete` writes them all with one statement pipelined with the
//!   completion and `COMMIT` (`crate::ledger::outbox`), `ON CONFLICT (source, event_id, n) DO
//!   NOTHING`. A re-run of the event (re-drive of an ignored event, shadow mode) queues only
//!   the messages no earlier run queued: a message is identified by its target and its rank
//!   among the event's messages to that target, so a target added to the configuration since
//!   gets its message (numbered after the existing ones), a target that had one gets no second
//!   copy, and a message already delivered stays delivered, whatever the targets' order now.
//! - **Dispatching** (the worker, after commit): `crate::work::drain` leases a batch, dispatches it with
//!   [`Dispatcher`], records the outcomes; see there for retries, `Retry-After`, dead letters and
//!   the statements per message. A target's `transform` reshapes its built-in messages there,
//!   just before they are sent (so a transform fixed in the configuration applies to a
//!   re-driven dead message); one that fails for an event makes that message dead.

mod aws;
mod dispatch;
pub mod eventbridge;
mod excerpt;
pub mod forward;
mod message;
pub mod sqs;

pub use dispatch::Dispatcher;
pub use message::{idempotency_key, DispatchError, Dispatched, Message, JSON, MAX_EXCERPT_BYTES};
