-- How a voucher's stock is spread in Redis and whether buying it takes a
-- place in a waiting room (gateway/openapi.yaml, Voucher.shards and
-- Voucher.waiting_room). Existing vouchers keep one bucket and no room.
ALTER TABLE vouchers
    ADD COLUMN shards int NOT NULL DEFAULT 1 CHECK (shards BETWEEN 1 AND 64),
    ADD COLUMN room_admit_per_second int CHECK (room_admit_per_second > 0),
    ADD COLUMN room_prequeue_seconds int CHECK (room_prequeue_seconds >= 0),
    -- A room has both figures or none: half a room cannot admit anyone.
    ADD CONSTRAINT vouchers_room_whole CHECK (
        (room_admit_per_second IS NULL) = (room_prequeue_seconds IS NULL));
