//! Example stateful handler: Stripe `customer.subscription.created`, `.updated` and `.deleted`
//! maintain the `subscriptions` table through the ordering guard.
//!
//! The version is the **event's** `created` (unix seconds): the subscription object's own
//! `created` is its creation time and never changes, so versioning on it would apply the first
//! event and treat every later update as stale. A late older event, or a replay of the applied
//! one, completes as a no-op (`"status": "stale"`). Stripe event shape: `{"id", "type",
//! "created", "data": {"object": {"id": "sub_...", "customer": "cus_...", "status": "active",
//! "items": {"data": [{"price": {"id": "price_..."}}]}}}}`.

use serde::Deserialize;

use super::{Effect, Event, Handler, HandlerError};
use crate::ledger::{ClaimTx, Write};
use crate::ordering::{advance, Advance, Entity};

/// The Stripe event types this handler serves.
pub const EVENT_TYPES: [&str; 3] = [
    "customer.subscription.created",
    "customer.subscription.updated",
    "customer.subscription.deleted",
];

/// The entity type in `entity_version`.
pub const ENTITY_TYPE: &str = "subscription";

/// The `entity_version.source` this handler versions under, for every Stripe source.
pub const ORDERING_SCOPE: &str = "stripe";

/// Writes the subscription's plan and status when the event is newer than the state applied.
#[derive(Debug, Clone, Copy, Default)]
pub struct SubscriptionChanged;

#[derive(Deserialize)]
struct StripeEvent {
    created: i64,
    data: Data,
}

#[derive(Deserialize)]
struct Data {
    object: Subscription,
}

#[derive(Deserialize)]
struct Subscription {
    id: String,
    #[serde(default)]
    customer: Option<String>,
    status: String,
    #[serde(default)]
    items: Option<Items>,
}

#[derive(Deserialize)]
struct Items {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    price: Price,
}

#[derive(Deserialize)]
struct Price {
    id: String,
}

const UPSERT_SUBSCRIPTION: &str = "\
INSERT INTO subscriptions (subscription_id, customer_id, plan, status, version, event_id)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (subscription_id) DO UPDATE
SET customer_id = EXCLUDED.customer_id,
    plan = EXCLUDED.plan,
    status = EXCLUDED.status,
    version = EXCLUDED.version,
    event_id = EXCLUDED.event_id,
    updated_at = now()
-- Defence in depth: the entity_version guard already decided; never move state backwards.
WHERE subscriptions.version < EXCLUDED.version";

#[async_trait::async_trait]
impl Handler for SubscriptionChanged {
    async fn handle(&self, tx: &ClaimTx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        let parsed: StripeEvent = serde_json::from_slice(event.document).map_err(|e| {
            HandlerError::Payload(format!(
                "not a subscription event: {}",
                crate::extract::json_error(&e)
            ))
        })?;
        let subscription = parsed.data.object;
        let entity = Entity {
            // The subscriptions table is one per Stripe account, whichever endpoint (source) an
            // event arrives through (two endpoints during a migration from inline to deferred,
            // say), so the ordering scope is the provider, not the source name.
            source: ORDERING_SCOPE,
            entity_type: ENTITY_TYPE,
            entity_id: &subscription.id,
            version: parsed.created,
        };
        let decision = advance(tx.connection(), &entity, event.event_id).await?;
        let status = match decision {
            Advance::Applied => "applied",
            Advance::Stale { .. } => "stale",
            Advance::Tie => "stale_tie",
        };
        let body = serde_json::json!({
            "subscription_id": subscription.id,
            "version": parsed.created,
            "status": status,
        });
        let mut writes = Vec::new();
        if decision.is_applied() {
            let plan = subscription
                .items
                .and_then(|items| items.data.into_iter().next())
                .map(|item| item.price.id);
            // A deleted subscription arrives with status "canceled"; say so even if not.
            let state = if event.event_type.ends_with(".deleted") {
                "canceled".to_owned()
            } else {
                subscription.status
            };
            writes.push(Write {
                sql: UPSERT_SUBSCRIPTION,
                params: vec![
                    Box::new(subscription.id),
                    Box::new(subscription.customer),
                    Box::new(plan),
                    Box::new(state),
                    Box::new(parsed.created),
                    Box::new(event.event_id.to_owned()),
                ],
            });
        }
        Ok(Effect {
            status: 200,
            body,
            writes,
        })
    }
}
