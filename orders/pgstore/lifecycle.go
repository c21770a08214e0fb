package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Pay marks the user's order paid: ONE conditional UPDATE, so a payment and a
// cancellation (the shopper's or the sweeper's) racing each other have
// exactly one winner; the loser's WHERE no longer matches the row version it
// waited for. Someone else's or an unknown order is ErrNotFound; an order
// already paid is returned as it is with orders.ErrAlready (a retry of a pay
// whose answer was lost); any other order that is not created, or whose
// pay_deadline has passed (PostgreSQL's clock), is ErrConflict.
func (s *Store) Pay(ctx context.Context, userID, orderID int64) (_ orders.Order, err error) {
	defer unavailable(&err)
	o, err := retryConflicts(ctx, func() (orders.Order, error) {
		return scanOrder(s.pool.QueryRow(ctx, `
		UPDATE orders SET status = 'paid', updated_at = now()
		WHERE id = $1 AND user_id = $2 AND status = 'created' AND pay_deadline > now()
		RETURNING `+orderColumns, orderID, userID))
	})
	if err == nil {
		return o, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return orders.Order{}, fmt.Errorf("pgstore: pay order %d: %w", orderID, err)
	}
	return s.whyNot(ctx, userID, orderID, orders.StatusPaid)
}

// whyNot explains a conditional update to status to that matched nothing:
// an order already in that status is returned with orders.ErrAlready.
func (s *Store) whyNot(ctx context.Context, userID, orderID int64, to orders.Status) (orders.Order, error) {
	o, err := s.Order(ctx, orderID)
	switch {
	case err != nil:
		return orders.Order{}, err
	case o.UserID != userID:
		return orders.Order{}, fmt.Errorf("pgstore: order %d: %w", orderID, apperr.ErrNotFound)
	case o.Status == to:
		return o, fmt.Errorf("pgstore: order %d is %s: %w", orderID, o.Status, orders.ErrAlready)
	}
	return orders.Order{}, fmt.Errorf("pgstore: order %d is %s and cannot be %s: %w", orderID, o.Status, to, apperr.ErrConflict)
}

// Cancel cancels the user's created order and puts its stock back, in one
// transaction (see cancelLocked). Errors as for Pay: an order already
// cancelled (by its owner or by the payment timeout) comes with
// orders.ErrAlready.
func (s *Store) Cancel(ctx context.Context, userID, orderID int64) (_ orders.Order, err error) {
	defer unavailable(&err)
	list, err := s.cancelWhere(ctx, `id = $1 AND user_id = $2 AND status = 'created'`, orderID, userID)
	if err != nil {
		return orders.Order{}, fmt.Errorf("pgstore: cancel order %d: %w", orderID, err)
	}
	if len(list) == 1 {
		return list[0], nil
	}
	return s.whyNot(ctx, userID, orderID, orders.StatusCancelled)
}

// CancelExpired cancels up to max created orders whose pay_deadline has
// passed, in one transaction. The due rows are claimed FOR UPDATE SKIP
// LOCKED, so many sweepers share the work without waiting on each other and
// no order is cancelled twice; a row a payment holds is skipped and, if the
// payment loses its own race (deadline passed), found by the next sweep.
// An order whose payment through a provider is pending is left to
// CancelDue: the sweeper asks the provider about it first.
func (s *Store) CancelExpired(ctx context.Context, max int) (_ []orders.Order, err error) {
	defer unavailable(&err)
	if max <= 0 {
		return nil, fmt.Errorf("pgstore: cancel expired: %w: max %d", apperr.ErrInvalidInput, max)
	}
	list, err := s.cancelWhere(ctx, `id IN (
		SELECT id FROM orders WHERE status = 'created' AND pay_deadline <= now()
			AND payment_status IS DISTINCT FROM 'pending'
		ORDER BY pay_deadline LIMIT $1 FOR UPDATE SKIP LOCKED)`, max)
	if err != nil {
		return nil, fmt.Errorf("pgstore: cancel expired: %w", err)
	}
	return list, nil
}

// cancelWhere runs the cancellation of the created orders matching where, in
// ONE transaction: status cancelled, the stock back in vouchers, the
// per-user count down in voucher_buyers, and redis_release_pending set for
// seckill vouchers (whose stock is also held in Redis): the outbox the
// release loop empties. Vouchers and buyer rows are locked in key order, as
// the workers lock them, so the two never deadlock.
func (s *Store) cancelWhere(ctx context.Context, where string, args ...any) ([]orders.Order, error) {
	return retryConflicts(ctx, func() ([]orders.Order, error) { return s.cancelWhereTx(ctx, where, args...) })
}

func (s *Store) cancelWhereTx(ctx context.Context, where string, args ...any) ([]orders.Order, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit

	rows, err := tx.Query(ctx, `
		UPDATE orders o SET status = 'cancelled', updated_at = now(),
			redis_release_pending = EXISTS (SELECT 1 FROM vouchers v WHERE v.id = o.voucher_id AND v.kind = 'seckill')
		WHERE `+where+` AND status = 'created'
		RETURNING `+orderColumns, args...)
	if err != nil {
		return nil, fmt.Errorf("update orders: %w", err)
	}
	list, err := collectOrders(rows)
	if err != nil {
		return nil, fmt.Errorf("update orders: %w", err)
	}
	if len(list) == 0 {
		return nil, nil
	}
	if err := giveBack(ctx, tx, list); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return list, nil
}

// giveBack puts the quantities of orders that held stock in PostgreSQL back:
// stock_left up, voucher_buyers down.
func giveBack(ctx context.Context, tx pgx.Tx, list []orders.Order) error {
	n := len(list)
	vids, uids, qtys := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, o := range list {
		vids[i], uids[i], qtys[i] = o.VoucherID, o.UserID, o.Quantity
	}
	_, err := tx.Exec(ctx, `
		WITH d AS (SELECT voucher_id, sum(qty) AS qty FROM unnest($1::bigint[], $2::bigint[]) AS d(voucher_id, qty) GROUP BY voucher_id),
		locked AS MATERIALIZED (SELECT v.id FROM vouchers v WHERE v.id IN (SELECT voucher_id FROM d) ORDER BY v.id FOR NO KEY UPDATE)
		UPDATE vouchers v SET stock_left = v.stock_left + d.qty
		FROM d JOIN locked ON locked.id = d.voucher_id
		WHERE v.id = d.voucher_id`, vids, qtys)
	if err != nil {
		return fmt.Errorf("stock back: %w", err)
	}
	_, err = tx.Exec(ctx, `
		WITH d AS (SELECT voucher_id, user_id, sum(qty) AS qty
			FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS d(voucher_id, user_id, qty) GROUP BY 1, 2),
		locked AS MATERIALIZED (SELECT b.voucher_id, b.user_id FROM voucher_buyers b JOIN d USING (voucher_id, user_id)
			ORDER BY b.voucher_id, b.user_id FOR NO KEY UPDATE OF b)
		UPDATE voucher_buyers b SET quantity = greatest(b.quantity - d.qty, 0)
		FROM d JOIN locked USING (voucher_id, user_id)
		WHERE b.voucher_id = d.voucher_id AND b.user_id = d.user_id`, vids, uids, qtys)
	if err != nil {
		return fmt.Errorf("buyers back: %w", err)
	}
	return nil
}

// ReleasePending returns up to max cancelled or failed orders whose stock is
// not yet back in Redis (the outbox), oldest first, skipping rows another
// transaction holds.
func (s *Store) ReleasePending(ctx context.Context, max int) (_ []orders.Order, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT `+orderColumns+` FROM orders
		WHERE redis_release_pending ORDER BY id LIMIT $1`, max)
	if err != nil {
		return nil, fmt.Errorf("pgstore: release pending: %w", err)
	}
	list, err := collectOrders(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: release pending: %w", err)
	}
	return list, nil
}

// InsertFailed records a reservation that never reached PostgreSQL (the
// reconciler found its hold orphaned) as a failed order with
// redis_release_pending set. inserted is false only when an order with that
// id already exists (a worker got there first): then nothing may be
// released. A request key that another order owns (a retry persisted under
// a new id) does not stop it: the failed row is stored without the key.
func (s *Store) InsertFailed(ctx context.Context, r seckill.Reservation) (o orders.Order, inserted bool, err error) {
	defer unavailable(&err)
	p, err := s.insertFailed(ctx, r, nil)
	if err != nil {
		return orders.Order{}, false, err
	}
	if p.Outcome != orders.OutcomeFailed {
		return orders.Order{}, false, nil
	}
	return p.Order, true, nil
}

// FenceOrder settles a reservation whose queue write failed unclearly (the
// buyer's fence, seckill.OrderFences): it stores r as a failed order with
// redis_release_pending set, as InsertFailed does, but without its request
// key, so a retry of the key is a new attempt that may persist. fenced is
// false only when an order with r's id exists (a worker persisted the
// message first). From a true answer on, a late copy of the message finds
// this row by id and fails too.
func (s *Store) FenceOrder(ctx context.Context, r seckill.Reservation) (fenced bool, err error) {
	defer unavailable(&err)
	r.RequestKey = ""
	p, err := s.insertFailed(ctx, r, nil)
	if err != nil {
		return false, err
	}
	return p.Outcome == orders.OutcomeFailed, nil
}

// OrderExists reports whether order id is in PostgreSQL, whatever its status.
func (s *Store) OrderExists(ctx context.Context, id int64) (_ bool, err error) {
	defer unavailable(&err)
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM orders WHERE id = $1)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("pgstore: order %d exists: %w", id, err)
	}
	return ok, nil
}

// RequestKnown reports whether the user's request key already made an order
// of the voucher (one index look-up): a replay of a synchronous kind's buy.
func (s *Store) RequestKnown(ctx context.Context, voucherID, userID int64, key string) (_ bool, err error) {
	defer unavailable(&err)
	var ok bool
	err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM orders
		WHERE user_id = $1 AND voucher_id = $2 AND request_key = $3)`, userID, voucherID, key).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("pgstore: request key of voucher %d: %w", voucherID, err)
	}
	return ok, nil
}

// BuySync sells a limit or common voucher in ONE transaction: the voucher row
// is locked (FOR NO KEY UPDATE) and its window and stock checked, the stock
// decremented, the buyer's row upserted with the per-user limit in the
// ON CONFLICT ... WHERE (for kind limit; the row's lock serialises one user's
// purchases, so two concurrent buys cannot both pass the check), and the
// order inserted as created with its pay deadline. A request key already used
// by this user for this voucher returns that order and changes nothing.
func (s *Store) BuySync(ctx context.Context, orderID int64, req seckill.BuyRequest, payTimeout time.Duration) (_ orders.Order, err error) {
	defer unavailable(&err)
	if err := req.Validate(); err != nil {
		return orders.Order{}, err
	}
	return retryConflicts(ctx, func() (orders.Order, error) { return s.buySync(ctx, orderID, req, payTimeout) })
}

func (s *Store) buySync(ctx context.Context, orderID int64, req seckill.BuyRequest, payTimeout time.Duration) (orders.Order, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return orders.Order{}, fmt.Errorf("pgstore: buy: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit

	var kind string
	var left, limit, price int64
	var begin, end, now time.Time
	err = tx.QueryRow(ctx, `SELECT kind, stock_left, per_user_limit, price_cents, begin_at, end_at, now()
		FROM vouchers WHERE id = $1 FOR NO KEY UPDATE`, req.VoucherID).
		Scan(&kind, &left, &limit, &price, &begin, &end, &now)
	if errors.Is(err, pgx.ErrNoRows) {
		return orders.Order{}, fmt.Errorf("pgstore: buy: voucher %d: %w", req.VoucherID, apperr.ErrNotFound)
	}
	if err != nil {
		return orders.Order{}, fmt.Errorf("pgstore: buy: voucher %d: %w", req.VoucherID, err)
	}
	if req.RequestKey != "" {
		// Under the voucher's lock, so a concurrent replay waits and sees it.
		o, err := scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders
			WHERE user_id = $1 AND voucher_id = $2 AND request_key = $3`, req.UserID, req.VoucherID, req.RequestKey))
		if err == nil {
			return o, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return orders.Order{}, fmt.Errorf("pgstore: buy: replay: %w", err)
		}
	}
	switch {
	case seckill.Kind(kind) == seckill.KindSeckill:
		return orders.Order{}, fmt.Errorf("pgstore: buy: voucher %d is sold through Redis: %w", req.VoucherID, apperr.ErrInvalidInput)
	case now.Before(begin):
		return orders.Order{}, fmt.Errorf("pgstore: buy: voucher %d: %w", req.VoucherID, seckill.ErrNotStarted)
	case !now.Before(end):
		return orders.Order{}, fmt.Errorf("pgstore: buy: voucher %d: %w", req.VoucherID, seckill.ErrEnded)
	case left < req.Quantity:
		return orders.Order{}, fmt.Errorf("pgstore: buy: voucher %d: %w", req.VoucherID, seckill.ErrSoldOut)
	}
	if _, err := tx.Exec(ctx, `UPDATE vouchers SET stock_left = stock_left - $2 WHERE id = $1`, req.VoucherID, req.Quantity); err != nil {
		return orders.Order{}, fmt.Errorf("pgstore: buy: stock: %w", err)
	}
	if seckill.Kind(kind) != seckill.KindLimit {
		limit = seckill.MaxStock // common: no per-user limit, the row still counts what each holds
	}
	tag, err := tx.Exec(ctx, `
		INSERT INTO voucher_buyers AS b (voucher_id, user_id, quantity)
		SELECT $1::bigint, $2::bigint, $3::bigint WHERE $3::bigint <= $4::bigint
		ON CONFLICT (voucher_id, user_id) DO UPDATE SET quantity = b.quantity + EXCLUDED.quantity
		WHERE b.quantity + EXCLUDED.quantity <= $4::bigint`, req.VoucherID, req.UserID, req.Quantity, limit)
	if err != nil {
		return orders.Order{}, fmt.Errorf("pgstore: buy: per-user limit: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return orders.Order{}, fmt.Errorf("pgstore: buy: voucher %d: %w", req.VoucherID, seckill.ErrLimitExceeded)
	}
	var key *string
	if req.RequestKey != "" {
		key = &req.RequestKey
	}
	o, err := scanOrder(tx.QueryRow(ctx, `
		INSERT INTO orders (id, voucher_id, user_id, quantity, amount_cents, status, request_key, reserved_at, pay_deadline)
		VALUES ($1, $2, $3, $4, $4::bigint * $5::bigint, 'created', $6, now(), now() + $7::bigint * interval '1 microsecond')
		RETURNING `+orderColumns,
		orderID, req.VoucherID, req.UserID, req.Quantity, price, key, payTimeout.Microseconds()))
	if err != nil {
		return orders.Order{}, fmt.Errorf("pgstore: buy: insert order: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return orders.Order{}, fmt.Errorf("pgstore: buy: commit: %w", err)
	}
	return o, nil
}

// VoucherOrders returns every order of a voucher, for rebuilding its Redis
// state (operators only: it reads them all).
func (s *Store) VoucherOrders(ctx context.Context, voucherID int64) (_ []orders.Order, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT `+orderColumns+` FROM orders WHERE voucher_id = $1 ORDER BY id`, voucherID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: voucher %d orders: %w", voucherID, err)
	}
	list, err := collectOrders(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: voucher %d orders: %w", voucherID, err)
	}
	return list, nil
}
