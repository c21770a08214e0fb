-- The operator's pause of one voucher (PUT /api/v1/admin/vouchers/{id}/state).
-- PostgreSQL is its record, so a restarted fleet keeps a paused sale paused.
ALTER TABLE vouchers ADD COLUMN paused boolean NOT NULL DEFAULT false;
