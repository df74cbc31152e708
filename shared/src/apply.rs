//! Applying an effect, the engine side of the handler API: [`apply`] runs the handler (or the
//! recorded no-op, [`ignored_effect`]) in the event's transaction and completes it, the one
//! place where an effect is applied (receiver inline and shadow, worker, replay, re-drive);
//! [`plan`] decides it before the claim for the one-statement shape. Errors are classified in
//! [`ApplyError`]; an inline fatal error is answered [`FATAL_STATUS`].

use crate::config::targets::Target;
use crate::config::SourceConfig;
use crate::effect::{Effect, Event, HandlerError};
use crate::handler::Registry;
use crate::ledger::{CompleteError, LedgerError, StoredResponse, Tx};
use crate::privacy::keys::PayloadKeys;

/// The status an inline fatal error is answered with (and every retry of it): 200, so the
/// provider stops retrying and keeps the endpoint enabled, with body
/// `{"status": "dead", "error": "the event cannot be processed; it is kept for an operator"}`.
pub const FATAL_STATUS: u16 = 200;

/// The body stored and sent for an inline fatal error (see [`FATAL_STATUS`]).
pub fn fatal_body() -> serde_json::Value {
    serde_json::json!({
        "status": "dead",
        "error": "the event cannot be processed; it is kept for an operator",
    })
}

/// The recorded no-op for an event type without a handler:
/// `200 {"status": "ignored", "event_type": ...}`. That exact body (these two members, the
/// event's own type) is how the ledger tells an event that no handler ran for
/// (`hookledger redrive --ignored` re-runs those once a handler exists): a handler must not
/// answer exactly this; any other body, even one with `"status": "ignored"`, is a handler's.
pub fn ignored_effect(event: &Event<'_>) -> Effect {
    Effect::ok(serde_json::json!({ "status": "ignored", "event_type": event.event_type }))
}

/// Why applying an event failed, classified for the caller: the receiver answers 5xx (or keeps
/// a fatal event dead), the worker records `last_error` and retries or dead-letters.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The handler or one of its writes failed; trying again can succeed.
    #[error("handler failed")]
    Retryable(#[source] HandlerError),
    /// The handler or one of its writes failed in a way the same payload always will.
    #[error("handler failed fatally")]
    Fatal(#[source] HandlerError),
    /// The completion matched no row: the lease was lost (expired and taken over); nothing was
    /// committed.
    #[error("the lease was lost before the completion")]
    Lost,
    /// A ledger statement failed (check [`LedgerError::is_unavailable`]).
    #[error("ledger")]
    Ledger(#[source] LedgerError),
    /// The response could not be sealed for a source with `encrypt_payload` (no data key: KMS
    /// unavailable); nothing was committed. Retryable: the receiver answers 503.
    #[error("sealing the stored response")]
    Seal(#[source] crate::privacy::seal::SealError),
}

impl ApplyError {
    /// Whether the database is unavailable (the receiver answers 503).
    pub fn is_unavailable(&self) -> bool {
        match self {
            ApplyError::Retryable(e) | ApplyError::Fatal(e) => e.is_unavailable(),
            ApplyError::Ledger(e) => e.is_unavailable(),
            ApplyError::Seal(_) => true,
            ApplyError::Lost => false,
        }
    }

    /// The error with its cause chain, for `last_error` and the log.
    pub fn chain(&self) -> String {
        crate::error_chain::error_chain(self)
    }
}

impl From<HandlerError> for ApplyError {
    fn from(error: HandlerError) -> Self {
        if error.is_fatal() {
            ApplyError::Fatal(error)
        } else {
            ApplyError::Retryable(error)
        }
    }
}

/// Whether a handler ran for an applied event. The receiver answers it as the delivery's
/// outcome (`crate::receive::Outcome::Processed` or `Ignored`, converted with `From`), which
/// names it in log lines and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The event type's handler ran and its effect committed.
    Processed,
    /// The event type has no handler: the recorded no-op ([`ignored_effect`]) committed.
    Ignored,
}

impl Outcome {
    /// The outcome of a handler that answered `effect`: [`Outcome::Ignored`] when it is
    /// exactly the recorded no-op (a SQL handler none of whose `when` held answers it; the
    /// ledger reads that body as `ignored` too), else [`Outcome::Processed`].
    fn of(effect: &Effect, event: &Event<'_>) -> Self {
        if *effect == ignored_effect(event) {
            Outcome::Ignored
        } else {
            Outcome::Processed
        }
    }
}

/// What [`apply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The response as stored (inline, worker) or as the handler returned it (shadow).
    pub response: StoredResponse,
    /// Whether a handler ran.
    pub outcome: Outcome,
    /// Outbox messages the commit added (built-in targets' and the handler's; none for a re-run
    /// whose messages were queued before): the worker has something to dispatch.
    pub queued: u64,
}

/// Decides `event`'s effect before any claim, for the one-statement shape
/// (`crate::ledger::one_statement`): the plan, or `None` when the event must take the
/// transaction shape ([`apply`]): a built-in target of the source takes the event (an outbox
/// message: its `event_types` match and its filter holds, see [`takers`]; or a filter failed
/// for it), its handler is not [`Handler::plain_sql`], or the handler ran a statement,
/// queued an outbox message or failed (the transaction shape runs it again and deals with the
/// failure as always). An event type without a handler plans the recorded no-op.
///
/// Returns the plan and the [`Outcome`].
pub async fn plan(
    registry: &Registry,
    source: &SourceConfig,
    conn: &crate::ledger::Connection,
    event: &Event<'_>,
    sealing: Option<&PayloadKeys>,
) -> Option<(crate::ledger::one_statement::Plan, Outcome)> {
    // A filter that fails for this event also sends it to the transaction shape, where
    // `apply` logs and counts the failure once.
    let takers = takers(&source.targets, event);
    if !takers.targets.is_empty() || !takers.failed.is_empty() {
        return None;
    }
    let mut tx = Tx::plan(conn).for_event(&source.targets, event.event_type);
    let (effect, outcome) = match registry.get(event.source, event.event_type) {
        Some(handler) if handler.plain_sql() => match handler.handle(&mut tx, event).await {
            Ok(effect) => {
                let outcome = Outcome::of(&effect, event);
                (effect, outcome)
            }
            Err(_) => return None,
        },
        Some(_) => return None,
        None => (ignored_effect(event), Outcome::Ignored),
    };
    let Some(writes) = tx.into_plan_writes() else {
        tracing::warn!(
            source = event.source,
            event_id = event.event_id,
            event_type = event.event_type,
            "a plain-SQL handler ran a statement or queued an outbox message: the event takes \
             the transaction shape (the handler should not declare plain_sql)"
        );
        return None;
    };
    // A response that cannot be sealed now takes the transaction shape, which answers the
    // failure (503).
    match sealed_body(sealing, event, &effect).await.ok()? {
        // Sealed: a won claim answers the handler's answer, the text that was sealed.
        Some(sealed) => {
            let answer = serde_json::to_string(&effect.body).ok()?;
            crate::ledger::one_statement::Plan::new(effect.status.code(), sealed, writes)
                .map(|plan| (plan.answering(answer), outcome))
        }
        None => crate::ledger::one_statement::Plan::new(effect.status.code(), effect.body, writes)
            .map(|plan| (plan, outcome)),
    }
}

/// `effect`'s body sealed for storing when `sealing` (the source encrypts,
/// `crate::privacy::response`); `None` to store it as it is: no sealing, or the recorded no-op,
/// which holds only the event's type and by which the ledger tells an ignored event.
async fn sealed_body(
    sealing: Option<&PayloadKeys>,
    event: &Event<'_>,
    effect: &Effect,
) -> Result<Option<serde_json::Value>, crate::privacy::seal::SealError> {
    match sealing {
        Some(keys) if *effect != ignored_effect(event) => crate::privacy::response::seal_response(
            keys,
            event.source,
            event.event_id,
            &effect.body,
        )
        .await
        .map(Some),
        _ => Ok(None),
    }
}

/// Which built-in targets take an event automatically ([`takers`]).
#[derive(Debug, Default)]
pub struct Takers<'t> {
    /// The targets whose `event_types` match and whose filter holds, in configuration order.
    pub targets: Vec<&'t Target>,
    /// The targets whose `event_types` match but whose filter failed to evaluate for the event
    /// (a JMESPath runtime error), with the error (the expression and the position, no value).
    pub failed: Vec<(&'t Target, crate::expression::ExpressionError)>,
}

/// Which of `targets` take `event` automatically: its `event_types` match the event's type and
/// its `filter`, when it has one, holds for the event's envelope (`crate::expression`). The
/// envelope (and so the parse of the body) is built once, and only when a target whose
/// `event_types` match has a filter: sources without filters never parse the body here.
///
/// A filter that fails to evaluate for the event (a JMESPath runtime error, such as a function
/// given the wrong type) does not take it: the target is listed in [`Takers::failed`] instead.
/// A filter states who may receive an event; when it cannot say, sending nothing is the safe
/// side (a filter often keeps test-mode or another tenant's events from a target), and the
/// caller makes the failure visible.
pub fn takers<'t>(targets: &'t [Target], event: &Event<'_>) -> Takers<'t> {
    let mut takers = Takers::default();
    let mut envelope: Option<serde_json::Value> = None;
    for target in targets
        .iter()
        .filter(|t| t.event_types.matches(event.event_type))
    {
        let Some(filter) = &target.filter else {
            takers.targets.push(target);
            continue;
        };
        let envelope = envelope.get_or_insert_with(|| {
            crate::expression::envelope(
                event.source,
                event.event_id,
                event.event_type,
                crate::expression::body_value(event.body, event.document),
            )
        });
        match filter.matches(envelope) {
            Ok(true) => takers.targets.push(target),
            Ok(false) => {}
            Err(error) => takers.failed.push((target, error)),
        }
    }
    takers
}

/// The media type of a built-in target's message whose payload is a form body (GitHub's
/// `payload=`, Slack interactivity and slash commands).
pub const FORM: &str = "application/x-www-form-urlencoded";

/// Runs the handler for `event` (or the recorded no-op) in `tx`, then completes and commits:
/// the one place where an effect is applied, for the receiver's inline mode, shadow mode and
/// the worker. On any error the transaction is rolled back and nothing is written.
///
/// Outbox messages come first from `source`'s built-in targets (`source.targets`) that take
/// the event ([`takers`]: `event_types` match the event's type and the `filter`, if any,
/// holds; a filter that fails to evaluate queues nothing for its target and logs a warning
/// counted as `target_filter_failed`), in configuration order (messages 1, 2, ...), each
/// with the raw body exactly as verified ([`Event::body`]) as its payload: media type
/// `application/json` when the body is the JSON document itself, [`FORM`] when it is a form
/// that carries it. They are queued for events without a handler too (the recorded no-op stays
/// as it is). Then come the handler's own ([`Tx::outbox`], which accepts only `source`'s target
/// names). All are committed with the completion, or not at all.
///
/// # Errors
/// [`ApplyError`], classified as documented there.
pub async fn apply<'c>(
    registry: &Registry,
    source: &'c SourceConfig,
    tx: Tx<'c>,
    event: &Event<'c>,
    sealing: Option<&PayloadKeys>,
) -> Result<Applied, ApplyError> {
    let mut tx = tx.for_event(&source.targets, event.event_type);
    let content_type = if event.body == event.document {
        crate::outbox::JSON
    } else {
        FORM
    };
    let takers = takers(&source.targets, event);
    for (target, error) in &takers.failed {
        // Not queued (see `takers`): visible here and in the metric, never with a value of the
        // event (the error names the expression and the position only).
        tracing::warn!(
            source = event.source,
            event_id = event.event_id,
            event_type = event.event_type,
            target = target.name.as_str(),
            error = %error,
            "a target's filter failed for this event: no message queued for that target"
        );
        crate::telemetry::count(
            crate::telemetry::MetricName::TargetFilterFailed,
            event.source,
            1,
        );
    }
    for target in takers.targets {
        tx.queue_verified_body(&target.name, event.body.to_vec(), content_type);
    }
    let (effect, outcome) = match registry.get(event.source, event.event_type) {
        Some(handler) => match handler.handle(&mut tx, event).await {
            Ok(effect) => {
                let outcome = Outcome::of(&effect, event);
                (effect, outcome)
            }
            Err(error) => {
                // Dropping the transaction would roll it back too; do it explicitly so the
                // connection is clean before it returns to the pool.
                let _ = tx.rollback().await;
                return Err(error.into());
            }
        },
        None => (ignored_effect(event), Outcome::Ignored),
    };
    let sealed = match sealed_body(sealing, event, &effect).await {
        Ok(sealed) => sealed,
        Err(error) => {
            let _ = tx.rollback().await;
            return Err(ApplyError::Seal(error));
        }
    };
    let (response, queued) = tx
        .complete_counting(
            (event.source, event.event_id),
            effect.status.code(),
            sealed.as_ref().unwrap_or(&effect.body),
        )
        .await
        .map_err(|error| match error {
            // A deferred write failing (constraint, type) is the handler's failure.
            CompleteError::Write(db) => ApplyError::from(HandlerError::from(db)),
            CompleteError::Lost => ApplyError::Lost,
            CompleteError::Ledger(e) => ApplyError::Ledger(e),
        })?;
    // A sealed body is answered with what was sealed (the handler's answer as compact JSON,
    // the text every retry opens), not opened again from what the statement returned.
    let response = match sealed {
        None => response,
        Some(_) => StoredResponse {
            status: response.status,
            body: serde_json::to_string(&effect.body).unwrap_or(response.body),
        },
    };
    Ok(Applied {
        response,
        outcome,
        queued,
    })
}
