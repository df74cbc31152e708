//! Joining a configuration's SQL handlers to the application's [`Registry`]: one function,
//! called wherever a function or the CLI builds its handlers ([`crate::App::handlers`]).

use std::sync::Arc;

use crate::handler::Registry;
use crate::Sources;

/// A source and event type that both a Rust handler and a SQL handler would take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "source {name:?}: event type {event_type:?} has a Rust handler and SQL handler \
     #{handler} ({patterns}) too; keep one"
)]
pub struct HandlerConflict {
    /// The source's name.
    pub name: String,
    /// The event type the Rust handler is registered for.
    pub event_type: String,
    /// The SQL handler's number in the source's `"handlers"`.
    pub handler: usize,
    /// Its event type patterns.
    pub patterns: String,
}

/// `registry` (the application's Rust handlers) with every configured source's SQL handlers.
///
/// # Errors
/// [`HandlerConflict`] when a SQL handler's pattern matches an event type a Rust handler is
/// registered for on the same source.
pub fn with_sql_handlers(
    mut registry: Registry,
    sources: &Sources,
) -> Result<Registry, HandlerConflict> {
    let mut configured: Vec<&Arc<super::SqlHandlers>> = sources
        .iter()
        .filter_map(|source| source.sql_handlers.as_ref())
        .collect();
    configured.sort_by(|a, b| a.source.cmp(&b.source));
    for handlers in configured {
        let rust_types: Vec<String> = registry
            .registered_rust(&handlers.source)
            .into_iter()
            .map(str::to_owned)
            .collect();
        for event_type in rust_types {
            if let Some(sql) = handlers
                .handlers
                .iter()
                .find(|h| h.event_types.matches(&event_type))
            {
                return Err(HandlerConflict {
                    name: handlers.source.clone(),
                    event_type,
                    handler: sql.number,
                    patterns: sql.patterns(),
                });
            }
        }
        registry.register_sql(Arc::clone(handlers));
    }
    Ok(registry)
}
