-- Users, vouchers and orders, with the constraints that make oversell and
-- duplicate orders impossible even if every layer above the database fails.

CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username      text        NOT NULL UNIQUE CHECK (length(username) BETWEEN 3 AND 32),
    password_hash text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE vouchers (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    title            text        NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    kind             text        NOT NULL CHECK (kind IN ('seckill', 'limit', 'common')),
    price_cents      bigint      NOT NULL CHECK (price_cents >= 0),
    stock_total      bigint      NOT NULL CHECK (stock_total > 0),
    -- Stock never below zero and never above what was put on sale.
    stock_left       bigint      NOT NULL CHECK (stock_left >= 0 AND stock_left <= stock_total),
    per_user_limit   bigint      NOT NULL CHECK (per_user_limit > 0),
    begin_at         timestamptz NOT NULL,
    end_at           timestamptz NOT NULL,
    captcha_required boolean     NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CHECK (end_at > begin_at)
);

-- What each user holds of each voucher (created or paid orders). The
-- per-user limit is checked against this row in the same transaction that
-- creates the order, and the row's lock serialises one user's purchases of
-- one voucher.
CREATE TABLE voucher_buyers (
    voucher_id bigint NOT NULL REFERENCES vouchers (id),
    user_id    bigint NOT NULL,
    quantity   bigint NOT NULL CHECK (quantity >= 0),
    PRIMARY KEY (voucher_id, user_id)
);

-- user_id has no foreign key on purpose: tokens may come from an external
-- identity provider, and an order never depends on a users row.
-- voucher_id has none either: a reservation for a voucher PostgreSQL does not
-- know (Redis warmed, then the voucher's transaction failed) must still be
-- recorded as a failed order, so its outcome is durable and readable. The
-- worker only creates non-failed orders for vouchers it found (a join).
CREATE TABLE orders (
    id                    bigint      PRIMARY KEY,
    voucher_id            bigint      NOT NULL,
    user_id               bigint      NOT NULL,
    quantity              bigint      NOT NULL CHECK (quantity > 0),
    amount_cents          bigint      NOT NULL CHECK (amount_cents >= 0),
    status                text        NOT NULL CHECK (status IN ('created', 'paid', 'cancelled', 'failed')),
    request_key           text        CHECK (request_key IS NULL OR length(request_key) BETWEEN 1 AND 64),
    reserved_at           timestamptz NOT NULL,
    created_at            timestamptz NOT NULL DEFAULT now(),
    pay_deadline          timestamptz,
    updated_at            timestamptz NOT NULL DEFAULT now(),
    -- Set with the transition to cancelled or failed, cleared once the stock
    -- is back in Redis: an outbox, so the Redis step is retried until done.
    redis_release_pending boolean     NOT NULL DEFAULT false,
    CHECK (status = 'failed' OR pay_deadline IS NOT NULL)
);

-- One order per (user, voucher, request key).
CREATE UNIQUE INDEX orders_request_key_uniq ON orders (user_id, voucher_id, request_key)
    WHERE request_key IS NOT NULL;
CREATE INDEX orders_user_idx ON orders (user_id, id DESC);
CREATE INDEX orders_voucher_idx ON orders (voucher_id, status);
CREATE INDEX orders_due_idx ON orders (pay_deadline) WHERE status = 'created';
CREATE INDEX orders_release_pending_idx ON orders (id) WHERE redis_release_pending;
