-- The sale report's record (orders/salereport): what each voucher's sale did
-- in each second, one row per figure ("attempts", "refused:sold_out",
-- "waiting", ...). Every process of the fleet adds its own counts to the
-- same rows, so a row is the fleet's figure. No foreign key: figures are
-- only recorded for vouchers the catalog knows, and a batch must never fail
-- for one voucher.
CREATE TABLE sale_counts (
    voucher_id bigint      NOT NULL,
    second     timestamptz NOT NULL,
    name       text        NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    n          bigint      NOT NULL,
    PRIMARY KEY (voucher_id, second, name)
);
