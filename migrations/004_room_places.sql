-- The durable copy of the waiting rooms' lines (seckill/waitroom, Mirror):
-- every place, and the pass expiry of the admitted, copied from Redis in
-- batches so that a Redis data loss does not take the line. place is the
-- line's score (a random pre-queue place below 2^52, or 2^52 plus the
-- arrival sequence).
CREATE TABLE room_places (
    voucher_id      bigint NOT NULL REFERENCES vouchers (id) ON DELETE CASCADE,
    user_id         bigint NOT NULL,
    place           bigint NOT NULL,
    pass_expires_ms bigint,
    PRIMARY KEY (voucher_id, user_id)
);
