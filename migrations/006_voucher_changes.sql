-- Every operator's change of a running sale (PATCH /api/v1/admin/vouchers/{id}),
-- written in the transaction of the change itself: who made it (the
-- fingerprint of the operator's token), what it asked for (0 or NULL:
-- unchanged) and the stock total after it. The operator page lists them.
CREATE TABLE voucher_changes (
    id               bigserial PRIMARY KEY,
    voucher_id       bigint NOT NULL REFERENCES vouchers (id) ON DELETE CASCADE,
    at               timestamptz NOT NULL DEFAULT now(),
    operator         text NOT NULL,
    add_stock        bigint NOT NULL DEFAULT 0,
    admit_per_second bigint NOT NULL DEFAULT 0,
    end_at           timestamptz,
    stock_total      bigint NOT NULL
);
CREATE INDEX voucher_changes_by_voucher ON voucher_changes (voucher_id, id);
