//! A local AWS Lambda Runtime API and the events a harness hands to a function: the one
//! simulator behind `make chaos` (the `chaos` crate's execution environments) and `bench-cold`
//! (cold start and footprint). **Dev only**: `publish = false`, no product crate depends on it,
//! and it is no model of Lambda beyond what those harnesses need; change the harness here, once.
//!
//! It owns:
//!
//! - [`RuntimeApi`]: the Runtime API of one function process (AWS Lambda Developer Guide,
//!   "Using the Lambda runtime API for custom runtimes"), served on 127.0.0.1 on a port of its
//!   own. `GET /2018-06-01/runtime/invocation/next` hands out the queued events one at a time
//!   with the headers `Lambda-Runtime-Aws-Request-Id`, `Lambda-Runtime-Deadline-Ms` (unix ms),
//!   `Lambda-Runtime-Invoked-Function-Arn` and `Lambda-Runtime-Trace-Id`; the function posts
//!   `.../invocation/{id}/response` or `.../invocation/{id}/error` (202), or
//!   `/2018-06-01/runtime/init/error` (202); anything else is 404. [`RuntimeApi::invoke`] queues
//!   an event and waits for its [`Answer`] (with the instants it was handed out and answered);
//!   [`RuntimeApi::first_next`] waits for the process's first `GET .../next` (the end of its
//!   init, for cold-start figures); [`RuntimeApi::command`] starts a binary with the
//!   environment Lambda gives a custom runtime ([`RuntimeApi::env`]).
//! - [`events`]: the API Gateway HTTP API (payload 2.0) request event ([`HttpApiEvent`]) and the
//!   `statusCode` of a function's response ([`status_code`]).
//!
//! One [`RuntimeApi`] per process: a fresh port for each, so that a killed process's hanging
//! `GET .../next` can never take the next process's event.

pub mod events;
mod runtime_api;

pub use events::{status_code, HttpApiEvent};
pub use runtime_api::{Answer, Pending, Reply, RuntimeApi};
