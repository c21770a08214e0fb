-- A waiting room whose admission rate follows the back end's health
-- (gateway/openapi.yaml, WaitingRoom.adaptive): the buy path's p99 it aims
-- for and the bounds of its rate. Existing rooms keep their fixed rate.
ALTER TABLE vouchers
    ADD COLUMN room_target_p99_ms int CHECK (room_target_p99_ms > 0),
    ADD COLUMN room_min_per_second int CHECK (room_min_per_second > 0),
    ADD COLUMN room_max_per_second int CHECK (room_max_per_second >= room_min_per_second),
    -- All three or none, and only on a room.
    ADD CONSTRAINT vouchers_room_adaptive_whole CHECK (
        (room_target_p99_ms IS NULL) = (room_min_per_second IS NULL)
        AND (room_min_per_second IS NULL) = (room_max_per_second IS NULL)
        AND (room_target_p99_ms IS NULL OR room_admit_per_second IS NOT NULL));
