-- Payments through a provider (README, "Paying"), owned by orders/pgstore.
--
-- An order ends refunded when money it took went back: an operator's
-- refund confirmed by the provider, or money that came after the order was
-- cancelled and was sent back at once.
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('created', 'paid', 'cancelled', 'failed', 'refunded'));

-- The order's current payment, copied on the order's row so that every
-- read and every RETURNING of an order carries it without a join; the
-- payments table keeps each attempt.
ALTER TABLE orders
    ADD COLUMN payment_id       text,
    ADD COLUMN payment_provider text,
    ADD COLUMN payment_status   text CHECK (payment_status IN ('pending', 'succeeded', 'refunded', 'failed')),
    ADD COLUMN payment_amount_cents bigint,
    ADD COLUMN payment_currency text;

-- One row per payment asked of a provider (a Stripe PaymentIntent). Its
-- status only moves up the order pending < failed < succeeded < refunded,
-- so events that arrive twice or out of order change it once.
CREATE TABLE payments (
    id            text        PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 255),
    order_id      bigint      NOT NULL REFERENCES orders (id),
    provider      text        NOT NULL,
    status        text        NOT NULL CHECK (status IN ('pending', 'succeeded', 'refunded', 'failed')),
    amount_cents  bigint      NOT NULL CHECK (amount_cents >= 0),
    currency      text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    client_secret text        NOT NULL DEFAULT '',
    -- late: the money came after the order was cancelled, so it is owed back.
    late          boolean     NOT NULL DEFAULT false,
    -- refund_owed is an outbox like orders.redis_release_pending: set in the
    -- transaction that decides a refund, cleared once the provider took the
    -- request, so a refund decided by a process that died is still made.
    refund_owed   boolean     NOT NULL DEFAULT false,
    refund_asked_at timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
-- At most one payment of an order waits for its money at a time.
CREATE UNIQUE INDEX payments_one_pending ON payments (order_id) WHERE status = 'pending';
CREATE INDEX payments_order_idx ON payments (order_id);
CREATE INDEX payments_refund_owed_idx ON payments (id) WHERE refund_owed;

-- Every event a provider sent whose signature held, once: the primary key
-- makes a repeated delivery a no-op in the transaction that acts on it.
CREATE TABLE payment_events (
    id          text        PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 255),
    provider    text        NOT NULL,
    type        text        NOT NULL,
    payment_id  text,
    order_id    bigint,
    -- what the event did: applied, ignored (nothing to change), late_refund.
    result      text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payment_events_order_idx ON payment_events (order_id);
