//! Example stateful handler: Stripe `customer.subscription.created`, `.updated` and `.deleted`
//! maintain the `subscriptions` table through the ordering guard.
//!
//! The version is the **event's** `created` (unix seconds): the subscription object's own
//! `created` is its creation time and never changes, so versioning on it would apply the first
//! event and treat every later update as stale. A late older event, or a replay of the applied
//! one, completes as a no-op (`"status": "stale"`). Stripe event shape: `{"id", "type",
//! "created", "data": {"object": {"id": "sub_...", "customer": "cus_...", "status": "active",
//! "items": {"data": [{"price": {"id": "price_..."}}]}}}}`.
//!
//! **Ties.** Stripe can send `customer.subscription.created` and `.updated` within the same
//! second, so both carry the same version and the guard cannot order them. With the source's
//! `api_key` configured, the handler re-fetches the subscription (`GET /v1/subscriptions/{id}`,
//! Stripe API reference "Retrieve a subscription"), writes the state Stripe returns, and marks
//! the tie resolved (`"status": "tie_resolved"`); a failed re-fetch is retryable. Without a key
//! the tie stays recorded in `ordering_tie` for operators (`"status": "tie"`).

use std::time::Duration;

use secrecy::ExposeSecret;
use serde::Deserialize;
use shared::config::ProviderApi;
use shared::ordering::resolved;
use shared::prelude::*;

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

/// How long a re-fetch from Stripe may take, seconds.
pub const REFETCH_TIMEOUT_SECS: u64 = 5;

/// Writes the subscription's plan and status when the event is newer than the state applied;
/// resolves ties through Stripe's API when it has a key.
#[derive(Debug, Clone, Default)]
pub struct SubscriptionChanged {
    api: Option<(ProviderApi, reqwest::Client)>,
}

impl SubscriptionChanged {
    /// A handler that resolves ties through `api` when given.
    pub fn new(api: Option<ProviderApi>) -> Self {
        Self {
            api: api.map(|api| {
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_secs(REFETCH_TIMEOUT_SECS))
                    .build()
                    .unwrap_or_default();
                (api, client)
            }),
        }
    }

    /// The subscription as Stripe has it now.
    async fn refetch(&self, id: &str) -> Result<Option<Subscription>, HandlerError> {
        let Some((api, client)) = &self.api else {
            return Ok(None);
        };
        let url = format!("{}/v1/subscriptions/{}", api.base_url, id);
        let retryable = |what: &str, e: reqwest::Error| HandlerError::Retryable {
            reason: format!("re-fetching the subscription from Stripe: {what}"),
            source: Some(Box::new(e.without_url())),
        };
        let response = client
            .get(url)
            .bearer_auth(api.key.expose_secret())
            .send()
            .await
            .map_err(|e| retryable("request failed", e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(HandlerError::retryable(format!(
                "re-fetching the subscription from Stripe: HTTP {status}"
            )));
        }
        let subscription = response
            .json::<Subscription>()
            .await
            .map_err(|e| retryable("unreadable answer", e))?;
        if subscription.id != id {
            // Never write another object's state under this one's tie.
            return Err(HandlerError::retryable(
                "re-fetching the subscription from Stripe: the answer is about another object",
            ));
        }
        Ok(Some(subscription))
    }
}

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

static UPSERT_SUBSCRIPTION: Sql = Sql {
    text: "\
INSERT INTO subscriptions (subscription_id, customer_id, plan, status, version, event_id)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (subscription_id) DO UPDATE
SET customer_id = EXCLUDED.customer_id,
    plan = EXCLUDED.plan,
    status = EXCLUDED.status,
    version = EXCLUDED.version,
    event_id = EXCLUDED.event_id,
    updated_at = now()
-- Defence in depth: the entity_version guard already decided; never move state backwards. An
-- equal version is a tie resolved from Stripe's own copy of the object.
WHERE subscriptions.version <= EXCLUDED.version",
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::INT8,
        Type::TEXT,
    ],
};

fn plan_of(subscription: &Subscription) -> Option<String> {
    subscription
        .items
        .as_ref()
        .and_then(|items| items.data.first())
        .map(|item| item.price.id.clone())
}

fn write_state(
    tx: &mut Tx<'_>,
    subscription: &Subscription,
    state: String,
    version: i64,
    event_id: &str,
) -> Result<(), HandlerError> {
    tx.defer(
        &UPSERT_SUBSCRIPTION,
        vec![
            Box::new(subscription.id.clone()),
            Box::new(subscription.customer.clone()),
            Box::new(plan_of(subscription)),
            Box::new(state),
            Box::new(version),
            Box::new(event_id.to_owned()),
        ],
    )
}

#[async_trait]
impl Handler for SubscriptionChanged {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        let parsed: StripeEvent = serde_json::from_slice(event.document).map_err(|e| {
            HandlerError::fatal(format!(
                "not a subscription event: {}",
                hookledger_verify::extract::json_error(&e)
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
        let status = match advance(tx, &entity, event.event_id).await? {
            Advance::Applied => {
                // A deleted subscription arrives with status "canceled"; say so even if not.
                let state = if event.event_type.ends_with(".deleted") {
                    "canceled".to_owned()
                } else {
                    subscription.status.clone()
                };
                write_state(tx, &subscription, state, parsed.created, event.event_id)?;
                "applied"
            }
            Advance::Stale { .. } => "stale",
            Advance::Tie { .. } => match self.refetch(&subscription.id).await? {
                Some(current) => {
                    let state = current.status.clone();
                    write_state(tx, &current, state, parsed.created, event.event_id)?;
                    resolved(tx, &entity, event.event_id).await?;
                    "tie_resolved"
                }
                None => "tie",
            },
        };
        Ok(Effect::ok(serde_json::json!({
            "subscription_id": subscription.id,
            "version": parsed.created,
            "status": status,
        })))
    }
}
