//! The receive path (docs/architecture.md, "The receive path"): from a delivery's source name,
//! headers and raw body to the reply, with every outcome decided here and logged once. Bodies
//! are byte for byte what is sent (the book's table in `docs/reference/answers.md`, "What the
//! receiver answers", lists the same):
//!
//! | case | status | body |
//! |---|---|---|
//! | unknown source | 404 | `{"error":"unknown source"}` |
//! | body over the source's limit | 413 | `{"error":"body too large"}` |
//! | bad, missing or stale signature | 401 | `{"error":<fixed reason>}` |
//! | unreadable body, missing event id | 400 | `{"error":<reason>}` |
//! | Slack `url_verification` | 200 | `{"challenge":...}` |
//! | new event, inline | 200 (or the handler's 2xx) | the handler's body |
//! | new event, deferred | 202 | `{"accepted":true,"duplicate":false}` |
//! | completed duplicate, same payload identity | the stored status | the stored body, verbatim; `Idempotent-Replayed: true` |
//! | duplicate, deferred | 202 | `{"accepted":true,"duplicate":true}`; `Idempotent-Replayed: true` |
//! | same event id, different payload | 409 | `{"error":"event id reused with a different body"}` |
//! | duplicate still in flight | 409 | `{"error":"event is being processed"}`; `Retry-After: 5` |
//! | handler failure, retryable | 500 | `{"error":"internal error"}` (claim rolled back) |
//! | handler failure, fatal (inline) | 200 | `{"error": "the event cannot be processed; it is kept for an operator", "status": "dead"}` (stored as JSONB, so spaced); the event is kept `dead` with its payload and error, and every retry gets the same answer |
//! | database unavailable | 503 | `{"error":"service unavailable"}` |
//! | database work past the client deadline | 503 | `{"error":"service unavailable"}`; `Retry-After: 5` |
//!
//! No ledger row is written for any 4xx, and a 5xx leaves no row behind, so the provider's
//! retry starts clean; a refused delivery (401, 404, 409 digest mismatch, 413, 400) is only
//! counted, per source, reason and hour, in `rejected_delivery` (`crate::rejected`), after its
//! answer is decided and without changing it. An inline event whose commit queued outbox messages rings the worker's doorbell
//! after the commit (as a deferred accept does), so they are forwarded at once. A fatal handler error (the payload can never be processed) rolls back the
//! handler's writes and keeps the event as `dead`: the provider stops retrying (a 2xx, so it
//! does not disable the endpoint either), the operator is told by the `handler_fatal` metric and
//! an error log line, and re-drives it once the cause is fixed.
//!
//! A delivery's database work (a pooled connection, the claim, the handler, the commit) runs
//! under the client-side deadline `DatabaseSettings::client_deadline` (the statement timeout
//! plus 1 s by default): on a network that stopped answering (a failover, a dead NAT entry) no
//! server-side limit can fire, so past the deadline the delivery answers 503 with
//! `Retry-After` and the connection is closed, never handed out again. Nothing answered 2xx
//! is then lost: the claim commits with the effect or not at all, and a commit whose reply
//! was lost is a completed event the retry gets replayed.
//!
//! By path: `receiver` (the [`Receiver`], a delivery's verification and the way after it),
//! `identify` (event id, type and payload hashes), `batch` (a batched delivery's items, in one
//! transaction and one round trip where they take the one-statement shape), `inline` (claim and apply in one
//! transaction), `one_statement` (claim and complete in one statement), `deferred` (accept and
//! answer 202), `shadow` (shadow mode's run of a duplicate), `replay` (events fetched from a
//! provider's API), `reply` (the [`Reply`] and its shared shapes), `outcome` (the [`Outcome`] a
//! reply carries, named once for logs and metrics) and `log` (one line per delivery or replayed
//! event).

mod batch;
mod deferred;
mod identify;
mod inline;
mod kept;
mod log;
mod one_statement;
mod outcome;
mod receiver;
mod replay;
mod reply;
mod shadow;

pub use outcome::Outcome;
pub use receiver::{Receiver, REJECTION_COUNT_DEADLINE};
pub use reply::{Reply, RETRY_AFTER_SECS};
