-- A draw's outcome comes from a public beacon round (seckill/draw/README.md).
-- Owned by orders/pgstore (draws.go) for seckill/draw.

-- Every commitment a voucher's draw ever showed: the beacon round it takes
-- its randomness from (fixed when the voucher is made) and the hash of its
-- frozen entries (at begin_at). Append-only: a commitment once shown can
-- never be replaced, only told apart from a later one.
CREATE TABLE draw_commitments (
    seq          bigserial PRIMARY KEY,
    voucher_id   bigint NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('beacon', 'entries_hash')),
    body         jsonb NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (voucher_id, kind)
);

CREATE FUNCTION draw_commitments_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a draw''s commitments are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER draw_commitments_no_change BEFORE UPDATE OR DELETE ON draw_commitments
    FOR EACH ROW EXECUTE FUNCTION draw_commitments_append_only();
CREATE TRIGGER draw_commitments_no_truncate BEFORE TRUNCATE ON draw_commitments
    FOR EACH STATEMENT EXECUTE FUNCTION draw_commitments_append_only();

-- A draw's life: when its entries opened (so that entries lost from Redis
-- are noticed), and its end: drawn (the round's signature and the result)
-- or void (why).
CREATE TABLE draws (
    voucher_id  bigint PRIMARY KEY,
    opened_at   timestamptz NOT NULL DEFAULT now(),
    void_reason text,
    signature   text,
    entries     bigint,
    winners     bigint,
    cutoff      text,
    ended_at    timestamptz
);

-- The frozen entries of a draw, copied at begin_at: the record the draw is
-- made (and checked) from.
CREATE TABLE draw_entries (
    voucher_id bigint NOT NULL,
    entry_id   text NOT NULL,
    user_id    bigint NOT NULL,
    PRIMARY KEY (voucher_id, entry_id),
    UNIQUE (voucher_id, user_id)
);
