-- A voucher may ask a buyer for a proof of work instead of a captcha
-- (gateway/openapi.yaml, Voucher.challenge; the README's "Challenges").
-- captcha_required stays the captcha's column: a voucher takes one
-- challenge at most.
ALTER TABLE vouchers
    ADD COLUMN challenge_pow boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT vouchers_one_challenge CHECK (NOT (challenge_pow AND captcha_required));
