//! A handler written the way a user writes one, outside hookledger's core and only through
//! `shared`'s prelude: Stripe `charge.refunded` records a `refunds` row ([`refunds`]), in a
//! table created by this crate's own migration set ([`migrations`]), registered in one line
//! ([`registry()`]). `tests/end_to_end.rs` runs it with `hookledger-testing`.
#![forbid(unsafe_code)]

pub mod refunds;
mod registry;

pub use registry::registry;

use shared::db::MigrationSet;

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// This crate's tables (`migrations/`), in `hookledger_refunds_schema_history`.
pub fn migrations() -> Vec<MigrationSet> {
    vec![MigrationSet::new("refunds", embedded::migrations::runner())]
}
