-- A waiting room may sell by draw (gateway/openapi.yaml, WaitingRoom.mode and
-- draw_pass_seconds; seckill/draw). Existing rooms keep the line.
ALTER TABLE vouchers
    ADD COLUMN room_mode text NOT NULL DEFAULT 'line' CHECK (room_mode IN ('line', 'draw')),
    ADD COLUMN room_draw_pass_seconds int NOT NULL DEFAULT 0 CHECK (room_draw_pass_seconds >= 0);
