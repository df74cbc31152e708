//! **hookledger**: safe webhook receiving on AWS Lambda and PostgreSQL. Providers deliver at
//! least once and in no guaranteed order; hookledger verifies each delivery's signature,
//! claims its event id in the ledger and applies your handler in the same transaction, so each
//! event has exactly one durable effect, and every retry gets the same answer.
//!
//! This is the one crate a team's own repository depends on. That repository holds only what
//! is the team's: its handlers ([`prelude`]), their migrations, its sources and deployment
//! parameters, and one binary per function, each a single call that hands the team's [`App`]
//! to hookledger:
//!
//! ```text
//! // src/bin/receiver.rs
//! fn main() -> Result<(), hookledger::Error> {
//!     hookledger::receiver::main(my_webhooks::APP)
//! }
//! ```
//!
//! The starter project (`scripts/new-project.sh` in hookledger's repository) is that shape,
//! ready to build, test and deploy.
//!
//! # Features
//!
//! One per function (`receiver`, `worker`, `sweeper`, `auditor`, `replay`, `migrate`,
//! `console`; all of them: `functions`), `cli` (the `hookledger` operator CLI) and `testing`
//! ([`testing`]: your handlers' end-to-end tests on a throwaway PostgreSQL). The defaults are
//! `functions` and `cli`.
//!
//! # Stability
//!
//! What a team's code depends on is this crate's surface: [`prelude`], [`App`], the functions'
//! `main`s, [`testing`], plus the sources JSON, the ledger's schema and the SAM template's
//! parameters. A change to any of them is a CHANGELOG entry, and a breaking one a new minor
//! version while hookledger is 0.x (docs/reference/versioning.md).
#![forbid(unsafe_code)]

pub use shared::prelude;
pub use shared::App;

/// The error a function's `main` returns: any error, boxed (the Lambda runtime's own type).
pub type Error = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The webhook endpoint, `POST /webhooks/{source}`: [`receiver::main`].
#[cfg(feature = "receiver")]
pub mod receiver {
    pub use ::receiver::main;
}

/// Drains deferred events and dispatches the outbox: [`worker::main`].
#[cfg(feature = "worker")]
pub mod worker {
    pub use ::worker::main;
}

/// Deletes expired ledger keys in bounded batches: [`sweeper::main`].
#[cfg(feature = "sweeper")]
pub mod sweeper {
    pub use ::sweeper::main;
}

/// Reports stuck claims, dead letters, backlog and quiet sources: [`auditor::main`].
#[cfg(feature = "auditor")]
pub mod auditor {
    pub use ::auditor::main;
}

/// Pulls missed events back from the provider's API through the claim path: [`replay::main`].
#[cfg(feature = "replay")]
pub mod replay {
    pub use ::replay::main;
}

/// Applies the ledger's migrations and yours at deploy time (a CloudFormation custom
/// resource): [`migrate::main`].
#[cfg(feature = "migrate")]
pub mod migrate {
    pub use ::migrate::main;
}

/// The ledger console behind API Gateway's JWT authorizer: [`console::main`].
#[cfg(feature = "console")]
pub mod console {
    pub use ::console_function::main;
}

/// The `hookledger` operator CLI (migrate, check-config, inspect, redrive, replay, console, ...):
/// [`cli::main`].
#[cfg(feature = "cli")]
pub mod cli {
    pub use ::cli::main;
}

/// Your handlers' end-to-end tests: a ledger on a throwaway PostgreSQL database
/// (`DATABASE_URL`), signed deliveries, the effect and the replayed response.
#[cfg(feature = "testing")]
pub use hookledger_testing as testing;
