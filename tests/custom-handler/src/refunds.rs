//! Stripe `charge.refunded` records one `refunds` row: the example handler of README.md and of
//! the book's "Writing handlers" (`docs/guide/handlers.md`), line for line.

use shared::db::Sql;
use shared::handlers::{Effect, Event, Handler, HandlerError};
use shared::ledger::Tx;
use tokio_postgres::types::Type;

static RECORD: Sql = Sql {
    text: "INSERT INTO refunds (event_id, charge_id, amount_minor) VALUES ($1, $2, $3)",
    types: &[Type::TEXT, Type::TEXT, Type::INT8],
};

/// Records the refund of the charge in `data.object` (`id`, `amount_refunded`).
pub struct ChargeRefunded;

#[async_trait::async_trait]
impl Handler for ChargeRefunded {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        let doc: serde_json::Value =
            serde_json::from_slice(event.document).map_err(|_| HandlerError::fatal("not JSON"))?;
        let charge = &doc["data"]["object"];
        let (Some(id), Some(amount)) = (charge["id"].as_str(), charge["amount_refunded"].as_i64())
        else {
            return Err(HandlerError::fatal("not a refunded charge"));
        };
        tx.execute(&RECORD, &[&event.event_id, &id, &amount])
            .await?;
        let body = serde_json::json!({ "status": "refunded", "charge_id": id });
        Ok(Effect::ok(body))
    }
}
