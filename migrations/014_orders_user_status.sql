-- A shopper's orders in one status, newest first: GET /api/v1/orders?status=
-- seeks this index from the last id of the page before, whatever share of
-- the shopper's orders the status has (orders_user_idx alone reads past the
-- other statuses).
CREATE INDEX IF NOT EXISTS orders_user_status_idx ON orders (user_id, status, id DESC);
