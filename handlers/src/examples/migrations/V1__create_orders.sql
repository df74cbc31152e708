-- Example business table, written by the example Stripe handler (payment_intent.succeeded)
-- in the same transaction as the claim. It exists for the examples and the tests.
CREATE TABLE orders (
    order_id    text        NOT NULL,
    total_minor bigint      NOT NULL,
    currency    text        NOT NULL,
    -- The event that recorded the order.
    source      text        NOT NULL,
    event_id    text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT orders_pkey PRIMARY KEY (order_id),
    -- Amounts are in the currency's minor unit (cents); a refund is another table's business.
    CONSTRAINT orders_total_minor_non_negative CHECK (total_minor >= 0),
    -- ISO 4217, lower case as Stripe sends it.
    CONSTRAINT orders_currency_iso_4217 CHECK (currency ~ '^[a-z]{3}$')
);
