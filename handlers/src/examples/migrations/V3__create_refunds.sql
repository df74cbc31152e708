-- Example table of a team's own, written by no Rust at all: the SQL handler the demo's stripe
-- source declares for charge.refunded (events/sources.local.json; docs/guide/without-rust.md),
-- one row per refund event, in the claim's transaction.
CREATE TABLE refunds (
    event_id     text        NOT NULL,
    charge_id    text        NOT NULL,
    amount_minor bigint      NOT NULL,
    currency     text        NOT NULL,
    refunded_at  timestamptz NOT NULL,
    CONSTRAINT refunds_pkey PRIMARY KEY (event_id),
    -- Stripe's amount_refunded, in the currency's minor unit.
    CONSTRAINT refunds_amount_minor_non_negative CHECK (amount_minor >= 0)
);
