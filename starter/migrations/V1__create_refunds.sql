-- One row per Stripe charge.refunded event, written by refunds::charge_refunded in the claim's
-- transaction.
CREATE TABLE refunds (
    -- The event that recorded the refund (Stripe sends charge.refunded once per refund, with
    -- the charge's cumulative amount_refunded).
    event_id     text        NOT NULL,
    charge_id    text        NOT NULL,
    -- The charge's amount_refunded, in the currency's minor unit (cents).
    amount_minor bigint      NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT refunds_pkey PRIMARY KEY (event_id),
    -- A negative amount is a payload no retry will fix: the write fails with SQLSTATE 23514,
    -- which the ledger treats as fatal (the event is kept dead, nothing is written).
    CONSTRAINT refunds_amount_non_negative CHECK (amount_minor >= 0)
);
