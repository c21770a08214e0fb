package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/seckill/orders/salereport"
	"github.com/flashsale/seckill/seckill/apperr"
)

// The sale report's figures are added to, never replaced: every process
// of the fleet writes its own counts of the same second. A gauge (the
// line's length) keeps the highest any process saw.
const (
	addSaleSums = `
		INSERT INTO sale_counts (voucher_id, second, name, n)
		SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::bigint[])
		ON CONFLICT (voucher_id, second, name) DO UPDATE SET n = sale_counts.n + EXCLUDED.n`
	addSaleGauges = `
		INSERT INTO sale_counts (voucher_id, second, name, n)
		SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::bigint[])
		ON CONFLICT (voucher_id, second, name) DO UPDATE SET n = GREATEST(sale_counts.n, EXCLUDED.n)`
)

// AddSaleCounts implements salereport.Store: both lists in one transaction
// (the batch is one implicit transaction), in the order given.
func (s *Store) AddSaleCounts(ctx context.Context, sums, gauges []salereport.Count) (err error) {
	defer unavailable(&err)
	_, err = retryConflicts(ctx, func() (struct{}, error) {
		b := &pgx.Batch{}
		for _, q := range []struct {
			sql  string
			list []salereport.Count
		}{{addSaleSums, sums}, {addSaleGauges, gauges}} {
			if len(q.list) == 0 {
				continue
			}
			ids, secs, names, ns := make([]int64, len(q.list)), make([]time.Time, len(q.list)), make([]string, len(q.list)), make([]int64, len(q.list))
			for i, c := range q.list {
				ids[i], secs[i], names[i], ns[i] = c.VoucherID, c.Second, c.Name, c.N
			}
			b.Queue(q.sql, ids, secs, names, ns)
		}
		return struct{}{}, s.pool.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("pgstore: add sale counts: %w", err)
	}
	return nil
}

// SaleCounts implements salereport.Store: both reads in one read-only
// transaction at repeatable read, so the sums and the counts are of the
// same moment while the fleet keeps adding to them. The counts come in the
// primary key's order and are read from the connection as each takes them.
func (s *Store) SaleCounts(ctx context.Context, voucherID int64, sums func([]salereport.Figure) error, each func(salereport.Count) error) (err error) {
	defer unavailable(&err)
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("pgstore: sale counts of %d: %w", voucherID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only: nothing to keep
	rows, err := tx.Query(ctx, `
		SELECT name, sum(n)::bigint, min(second), max(second), max(width) FROM sale_counts WHERE voucher_id = $1 GROUP BY name`, voucherID)
	if err != nil {
		return fmt.Errorf("pgstore: sale counts of %d: %w", voucherID, err)
	}
	figs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (f salereport.Figure, err error) {
		err = r.Scan(&f.Name, &f.N, &f.First, &f.Last, &f.Width)
		return f, err
	})
	if err != nil {
		return fmt.Errorf("pgstore: sale counts of %d: %w", voucherID, err)
	}
	if err := sums(figs); err != nil {
		return err
	}
	rows, err = tx.Query(ctx, `
		SELECT second, name, n, width FROM sale_counts WHERE voucher_id = $1 ORDER BY second, name`, voucherID)
	if err != nil {
		return fmt.Errorf("pgstore: sale counts of %d: %w", voucherID, err)
	}
	defer rows.Close()
	c := salereport.Count{VoucherID: voucherID}
	for rows.Next() {
		if err := rows.Scan(&c.Second, &c.Name, &c.N, &c.Width); err != nil {
			return fmt.Errorf("pgstore: sale counts of %d: %w", voucherID, err)
		}
		if err := each(c); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: sale counts of %d: %w", voucherID, err)
	}
	return nil
}

// The sale report's retention (salereport.Retention). A bucket is
// date_bin's, from the epoch. The counts at a bucket's very start are not
// deleted but widened in place, first: the rolled-up sums land on them (ON
// CONFLICT), as on a bucket rolled up by an earlier pass, and a statement
// may not both delete a row and upsert into it.
const (
	saleCountsToRollUp = `
		SELECT v.id FROM vouchers v
		WHERE v.end_at < $1 AND EXISTS (
			SELECT 1 FROM sale_counts c WHERE c.voucher_id = v.id AND c.width = 1 AND c.second < $1)
		ORDER BY v.id LIMIT $2`
	rollUpSaleCounts = `
		WITH fine AS (
			DELETE FROM sale_counts WHERE (voucher_id, second, name) IN (
				SELECT voucher_id, second, name FROM sale_counts
				WHERE voucher_id = $1 AND width = 1 AND second < $2
				  AND second <> date_bin($3 * interval '1 second', second, timestamptz 'epoch')
				ORDER BY second LIMIT $5)
			RETURNING second, name, n),
		rolled AS (
			INSERT INTO sale_counts AS c (voucher_id, second, name, n, width)
			SELECT $1, date_bin($3 * interval '1 second', second, timestamptz 'epoch') AS bucket, name,
			       CASE WHEN name = ANY($4) THEN max(n) ELSE sum(n) END, $3
			FROM fine GROUP BY bucket, name ORDER BY bucket, name
			ON CONFLICT (voucher_id, second, name) DO UPDATE SET
				n = CASE WHEN c.name = ANY($4) THEN GREATEST(c.n, EXCLUDED.n) ELSE c.n + EXCLUDED.n END,
				width = GREATEST(c.width, EXCLUDED.width))
		SELECT count(*) FROM fine`
	widenSaleCounts = `
		UPDATE sale_counts SET width = $3
		WHERE voucher_id = $1 AND width = 1 AND second < $2
		  AND second = date_bin($3 * interval '1 second', second, timestamptz 'epoch')`
)

// SaleCountsToRollUp implements salereport.Store.
func (s *Store) SaleCountsToRollUp(ctx context.Context, before time.Time, limit int) (_ []int64, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, saleCountsToRollUp, before, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: sale counts to roll up: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("pgstore: sale counts to roll up: %w", err)
	}
	return ids, nil
}

// RollUpSaleCounts implements salereport.Store in one transaction (the
// batch is one implicit transaction): the counts at a bucket's start are
// widened to it, then the oldest limit other per-second counts of the
// voucher from before before are summed into their buckets (a gauge keeps
// the highest).
func (s *Store) RollUpSaleCounts(ctx context.Context, voucherID int64, before time.Time, width int64, gauges []string, limit int) (_ int64, err error) {
	defer unavailable(&err)
	n, err := retryConflicts(ctx, func() (int64, error) {
		b := &pgx.Batch{}
		b.Queue(widenSaleCounts, voucherID, before, width)
		b.Queue(rollUpSaleCounts, voucherID, before, width, gauges, limit)
		res := s.pool.SendBatch(ctx, b)
		widened, err := res.Exec()
		if err != nil {
			_ = res.Close()
			return 0, err
		}
		var rolled int64
		if err := res.QueryRow().Scan(&rolled); err != nil {
			_ = res.Close()
			return 0, err
		}
		return widened.RowsAffected() + rolled, res.Close()
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: roll up sale counts of %d: %w", voucherID, err)
	}
	return n, nil
}

// SaleOrders implements salereport.Store in one read of the voucher's
// orders (and one more, ordered, for the sell-out).
func (s *Store) SaleOrders(ctx context.Context, voucherID int64) (_ salereport.OrderFigures, err error) {
	defer unavailable(&err)
	var f salereport.OrderFigures
	err = s.pool.QueryRow(ctx, `
		SELECT v.stock_total,
		       count(o.id) FILTER (WHERE o.status <> 'failed'),
		       count(o.id) FILTER (WHERE o.status = 'paid'),
		       count(o.id) FILTER (WHERE o.status = 'refunded'),
		       (SELECT count(*) FILTER (WHERE p.status IN ('succeeded', 'refunded')) FROM payments p
		            JOIN orders po ON po.id = p.order_id WHERE po.voucher_id = v.id),
		       (SELECT count(*) FILTER (WHERE p.late) FROM payments p
		            JOIN orders po ON po.id = p.order_id WHERE po.voucher_id = v.id),
		       coalesce(sum(o.quantity), 0),
		       (SELECT c.reserved_at FROM (
		            SELECT reserved_at, sum(quantity) OVER (ORDER BY reserved_at, id) AS held
		            FROM orders WHERE voucher_id = v.id AND status <> 'failed') c
		        WHERE c.held >= v.stock_total ORDER BY c.held LIMIT 1)
		FROM vouchers v LEFT JOIN orders o ON o.voucher_id = v.id
		WHERE v.id = $1
		GROUP BY v.id`, voucherID).Scan(&f.StockTotal, &f.Bought, &f.Paid, &f.Refunds, &f.Payments, &f.LatePayments, &f.UnitsHeld, &f.SoldOutAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("pgstore: voucher %d: %w", voucherID, apperr.ErrNotFound)
	}
	if err != nil {
		return f, fmt.Errorf("pgstore: sale orders of %d: %w", voucherID, err)
	}
	return f, nil
}

// EachSaleOrder implements salereport.Store. The rows are read from the
// connection as fn takes them: a million orders never sit in memory. A
// paid order's paid_at is its last update, since nothing changes a paid
// order afterwards.
func (s *Store) EachSaleOrder(ctx context.Context, voucherID int64, fn func(salereport.OrderRow) error) (err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `
		SELECT id, user_id, quantity, status, reserved_at, CASE WHEN status = 'paid' THEN updated_at END
		FROM orders WHERE voucher_id = $1 ORDER BY id`, voucherID)
	if err != nil {
		return fmt.Errorf("pgstore: orders of %d: %w", voucherID, err)
	}
	defer rows.Close()
	var o salereport.OrderRow
	for rows.Next() {
		if err := rows.Scan(&o.ID, &o.UserID, &o.Quantity, &o.Status, &o.ReservedAt, &o.PaidAt); err != nil {
			return fmt.Errorf("pgstore: orders of %d: %w", voucherID, err)
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: orders of %d: %w", voucherID, err)
	}
	return nil
}
