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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::{Coverage, Gap};

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
        rust.register(
            "pay",
            "invoice.paid",
            sources.get("pay").unwrap().sql_handlers.clone().unwrap(),
        );
        let error = with_sql_handlers(rust, &sources).unwrap_err().to_string();
        assert_eq!(
            error,
            "source \"pay\": event type \"invoice.paid\" has a Rust handler and SQL handler #1 \
             (event_types \"charge.refunded\", \"invoice.*\") too; keep one"
        );
        // Another source's Rust handler for the same type is no conflict.
        let mut rust = Registry::new();
        rust.register(
            "quiet",
            "invoice.paid",
            sources.get("pay").unwrap().sql_handlers.clone().unwrap(),
        );
        assert!(with_sql_handlers(rust, &sources).is_ok());
    }
}
