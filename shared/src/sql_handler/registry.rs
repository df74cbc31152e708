//! Joining a configuration's SQL handlers to the application's [`Registry`]: one function,
//! called wherever a function or the CLI builds its handlers ([`crate::App::handlers`]).

use std::sync::Arc;

use super::{Readiness, SqlHandlers};
use crate::config::sql_handlers::SqlHandlerError;
use crate::config::targets::EventTypes;
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

/// Why the handlers cannot be built: a start-up error.
#[derive(Debug, thiserror::Error)]
pub enum HandlersError {
    /// A Rust handler and a SQL handler for the same source and type.
    #[error(transparent)]
    Conflict(#[from] HandlerConflict),
    /// A SQL handler's statement the SQL lexer refuses (its `$n` count, its kind).
    #[error("source {name:?}: {error}")]
    Invalid {
        /// The source's name.
        name: String,
        /// What is wrong (in the message already, so not also its source: a reporter that
        /// prints the chain would say it twice).
        error: SqlHandlerError,
    },
}

/// Every configured source's SQL handlers, made ready to run, sorted by source name.
///
/// # Errors
/// [`HandlersError::Invalid`] for the first statement the SQL lexer refuses.
pub fn build_all(sources: &Sources) -> Result<Vec<Arc<SqlHandlers>>, HandlersError> {
    let mut configured: Vec<_> = sources
        .iter()
        .filter(|source| !source.sql_handlers.is_empty())
        .collect();
    configured.sort_by(|a, b| a.name.cmp(&b.name));
    configured
        .into_iter()
        .map(|source| {
            SqlHandlers::build(&source.name, &source.sql_handlers)
                .map(Arc::new)
                .map_err(|error| HandlersError::Invalid {
                    name: source.name.clone(),
                    error,
                })
        })
        .collect()
}

/// `registry` (the application's Rust handlers) with every configured source's SQL handlers,
/// registered by pattern, and the check that their statements prepare against the schema
/// ([`Readiness`], run by `Registry::ready`).
///
/// # Errors
/// [`HandlersError::Invalid`] for a statement the SQL lexer refuses;
/// [`HandlersError::Conflict`] when a SQL handler's pattern matches an event type a Rust
/// handler is registered for on the same source.
pub fn with_sql_handlers(
    mut registry: Registry,
    sources: &Sources,
) -> Result<Registry, HandlersError> {
    let all = build_all(sources)?;
    for handlers in &all {
        for event_type in registry.registered_rust(&handlers.source) {
            if let Some(sql) = handlers
                .handlers
                .iter()
                .find(|h| h.event_types.matches(event_type))
            {
                return Err(HandlerConflict {
                    name: handlers.source.clone(),
                    event_type: event_type.to_owned(),
                    handler: sql.number,
                    patterns: sql.patterns.clone(),
                }
                .into());
            }
        }
        let patterns = handlers.patterns().into_iter().map(str::to_owned).collect();
        let Ok(event_types) = EventTypes::parse(patterns) else {
            // Each handler's patterns were checked; their union is as good.
            continue;
        };
        registry.register_patterns(&handlers.source, event_types, Arc::clone(handlers));
    }
    if !all.is_empty() {
        registry.add_ready_check(Readiness::new(all));
    }
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::{Coverage, Gap};
    use crate::effect::{Effect, Event, HandlerError};
    use crate::ledger::Tx;

    async fn never(_: &mut Tx<'_>, _: &Event<'_>) -> Result<Effect, HandlerError> {
        Err(HandlerError::fatal("not run"))
    }

    const SOURCES: &str = r#"[{"name": "pay", "scheme": "stripe", "secrets": ["x"],
        "handlers": [{"event_types": ["charge.refunded", "invoice.*"],
                      "sql": [{"statement": "INSERT INTO t (a) VALUES ($1)",
                               "params": [{"event": "id"}]}]}]},
        {"name": "quiet", "scheme": "stripe", "secrets": ["x"]}]"#;

    #[test]
    fn sql_handlers_are_found_by_pattern_and_count_as_handled() {
        let sources = Sources::from_json(SOURCES).unwrap();
        let registry = with_sql_handlers(Registry::new(), &sources).unwrap();
        assert!(registry.get("pay", "charge.refunded").is_some());
        assert!(registry.get("pay", "invoice.paid").is_some());
        assert!(registry.get("pay", "charge.succeeded").is_none());
        assert!(registry.get("quiet", "invoice.paid").is_none());
        assert!(registry.get("pay", "invoice.paid").unwrap().plain_sql());
        let sql = build_all(&sources).unwrap();
        assert_eq!(sql.len(), 1);
        assert!(sql[0].handlers[0].one_statement);
        let coverage = Coverage::of(&registry, &sources);
        let pay = coverage.sources.iter().find(|s| s.source == "pay").unwrap();
        assert_eq!(pay.handled, vec!["charge.refunded", "invoice.*"]);
        assert_eq!(
            coverage.gaps,
            vec![Gap::NothingRuns {
                source: "quiet".to_owned()
            }]
        );
    }

    #[test]
    fn a_rust_handler_for_a_type_a_sql_handler_matches_is_refused_naming_both() {
        let sources = Sources::from_json(SOURCES).unwrap();
        let mut rust = Registry::new();
        rust.register("pay", "invoice.paid", crate::handler_fn!(never));
        let error = with_sql_handlers(rust, &sources).unwrap_err().to_string();
        assert_eq!(
            error,
            "source \"pay\": event type \"invoice.paid\" has a Rust handler and SQL handler #1 \
             (event_types \"charge.refunded\", \"invoice.*\") too; keep one"
        );
        // Another source's Rust handler for the same type is no conflict.
        let mut rust = Registry::new();
        rust.register("quiet", "invoice.paid", crate::handler_fn!(never));
        assert!(with_sql_handlers(rust, &sources).is_ok());
    }
}
