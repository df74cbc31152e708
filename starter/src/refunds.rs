//! Stripe `charge.refunded` records one `refunds` row, exactly once per event.

use hookledger::prelude::*;

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
