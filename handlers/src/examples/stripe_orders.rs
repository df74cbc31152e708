//! Example handler: a Stripe `payment_intent.succeeded` event records one `orders` row.
//!
//! Stripe event shape (API reference, "The Event object" and "The PaymentIntent object"):
//! `{"id": "evt_...", "type": "payment_intent.succeeded", "data": {"object": {"id": "pi_...",
//! "amount": 2000, "amount_received": 2000, "currency": "usd", "metadata": {"order_id": "..."}}}}`.
//! Amounts are integers in the currency's minor unit.

use serde::Deserialize;

use shared::prelude::*;

/// The Stripe event type this handler serves.
pub const EVENT_TYPE: &str = "payment_intent.succeeded";

/// Records the order. The order id is `metadata.order_id` when the integration set one (the
/// usual way to tie a PaymentIntent to an order), else the PaymentIntent id; the total is
/// `amount_received`, else `amount`. A second event for the same order (e.g. a different event
/// id for the same payment) leaves the first row as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct PaymentIntentSucceeded;

#[derive(Deserialize)]
struct StripeEvent<'a> {
    #[serde(borrow)]
    data: Data<'a>,
}

#[derive(Deserialize)]
struct Data<'a> {
    #[serde(borrow)]
    object: PaymentIntent<'a>,
}

#[derive(Deserialize)]
struct PaymentIntent<'a> {
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
    amount: Option<i64>,
    amount_received: Option<i64>,
    #[serde(borrow)]
    currency: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    metadata: Option<Metadata<'a>>,
}

#[derive(Deserialize)]
struct Metadata<'a> {
    #[serde(default, borrow)]
    order_id: Option<std::borrow::Cow<'a, str>>,
}

static RECORD_ORDER: Sql = Sql {
    text: "\
INSERT INTO orders (order_id, total_minor, currency, source, event_id)
VALUES ($1, $2, $3, $4, $5)
-- Another event already recorded this order: the first record stands.
ON CONFLICT (order_id) DO NOTHING",
    types: &[Type::TEXT, Type::INT8, Type::TEXT, Type::TEXT, Type::TEXT],
};

#[async_trait]
impl Handler for PaymentIntentSucceeded {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        let parsed: StripeEvent<'_> = serde_json::from_slice(event.document).map_err(|e| {
            HandlerError::fatal(format!(
                "not a payment_intent event: {}",
                hookledger_verify::extract::json_error(&e)
            ))
        })?;
        let intent = parsed.data.object;
        let total_minor = intent
            .amount_received
            .or(intent.amount)
            .ok_or_else(|| HandlerError::fatal("payment intent has no amount"))?;
        let order_id = intent
            .metadata
            .and_then(|m| m.order_id)
            .filter(|id| !id.is_empty())
            .unwrap_or(intent.id)
            .into_owned();
        let body = serde_json::json!({ "order_id": order_id, "status": "recorded" });
        // A currency the table's CHECK refuses ("USD" instead of "usd") fails this write with
        // SQLSTATE 23514: fatal, so the event is kept dead instead of retried for days.
        tx.defer(
            &RECORD_ORDER,
            vec![
                Box::new(order_id),
                Box::new(total_minor),
                Box::new(intent.currency.into_owned()),
                Box::new(event.source.to_owned()),
                Box::new(event.event_id.to_owned()),
            ],
        )?;
        Ok(Effect::ok(body))
    }

    /// It decides from the payload alone and only defers one insert: the receiver sends the
    /// claim, this insert and the completed response as one statement.
    fn plain_sql(&self) -> bool {
        true
    }
}
