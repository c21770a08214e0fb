-- A waiting room holds a turn its shopper missed for the voucher's
-- grace_seconds (seckill/waitroom/README.md, "A missed turn is held");
-- 0 expires a missed pass at once, as rooms did before.
ALTER TABLE vouchers
    ADD COLUMN grace_seconds int NOT NULL DEFAULT 600
        CHECK (grace_seconds BETWEEN 0 AND 3600);
