//! Everything a handler is written with, in one `use shared::prelude::*;`: the [`Handler`]
//! trait (or a plain `async fn` through [`handler_fn!`]), the [`Event`] it sees, the
//! [`Effect`] and [`Success`] it returns, [`HandlerError`], the transaction handle [`Tx`], the
//! statement type [`Sql`] with its parameter [`Type`]s, the ordering guard ([`advance`],
//! [`Advance`], [`Entity`]), [`json!`] and [`Value`] for JSON bodies, and [`Registry`],
//! [`Sources`] and [`MigrationSet`] for the registry and migrations functions, and [`App`],
//! which bundles those two for hookledger's functions.
//!
//! This is the user's surface: a change to it is a changelog entry. Nothing of the engine is
//! here.

pub use crate::app::App;
pub use crate::db::{MigrationSet, Sql};
pub use crate::effect::{Effect, Event, HandlerError, Success};
pub use crate::handler::{Handler, Registry};
pub use crate::handler_fn;
pub use crate::ledger::Tx;
pub use crate::ordering::{advance, Advance, Entity};
pub use crate::Sources;
/// The `#[async_trait]` attribute a [`Handler`] implementation needs.
pub use async_trait::async_trait;
/// JSON: `json!({...})` builds an [`Effect`]'s body; [`Value`] is what [`Event::json`] reads
/// when no type of your own is needed.
pub use serde_json::{json, Value};
/// PostgreSQL parameter types, for [`Sql::types`].
pub use tokio_postgres::types::Type;
