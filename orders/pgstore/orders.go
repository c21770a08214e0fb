package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/seckill/apperr"
)

// The store is the order record of package orders as it is, without an
// adapter.
var _ orders.Record = (*Store)(nil)

const orderColumns = `id, voucher_id, user_id, quantity, amount_cents, status, coalesce(request_key, ''),
	reserved_at, created_at, pay_deadline, updated_at, redis_release_pending,
	payment_id, payment_provider, payment_status, payment_amount_cents, payment_currency`

func scanOrder(row pgx.Row) (orders.Order, error) {
	var o orders.Order
	var status string
	var deadline *time.Time
	var payID, payProvider, payStatus, payCurrency *string
	var payAmount *int64
	err := row.Scan(&o.ID, &o.VoucherID, &o.UserID, &o.Quantity, &o.AmountCents, &status, &o.RequestKey,
		&o.ReservedAt, &o.CreatedAt, &deadline, &o.UpdatedAt, &o.ReleasePending,
		&payID, &payProvider, &payStatus, &payAmount, &payCurrency)
	if err != nil {
		return orders.Order{}, err
	}
	if payID != nil && payProvider != nil && payStatus != nil && payAmount != nil && payCurrency != nil {
		o.Payment = &orders.Payment{ID: *payID, OrderID: o.ID, Provider: *payProvider, Status: payment.Status(*payStatus),
			AmountCents: *payAmount, Currency: *payCurrency}
	}
	o.Status = orders.Status(status)
	o.ReservedAt, o.CreatedAt, o.UpdatedAt = o.ReservedAt.UTC(), o.CreatedAt.UTC(), o.UpdatedAt.UTC()
	if deadline != nil {
		o.PayDeadline = deadline.UTC()
	}
	return o, nil
}

func collectOrders(rows pgx.Rows) ([]orders.Order, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (orders.Order, error) { return scanOrder(row) })
}

// Order returns order id, or an error wrapping apperr.ErrNotFound.
func (s *Store) Order(ctx context.Context, id int64) (_ orders.Order, err error) {
	defer unavailable(&err)
	o, err := scanOrder(s.pool.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return orders.Order{}, fmt.Errorf("pgstore: order %d: %w", id, apperr.ErrNotFound)
	}
	if err != nil {
		return orders.Order{}, fmt.Errorf("pgstore: order %d: %w", id, err)
	}
	return o, nil
}

// OrderIDByRequestKey returns the order that the user's request key gave
// for the voucher (seckill.KeyedOrders): one index lookup. found is false
// when no order carries the key, or the key is empty.
func (s *Store) OrderIDByRequestKey(ctx context.Context, userID, voucherID int64, key string) (_ int64, found bool, err error) {
	defer unavailable(&err)
	if key == "" {
		return 0, false, nil
	}
	var id int64
	err = s.pool.QueryRow(ctx,
		`SELECT id FROM orders WHERE user_id = $1 AND voucher_id = $2 AND request_key = $3`,
		userID, voucherID, key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("pgstore: order by request key: %w", err)
	}
	return id, true, nil
}

// OrdersByUser returns up to limit of the user's orders, newest first (order
// ids are time-ordered).
func (s *Store) OrdersByUser(ctx context.Context, userID int64, limit int) (_ []orders.Order, err error) {
	defer unavailable(&err)
	if limit <= 0 {
		return nil, fmt.Errorf("pgstore: orders by user: %w: limit %d", apperr.ErrInvalidInput, limit)
	}
	rows, err := s.pool.Query(ctx,
		`SELECT `+orderColumns+` FROM orders WHERE user_id = $1 ORDER BY id DESC LIMIT $2`, userID, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: orders by user: %w", err)
	}
	list, err := collectOrders(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: orders by user: %w", err)
	}
	return list, nil
}

// ordersPageSQL is one page of a user's orders, of any status: $1 the
// user, $2 the id to seek below, $3 the most rows (orders_user_idx).
const ordersPageSQL = `SELECT ` + orderColumns + ` FROM orders
	WHERE user_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3`

// ordersPageStatusSQL is one page of a user's orders of status $4: the same
// seek on orders_user_idx, the status a filter on the rows it reads. A query
// of its own rather than an OR in one: a generic plan of "$4 = ” OR ..."
// would be planned for both cases at once.
const ordersPageStatusSQL = `SELECT ` + orderColumns + ` FROM orders
	WHERE user_id = $1 AND id < $2 AND status = $4 ORDER BY id DESC LIMIT $3`

// OrdersPage returns one page of the user's orders, newest first: a seek
// on orders_user_idx (user_id, id DESC) from p.Before, never an OFFSET, so
// the thousandth page costs what the first does.
func (s *Store) OrdersPage(ctx context.Context, userID int64, p orders.Page) (_ []orders.Order, err error) {
	defer unavailable(&err)
	if p.Limit <= 0 {
		return nil, fmt.Errorf("pgstore: orders page: %w: limit %d", apperr.ErrInvalidInput, p.Limit)
	}
	before := p.Before
	if before <= 0 {
		before = math.MaxInt64
	}
	query, args := ordersPageSQL, []any{userID, before, p.Limit}
	if p.Status != "" {
		query, args = ordersPageStatusSQL, append(args, string(p.Status))
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: orders page: %w", err)
	}
	list, err := collectOrders(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: orders page: %w", err)
	}
	return list, nil
}

// Stats returns the stock and the orders per status of voucher id, or an
// error wrapping apperr.ErrNotFound.
func (s *Store) Stats(ctx context.Context, voucherID int64) (_ orders.Stats, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `
		SELECT v.stock_total, v.stock_left, o.status, count(o.id), coalesce(sum(o.quantity), 0)
		FROM vouchers v LEFT JOIN orders o ON o.voucher_id = v.id
		WHERE v.id = $1
		GROUP BY v.stock_total, v.stock_left, o.status`, voucherID)
	if err != nil {
		return orders.Stats{}, fmt.Errorf("pgstore: stats %d: %w", voucherID, err)
	}
	defer rows.Close()
	st := orders.Stats{VoucherID: voucherID, Orders: map[orders.Status]int64{}, Quantity: map[orders.Status]int64{}}
	for _, status := range []orders.Status{orders.StatusCreated, orders.StatusPaid, orders.StatusCancelled, orders.StatusFailed, orders.StatusRefunded} {
		st.Orders[status], st.Quantity[status] = 0, 0
	}
	found := false
	for rows.Next() {
		var status *string
		var n, qty int64
		if err := rows.Scan(&st.StockTotal, &st.StockLeft, &status, &n, &qty); err != nil {
			return orders.Stats{}, fmt.Errorf("pgstore: stats %d: %w", voucherID, err)
		}
		found = true
		if status != nil {
			st.Orders[orders.Status(*status)] = n
			st.Quantity[orders.Status(*status)] = qty
		}
	}
	if err := rows.Err(); err != nil {
		return orders.Stats{}, fmt.Errorf("pgstore: stats %d: %w", voucherID, err)
	}
	if !found {
		return orders.Stats{}, fmt.Errorf("pgstore: stats: voucher %d: %w", voucherID, apperr.ErrNotFound)
	}
	return st, nil
}

// ClearReleasePending records that the stock of these cancelled or failed
// orders is back in Redis. Unknown ids are ignored.
func (s *Store) ClearReleasePending(ctx context.Context, orderIDs []int64) (err error) {
	defer unavailable(&err)
	if len(orderIDs) == 0 {
		return nil
	}
	_, err = s.pool.Exec(ctx, `
		UPDATE orders SET redis_release_pending = false, updated_at = now()
		WHERE id = ANY($1) AND redis_release_pending`, orderIDs)
	if err != nil {
		return fmt.Errorf("pgstore: clear release pending: %w", err)
	}
	return nil
}
