-- A voucher's currency (gateway/openapi.yaml, Voucher.currency): the ISO
-- 4217 code its price_cents is counted in (that currency's minor unit) and
-- its payments are charged in.
--
-- NULL is the instance's configured currency (SECKILL_CURRENCY). Vouchers
-- made before this column were sold and charged in that configured
-- currency, whatever it was: backfilling a fixed 'CNY' would quietly move
-- the price of every voucher of an instance configured otherwise. New
-- vouchers always store their code, so a later change of the setting moves
-- no price either.
ALTER TABLE vouchers
    ADD COLUMN currency text CHECK (currency ~ '^[A-Z]{3}$');
