//! Stripe `charge.refunded` records one `refunds` row: a plain `async fn` written with the
//! prelude alone. The README and the book show this file without its doc comments
//! (`tests/book_example.rs` checks).

use shared::prelude::*;

static RECORD: Sql = Sql {
    text: "INSERT INTO refunds (event_id, charge_id, amount_minor) VALUES ($1, $2, $3)",
    types: &[Type::TEXT, Type::TEXT, Type::INT8],
};

/// Stripe `charge.refunded`: one `refunds` row for the charge in `data.object`.
pub async fn charge_refunded(tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
    let doc: Value = event.json()?;
    let charge = &doc["data"]["object"];
    let (Some(id), Some(amount)) = (charge["id"].as_str(), charge["amount_refunded"].as_i64())
    else {
        return Err(HandlerError::fatal("not a refunded charge"));
    };
    tx.execute(&RECORD, &[&event.event_id, &id, &amount])
        .await?;
    Ok(Effect::ok(json!({ "status": "refunded", "charge_id": id })))
}
