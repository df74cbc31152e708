//! SQL handlers declared in the sources configuration (a source's `"handlers"`, configured and
//! checked in `crate::config::sql_handlers`): for each event type pattern, statements run in
//! the event's transaction exactly as a Rust plain-SQL handler's, with parameters read from
//! the event, an optional ordering guard and a fixed or `RETURNING` response.
//! docs/reference/sources.md, "SQL handlers", is the reference.
//!
//! - [`compiled`]: a configured handler made ready to run (lexer checks, interned statements);
//! - [`params`]: each parameter's value read from an event and its strict conversion;
//! - [`intern`]: the statements as `&'static Sql`, once per distinct text and types;
//! - [`handler`]: a source's SQL handlers as one [`crate::handler::Handler`];
//! - [`registry`]: joining them to the application's registry ([`crate::App::handlers`]);
//! - [`prepare`]: the statements checked against the schema, once per process.

pub mod compiled;
pub mod handler;
pub mod intern;
pub mod params;
pub mod prepare;
pub mod registry;

pub use compiled::SqlHandler;
pub use handler::SqlHandlers;
pub use prepare::{PrepareError, PrepareFailure, Readiness};
pub use registry::{build_all, with_sql_handlers, HandlerConflict, HandlersError};
