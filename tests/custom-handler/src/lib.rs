//! A handler written the way a user writes one, outside hookledger's core and only through
//! `hookledger::prelude`: Stripe `charge.refunded` records a `refunds` row ([`refunds`]), in a
//! table created by its own migration set ([`migrations`]), registered in one line
//! ([`registry()`]). `tests/end_to_end.rs` runs it with `hookledger-testing`.
//!
//! The handler and its migration are the starter project's (`starter/src/refunds.rs`,
//! `starter/migrations/`), which README.md and the book show: one copy, tested here inside the
//! workspace and by `make test` in a project generated from the starter.
#![forbid(unsafe_code)]

#[path = "../../../starter/src/refunds.rs"]
pub mod refunds;
mod registry;

pub use registry::registry;

/// This crate's handlers and tables, as its binaries hand them to hookledger (`cli::main(APP)`).
pub const APP: shared::App = shared::App {
    registry,
    migrations,
};

use shared::db::MigrationSet;

mod embedded {
    refinery::embed_migrations!("../../starter/migrations");
}

/// The starter's tables (`starter/migrations/`), in `hookledger_refunds_schema_history`.
pub fn migrations() -> Vec<MigrationSet> {
    vec![MigrationSet::new("refunds", embedded::migrations::runner())]
}
