//! The chaos handlers: business effects that are NOT idempotent by themselves (a doubled event
//! would show as a doubled row), registered next to the project's own (`handlers::registry`) in
//! `chaos-receiver` and `chaos-worker`.
//!
//! - `charge.refunded` ([`ChargeRefunded`]): one `chaos_effects` row per event, written through
//!   [`Tx::defer`] with [`Handler::plain_sql`] = `true` (the one-statement hot path that ships).
//! - `invoice.paid` ([`InvoicePaid`]): the transaction shape: a `SELECT 1` first (so the claim
//!   transaction stays open across round trips), then a sleep of `CHAOS_HANDLER_SLEEP_MS`
//!   (milliseconds, default 0, read once per process), then the same insert.
//!
//! `chaos_effects` has no unique constraint on purpose ([`EFFECTS_TABLE`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hookledger_verify::Scheme;
use shared::prelude::*;

/// The non-idempotent plain-SQL event type.
pub const CHARGE_REFUNDED: &str = "charge.refunded";

/// The transaction-shaped event type.
pub const INVOICE_PAID: &str = "invoice.paid";

/// The effects table, created by the harness after the project's migrations: one row per
/// applied event, NO unique constraint (two rows for one event id = a doubled effect).
pub const EFFECTS_TABLE: &str = "\
CREATE TABLE IF NOT EXISTS chaos_effects (
    id         bigserial   PRIMARY KEY,
    source     text        NOT NULL,
    event_id   text        NOT NULL,
    event_type text        NOT NULL,
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS chaos_effects_event_idx ON chaos_effects (source, event_id)";

static RECORD_EFFECT: Sql = Sql {
    text: "INSERT INTO chaos_effects (source, event_id, event_type) VALUES ($1, $2, $3)",
    types: &[Type::TEXT, Type::TEXT, Type::TEXT],
};

static SELECT_ONE: Sql = Sql {
    text: "SELECT 1",
    types: &[],
};

/// `charge.refunded`: one `chaos_effects` row, deferred (plain SQL).
#[derive(Debug, Clone, Copy, Default)]
pub struct ChargeRefunded;

#[async_trait]
impl Handler for ChargeRefunded {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        tx.defer(
            &RECORD_EFFECT,
            vec![
                Box::new(event.source.to_owned()),
                Box::new(event.event_id.to_owned()),
                Box::new(event.event_type.to_owned()),
            ],
        )?;
        Ok(Effect::ok(serde_json::json!({"status": "refund recorded"})))
    }

    fn plain_sql(&self) -> bool {
        true
    }
}

/// `invoice.paid`: `SELECT 1`, a sleep of `CHAOS_HANDLER_SLEEP_MS`, one `chaos_effects` row.
#[derive(Debug, Clone, Copy, Default)]
pub struct InvoicePaid;

/// `CHAOS_HANDLER_SLEEP_MS` (milliseconds; unset or unparsable = 0), read once.
fn handler_sleep() -> Duration {
    static SLEEP: OnceLock<Duration> = OnceLock::new();
    *SLEEP.get_or_init(|| {
        Duration::from_millis(
            std::env::var("CHAOS_HANDLER_SLEEP_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        )
    })
}

#[async_trait]
impl Handler for InvoicePaid {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        tx.query(&SELECT_ONE, &[]).await?;
        let sleep = handler_sleep();
        if !sleep.is_zero() {
            tokio::time::sleep(sleep).await;
        }
        tx.execute(
            &RECORD_EFFECT,
            &[&event.source, &event.event_id, &event.event_type],
        )
        .await?;
        Ok(Effect::ok(
            serde_json::json!({"status": "invoice recorded"}),
        ))
    }
}

/// The project's registry (`handlers::registry`, examples on) plus the chaos handlers for
/// every Stripe source in `sources`.
pub fn registry(sources: &Sources) -> Registry {
    let mut registry = ::handlers::examples::registry(sources);
    for source in sources.iter().filter(|s| s.scheme == Scheme::Stripe) {
        registry.register(&source.name, CHARGE_REFUNDED, Arc::new(ChargeRefunded));
        registry.register(&source.name, INVOICE_PAID, Arc::new(InvoicePaid));
    }
    registry
}
