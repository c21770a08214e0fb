-- Card holds of a sale by draw (seckill/draw/README.md, "Holds"; orders/payment/README.md),
-- owned by orders/pgstore. An entrant's card is authorised at entry and
-- only a winner who buys is charged: the hold is captured as their order's
-- payment; everyone else's is released.
--
-- state moves held -> capturing -> captured, or held -> releasing ->
-- released. capturing and releasing are claims: the conditional update that
-- sets one is won by exactly one process fleet-wide, which then asks the
-- provider with an idempotency key of the hold; a claim older than a minute
-- is taken over (its asker died), asking again with the same key.
CREATE TABLE draw_holds (
    voucher_id    bigint      NOT NULL REFERENCES vouchers (id),
    user_id       bigint      NOT NULL,
    payment_id    text        NOT NULL UNIQUE CHECK (length(payment_id) BETWEEN 1 AND 255),
    provider      text        NOT NULL,
    amount_cents  bigint      NOT NULL CHECK (amount_cents >= 0),
    currency      text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    client_secret text        NOT NULL DEFAULT '',
    state         text        NOT NULL DEFAULT 'held'
                  CHECK (state IN ('held', 'capturing', 'captured', 'releasing', 'released')),
    -- the order the hold pays, from its capture's claim on.
    order_id      bigint,
    claimed_at    timestamptz,
    settled_at    timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (voucher_id, user_id)
);
CREATE INDEX draw_holds_open_idx ON draw_holds (voucher_id) WHERE state IN ('held', 'capturing', 'releasing');

-- A draw voucher may ask each entry for a card hold (gateway/openapi.yaml,
-- WaitingRoom.draw_hold).
ALTER TABLE vouchers ADD COLUMN room_draw_hold boolean NOT NULL DEFAULT false;
