//! A source's SQL handlers as one [`Handler`]: the first whose pattern matches the event's type
//! and whose `when` holds runs its statements in the event's transaction, exactly as a Rust
//! plain-SQL handler would; none: the recorded no-op ([`crate::apply::ignored_effect`]).

use tokio_postgres::types::ToSql;

use super::compiled::SqlHandler;
use super::params::{integer_at, text_at, Input, SqlValue};
use crate::config::sql_handlers::{SqlHandlerConfig, SqlHandlerError};
use crate::effect::{Effect, Event, HandlerError};
use crate::handler::Handler;
use crate::ledger::Tx;
use crate::ordering::{advance, Advance, Entity};

/// One source's SQL handlers, in configuration order.
#[derive(Debug)]
pub struct SqlHandlers {
    /// The source's name.
    pub source: String,
    /// The handlers, in order (the first that applies runs).
    pub handlers: Vec<SqlHandler>,
    /// Every handler can ride in the claim's one statement.
    plain: bool,
}

impl SqlHandlers {
    /// Source `source`'s configured SQL handlers, made ready to run.
    ///
    /// # Errors
    /// The first handler's [`SqlHandlerError`] (see [`SqlHandler::build`]).
    pub fn build(source: &str, configs: &[SqlHandlerConfig]) -> Result<Self, SqlHandlerError> {
        let handlers = configs
            .iter()
            .map(SqlHandler::build)
            .collect::<Result<Vec<_>, _>>()?;
        let plain = handlers.iter().all(|h| h.one_statement);
        Ok(Self {
            source: source.to_owned(),
            handlers,
            plain,
        })
    }

    /// Whether a handler's pattern matches `event_type` (its `when` is decided per event).
    pub fn matches(&self, event_type: &str) -> bool {
        self.handlers
            .iter()
            .any(|h| h.event_types.matches(event_type))
    }

    /// Every pattern, in configuration order, each once.
    pub fn patterns(&self) -> Vec<&str> {
        let mut all: Vec<&str> = Vec::new();
        for pattern in self.handlers.iter().flat_map(|h| h.event_types.patterns()) {
            if !all.contains(&pattern.as_str()) {
                all.push(pattern);
            }
        }
        all
    }
}

/// A fatal error of handler `handler`, naming it.
fn fatal(handler: &SqlHandler, problem: impl std::fmt::Display) -> HandlerError {
    HandlerError::fatal(format!(
        "SQL handler #{} ({}): {problem}",
        handler.number, handler.patterns
    ))
}

#[async_trait::async_trait]
impl Handler for SqlHandlers {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        let mut envelope: Option<serde_json::Value> = None;
        for handler in &self.handlers {
            if !handler.event_types.matches(event.event_type) {
                continue;
            }
            if let Some(when) = &handler.when {
                let envelope = envelope.get_or_insert_with(|| {
                    crate::expression::envelope(
                        event.source,
                        event.event_id,
                        event.event_type,
                        crate::expression::body_value(event.body, event.document),
                    )
                });
                // The error names the expression and the failing part's position, no value.
                match when.matches(envelope) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(error) => return Err(fatal(handler, format!("when: {error}"))),
                }
            }
            return run(handler, tx, event).await;
        }
        Ok(crate::apply::ignored_effect(event))
    }

    /// True when every handler of the source is one `INSERT ... VALUES` row per statement,
    /// without `order` or `returning` (see docs/reference/sources.md, "handlers").
    fn plain_sql(&self) -> bool {
        self.plain
    }
}

/// Runs `handler` for `event`: every parameter read and converted first, then the ordering
/// guard, then the statements.
async fn run(
    handler: &SqlHandler,
    tx: &mut Tx<'_>,
    event: &Event<'_>,
) -> Result<Effect, HandlerError> {
    let input = Input::new(
        event.source,
        event.event_id,
        event.event_type,
        event.body,
        event.document,
    );
    let mut values: Vec<Vec<SqlValue>> = Vec::with_capacity(handler.statements.len());
    for statement in &handler.statements {
        let mut these = Vec::with_capacity(statement.params.len());
        for (at, param) in statement.params.iter().enumerate() {
            these.push(
                param
                    .value(at + 1, &input)
                    .map_err(|e| fatal(handler, format!("statement {}: {e}", statement.number)))?,
            );
        }
        values.push(these);
    }
    if let Some(order) = &handler.order {
        let entity_id = text_at(&input, &order.entity).map_err(|p| {
            fatal(
                handler,
                format!("order.entity (path {:?}) {p}", order.entity),
            )
        })?;
        let version = integer_at(&input, &order.version).map_err(|p| {
            fatal(
                handler,
                format!("order.version (path {:?}) {p}", order.version),
            )
        })?;
        let entity = Entity {
            source: event.source,
            entity_type: &order.entity_type,
            entity_id: &entity_id,
            version,
        };
        match advance(tx, &entity, event.event_id).await? {
            Advance::Applied => {}
            // The ordering guard's no-op: the outcome rule reads "status": "stale".
            Advance::Stale { .. } => {
                return Ok(Effect::ok(serde_json::json!({
                    "status": "stale",
                    "entity_type": order.entity_type,
                })))
            }
            // Never assume this event is the older one: nothing is written, the tie stays
            // listed in `ordering_tie` for an operator.
            Advance::Tie { .. } => {
                return Ok(Effect::ok(serde_json::json!({
                    "status": "tie",
                    "entity_type": order.entity_type,
                })))
            }
        }
    }
    let returning = handler.returning;
    let mut body = None;
    for (statement, params) in handler.statements.iter().zip(values) {
        match returning {
            // Up to the statement whose row is the body: run now, in order.
            Some((n, wrapped)) if statement.number <= n => {
                let refs: Vec<&(dyn ToSql + Sync)> =
                    params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
                if statement.number == n {
                    let row = tx.query_opt(wrapped, &refs).await?;
                    body = match row {
                        Some(row) => row
                            .try_get::<_, Option<serde_json::Value>>(0)
                            .map_err(HandlerError::from)?,
                        None => None,
                    };
                } else {
                    tx.execute(statement.sql, &refs).await?;
                }
            }
            // Pipelined with the completion (or, plain SQL, inside the claim's one statement).
            _ => tx.defer(statement.sql, params)?,
        }
    }
    Ok(Effect {
        status: handler.status,
        body: body.unwrap_or_else(|| handler.body.clone()),
    })
}
