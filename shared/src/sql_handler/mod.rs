//! SQL handlers declared in the sources configuration (a source's `"handlers"`): for each event
//! type pattern, statements run in the event's transaction exactly as a Rust plain-SQL
//! handler's, with parameters read from the event, an optional ordering guard and a fixed or
//! `RETURNING` response. docs/reference/sources.md, "handlers", is the reference.
//!
//! - [`spec`]: the configuration as written and as checked at start-up;
//! - [`params`]: where each parameter's value is read and its strict conversion;
//! - [`intern`]: the statements as `&'static Sql`, once per distinct text and types;
//! - [`handler`]: a source's SQL handlers as one [`crate::handler::Handler`];
//! - [`registry`]: joining them to the application's registry ([`crate::App::handlers`]);
//! - [`prepare`]: the statements checked against the schema, once per process.

pub mod handler;
pub mod intern;
pub mod params;
pub mod prepare;
pub mod registry;
pub mod spec;

pub use handler::SqlHandlers;
pub use prepare::{NotReady, PrepareError, Readiness};
pub use registry::{with_sql_handlers, HandlerConflict};
pub use spec::{SqlHandler, SqlHandlerError, SqlHandlerSpec};
