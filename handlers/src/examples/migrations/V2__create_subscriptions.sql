-- Example stateful business table, written by the example Stripe subscription handler
-- (customer.subscription.created/updated/deleted) through the entity_version ordering guard.
CREATE TABLE subscriptions (
    subscription_id text        NOT NULL,
    customer_id     text,
    -- The price id of the first item (Stripe's `items.data[0].price.id`).
    plan            text,
    -- Stripe's subscription status: active, past_due, canceled, ...
    status          text        NOT NULL,
    -- The event's `created` (unix seconds) that wrote this state: the ordering version.
    version         bigint      NOT NULL,
    -- The event that wrote this state.
    event_id        text        NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT subscriptions_pkey PRIMARY KEY (subscription_id)
);
