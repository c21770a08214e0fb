-- A sale count covers `width` seconds from its `second`: 1 as the processes
-- record it, an hour once the sale report's retention rolled it up
-- (orders/salereport; SECKILL_SALE_COUNTS_RETENTION in cmd/seckill/CONFIG.md).
-- The report never draws a bucket narrower than the widest count it reads.
ALTER TABLE sale_counts ADD COLUMN width integer NOT NULL DEFAULT 1;
-- The per-second counts the retention has still to roll up, found without
-- reading the rolled-up ones. Building it holds the processes' writes to
-- sale_counts for a moment; they keep their counts for the next flush.
CREATE INDEX sale_counts_per_second ON sale_counts (voucher_id, second) WHERE width = 1;
