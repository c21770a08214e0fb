package pgstore

// Persisting the workers' batches of reservations: one transaction a batch
// that inserts the orders, takes the stock and counts the buyers, and the
// fallback that finds the one reservation that can never be stored.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashsale/seckill/seckill/apperr"
)

// permanentError says a transaction was rolled back because something in it
// can never succeed. reason is nil when the batch held several reservations
// and the culprit is not known yet.
type permanentError struct {
	reason error
}

func (e *permanentError) Error() string {
	if e.reason == nil {
		return "pgstore: a reservation of the batch can never be persisted"
	}
	return e.reason.Error()
}

// PersistBatch turns reservations into orders in ONE transaction: the order
// rows (ON CONFLICT DO NOTHING, so a redelivered message creates nothing),
// the stock decrement per voucher (only if stock_left >= the quantity) and
// the per-user count (only within the limit), all counted for new orders
// only. amount = price * quantity; pay_deadline = now() + payTimeout.
//
// When something in the batch can never succeed (voucher unknown, stock or
// limit exhausted in PostgreSQL, request key used by another order), the
// transaction is rolled back and the batch redone one reservation per
// transaction, so only the bad ones fail; each of those is stored as a failed
// order with redis_release_pending set, so its outcome is durable.
//
// Any other error (connection lost, serialization failure, deadlock, ctx)
// is returned: nothing of the failed transaction is kept, and the caller
// retries the whole batch, which is safe because of the above.
func (s *Store) PersistBatch(ctx context.Context, rs []seckill.Reservation, payTimeout time.Duration) (_ orders.BatchResult, err error) {
	defer unavailable(&err)
	if payTimeout <= 0 {
		return orders.BatchResult{}, fmt.Errorf("pgstore: persist: %w: pay timeout %s", apperr.ErrInvalidInput, payTimeout)
	}
	results := make([]orders.Persisted, len(rs))
	first := make(map[int64]int, len(rs))
	todo := make([]int, 0, len(rs))
	var copies [][2]int // {index, index of the first copy}
	for i, r := range rs {
		// A reservation the gateway would never send cannot be stored (the
		// table's checks would refuse it): it is failed unstored.
		if err := r.Validate(); err != nil {
			results[i] = unstored(r, err)
			continue
		}
		if j, ok := first[r.OrderID]; ok {
			copies = append(copies, [2]int{i, j})
			continue
		}
		first[r.OrderID] = i
		todo = append(todo, i)
	}
	if len(todo) > 0 {
		batch := make([]seckill.Reservation, len(todo))
		for k, i := range todo {
			batch[k] = rs[i]
		}
		out, err := s.persist(ctx, batch, payTimeout)
		if _, ok := errors.AsType[*permanentError](err); ok {
			out = make([]orders.Persisted, len(batch))
			for k, r := range batch {
				if out[k], err = s.persistOne(ctx, r, payTimeout); err != nil {
					return orders.BatchResult{}, err
				}
			}
		} else if err != nil {
			return orders.BatchResult{}, err
		}
		for k, i := range todo {
			results[i] = out[k]
		}
	}
	for _, c := range copies {
		p := results[c[1]]
		results[c[0]] = orders.Persisted{Reservation: rs[c[0]], Outcome: orders.OutcomeDuplicate, Order: p.Order}
	}
	return orders.BatchResult{Results: results}, nil
}

func unstored(r seckill.Reservation, reason error) orders.Persisted {
	o := orders.OrderFromReservation(r, 0)
	o.Status = orders.StatusFailed
	o.ReleasePending = true
	return orders.Persisted{Reservation: r, Outcome: orders.OutcomeFailed, Order: o, Reason: reason}
}

const insertOrdersSQL = `
INSERT INTO orders (id, voucher_id, user_id, quantity, amount_cents, status, request_key, reserved_at, pay_deadline)
SELECT r.id, r.voucher_id, r.user_id, r.quantity, r.quantity * v.price_cents, 'created',
	NULLIF(r.request_key, ''), r.reserved_at, now() + $7 * interval '1 microsecond'
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::timestamptz[])
	AS r(id, voucher_id, user_id, quantity, request_key, reserved_at)
JOIN vouchers v ON v.id = r.voucher_id
ORDER BY r.id
ON CONFLICT DO NOTHING
RETURNING ` + orderColumns

// The stock rows are locked in id order first, so two batches touching the
// same vouchers queue instead of deadlocking; the decrement happens only
// where enough is left (re-checked on the newest row version after a wait).
const decrementStockSQL = `
WITH d AS (SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS d(id, qty)),
locked AS MATERIALIZED (SELECT v.id FROM vouchers v WHERE v.id = ANY($1) ORDER BY v.id FOR NO KEY UPDATE)
UPDATE vouchers v SET stock_left = v.stock_left - d.qty
FROM d JOIN locked ON locked.id = d.id
WHERE v.id = d.id AND v.stock_left >= d.qty`

// A new buyer row only within the limit; an existing one grows only while it
// stays within the limit. A refused row is simply not counted.
const addBuyersSQL = `
INSERT INTO voucher_buyers AS b (voucher_id, user_id, quantity)
SELECT d.voucher_id, d.user_id, d.qty
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS d(voucher_id, user_id, qty)
JOIN vouchers v ON v.id = d.voucher_id
WHERE d.qty <= v.per_user_limit
ORDER BY d.voucher_id, d.user_id
ON CONFLICT (voucher_id, user_id) DO UPDATE SET quantity = b.quantity + EXCLUDED.quantity
WHERE b.quantity + EXCLUDED.quantity <= (SELECT per_user_limit FROM vouchers WHERE id = b.voucher_id)`

// persist runs one transaction over distinct, valid reservations. It returns
// a *permanentError if any of them can never succeed (with the reason when
// there is only one), or a transient error.
func (s *Store) persist(ctx context.Context, batch []seckill.Reservation, payTimeout time.Duration) ([]orders.Persisted, error) {
	return retryConflicts(ctx, func() ([]orders.Persisted, error) { return s.persistTx(ctx, batch, payTimeout) })
}

func (s *Store) persistTx(ctx context.Context, batch []seckill.Reservation, payTimeout time.Duration) (_ []orders.Persisted, err error) {
	n := len(batch)
	ids := make([]int64, n)
	vids := make([]int64, n)
	uids := make([]int64, n)
	qtys := make([]int64, n)
	keys := make([]string, n)
	ats := make([]time.Time, n)
	for i, r := range batch {
		ids[i], vids[i], uids[i], qtys[i], keys[i], ats[i] = r.OrderID, r.VoucherID, r.UserID, r.Quantity, r.RequestKey, r.ReservedAt
	}

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: persist: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit
	defer func() { err = classify(err, n) }()

	rows, err := tx.Query(ctx, insertOrdersSQL, ids, vids, uids, qtys, keys, ats, payTimeout.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("pgstore: persist: insert orders: %w", err)
	}
	inserted, err := collectOrders(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: persist: insert orders: %w", err)
	}
	created := make(map[int64]orders.Order, len(inserted))
	for _, o := range inserted {
		created[o.ID] = o
	}

	existing := map[int64]orders.Order{}
	if len(created) < n {
		var missing []int64
		for _, id := range ids {
			if _, ok := created[id]; !ok {
				missing = append(missing, id)
			}
		}
		rows, err := tx.Query(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = ANY($1)`, missing)
		if err != nil {
			return nil, fmt.Errorf("pgstore: persist: read duplicates: %w", err)
		}
		dups, err := collectOrders(rows)
		if err != nil {
			return nil, fmt.Errorf("pgstore: persist: read duplicates: %w", err)
		}
		for _, o := range dups {
			existing[o.ID] = o
		}
		if len(created)+len(existing) < n {
			// Neither inserted nor there: the voucher is unknown, or the
			// request key belongs to another order.
			if n > 1 {
				return nil, &permanentError{}
			}
			return nil, &permanentError{reason: s.whyNotInserted(ctx, tx, batch[0])}
		}
	}

	if len(created) > 0 {
		perVoucher := map[int64]int64{}
		type buyerKey struct{ voucher, user int64 }
		perBuyer := map[buyerKey]int64{}
		for _, r := range batch {
			if _, ok := created[r.OrderID]; ok {
				perVoucher[r.VoucherID] += r.Quantity
				perBuyer[buyerKey{r.VoucherID, r.UserID}] += r.Quantity
			}
		}
		vIDs := sortedKeys(perVoucher, func(a, b int64) int { return cmp.Compare(a, b) })
		vQty := make([]int64, len(vIDs))
		for i, id := range vIDs {
			vQty[i] = perVoucher[id]
		}
		tag, err := tx.Exec(ctx, decrementStockSQL, vIDs, vQty)
		if err != nil {
			return nil, fmt.Errorf("pgstore: persist: decrement stock: %w", err)
		}
		if tag.RowsAffected() < int64(len(vIDs)) {
			return nil, &permanentError{reason: fmt.Errorf("%w: not enough stock left in PostgreSQL", seckill.ErrSoldOut)}
		}

		bKeys := sortedKeys(perBuyer, func(a, b buyerKey) int {
			return cmp.Or(cmp.Compare(a.voucher, b.voucher), cmp.Compare(a.user, b.user))
		})
		bv, bu, bq := make([]int64, len(bKeys)), make([]int64, len(bKeys)), make([]int64, len(bKeys))
		for i, k := range bKeys {
			bv[i], bu[i], bq[i] = k.voucher, k.user, perBuyer[k]
		}
		tag, err = tx.Exec(ctx, addBuyersSQL, bv, bu, bq)
		if err != nil {
			return nil, fmt.Errorf("pgstore: persist: per-user limit: %w", err)
		}
		if tag.RowsAffected() < int64(len(bKeys)) {
			return nil, &permanentError{reason: fmt.Errorf("%w: per-user limit reached in PostgreSQL", seckill.ErrLimitExceeded)}
		}
	}

	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: persist: commit: %w", err)
	}
	out := make([]orders.Persisted, n)
	for i, r := range batch {
		if o, ok := created[r.OrderID]; ok {
			out[i] = orders.Persisted{Reservation: r, Outcome: orders.OutcomeCreated, Order: o}
		} else {
			out[i] = orders.Persisted{Reservation: r, Outcome: orders.OutcomeDuplicate, Order: existing[r.OrderID]}
		}
	}
	return out, nil
}

// whyNotInserted names the reason a single reservation's order row was
// neither inserted nor found by id.
func (s *Store) whyNotInserted(ctx context.Context, tx pgx.Tx, r seckill.Reservation) error {
	var voucherExists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM vouchers WHERE id = $1)`, r.VoucherID).Scan(&voucherExists); err != nil {
		return fmt.Errorf("%w: order %d was not inserted", apperr.ErrConflict, r.OrderID)
	}
	if !voucherExists {
		return fmt.Errorf("%w: voucher %d is not in PostgreSQL", apperr.ErrNotFound, r.VoucherID)
	}
	return fmt.Errorf("%w: request key %q is used by another order", apperr.ErrConflict, r.RequestKey)
}

// classify turns a data or constraint error of the database into a
// permanent error (the batch is redone one by one, where it fails only its
// own reservation). Everything else stays transient.
func classify(err error, n int) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*permanentError](err); ok {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code[:2] == "22" || pgErr.Code[:2] == "23") {
		if n > 1 {
			return &permanentError{}
		}
		return &permanentError{reason: fmt.Errorf("%w: %w", apperr.ErrInvalidInput, err)}
	}
	return err
}

// persistOne persists a single reservation in its own transaction, storing
// it as a failed order if it can never succeed.
func (s *Store) persistOne(ctx context.Context, r seckill.Reservation, payTimeout time.Duration) (orders.Persisted, error) {
	out, err := s.persist(ctx, []seckill.Reservation{r}, payTimeout)
	perm, ok := errors.AsType[*permanentError](err)
	if !ok {
		if err != nil {
			return orders.Persisted{}, err
		}
		return out[0], nil
	}
	return s.insertFailed(ctx, r, perm.reason)
}

const insertFailedSQL = `
INSERT INTO orders (id, voucher_id, user_id, quantity, amount_cents, status, request_key, reserved_at, redis_release_pending)
VALUES ($1, $2, $3, $4, $4 * coalesce((SELECT price_cents FROM vouchers WHERE id = $2), 0), 'failed', $5, $6, true)
ON CONFLICT DO NOTHING
RETURNING ` + orderColumns

// insertFailed stores r as a failed order so the outcome survives a crash
// (the release in Redis is then retried from redis_release_pending). If the
// order appeared meanwhile (another worker got the same message), that row
// wins and the result is a duplicate.
func (s *Store) insertFailed(ctx context.Context, r seckill.Reservation, reason error) (orders.Persisted, error) {
	key := &r.RequestKey
	if r.RequestKey == "" || errors.Is(reason, apperr.ErrConflict) {
		// The key belongs to another order; the failed row must not take it.
		key = nil
	}
	for attempt := 0; attempt < 2; attempt++ {
		o, err := scanOrder(s.pool.QueryRow(ctx, insertFailedSQL, r.OrderID, r.VoucherID, r.UserID, r.Quantity, key, r.ReservedAt))
		if err == nil {
			return orders.Persisted{Reservation: r, Outcome: orders.OutcomeFailed, Order: o, Reason: reason}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return orders.Persisted{}, fmt.Errorf("pgstore: persist: insert failed order %d: %w", r.OrderID, err)
		}
		o, err = s.Order(ctx, r.OrderID)
		if err == nil {
			return orders.Persisted{Reservation: r, Outcome: orders.OutcomeDuplicate, Order: o}, nil
		}
		if !errors.Is(err, apperr.ErrNotFound) {
			return orders.Persisted{}, err
		}
		// The request key was taken in the meantime: store without it.
		key = nil
	}
	return orders.Persisted{}, fmt.Errorf("pgstore: persist: order %d: neither stored nor found", r.OrderID)
}

func sortedKeys[K comparable, V any](m map[K]V, compare func(a, b K) int) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compare)
	return keys
}
