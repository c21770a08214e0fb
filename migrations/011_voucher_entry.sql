-- Who may enter a voucher's line or draw (gateway/openapi.yaml, Voucher.entry;
-- seckill/eligibility): only with the merchant's entry token, only from an
-- allowlist. Existing vouchers take every shopper, as before.
ALTER TABLE vouchers
    ADD COLUMN entry_token_required boolean NOT NULL DEFAULT false,
    ADD COLUMN entry_allowlist boolean NOT NULL DEFAULT false;
