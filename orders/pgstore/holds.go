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
	"github.com/flashsale/seckill/seckill/draw"
)

// The store is the hold record of package orders as it is.
var _ orders.HoldRecord = (*Store)(nil)

const holdColumns = `voucher_id, user_id, payment_id, provider, amount_cents, currency, client_secret, state, coalesce(order_id, 0)`

// holdClaimStale is how old a claim is before the next caller takes it
// over (its asker died between the claim and the provider's answer).
const holdClaimStale = `interval '1 minute'`

func scanHold(row pgx.Row) (orders.Hold, error) {
	var h orders.Hold
	var state string
	if err := row.Scan(&h.VoucherID, &h.UserID, &h.PaymentID, &h.Provider, &h.AmountCents, &h.Currency,
		&h.ClientSecret, &state, &h.OrderID); err != nil {
		return orders.Hold{}, err
	}
	h.State = orders.HoldState(state)
	return h, nil
}

// InsertHold implements orders.HoldRecord.
func (s *Store) InsertHold(ctx context.Context, h orders.Hold) (_ orders.Hold, created bool, err error) {
	defer unavailable(&err)
	got, err := scanHold(s.pool.QueryRow(ctx, `INSERT INTO draw_holds
		(voucher_id, user_id, payment_id, provider, amount_cents, currency, client_secret)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (voucher_id, user_id) DO NOTHING RETURNING `+holdColumns,
		h.VoucherID, h.UserID, h.PaymentID, h.Provider, h.AmountCents, h.Currency, h.ClientSecret))
	if err == nil {
		return got, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return orders.Hold{}, false, fmt.Errorf("pgstore: insert hold of user %d: %w", h.UserID, err)
	}
	got, err = s.HoldOf(ctx, h.VoucherID, h.UserID)
	return got, false, err
}

// HoldOf implements orders.HoldRecord.
func (s *Store) HoldOf(ctx context.Context, voucherID, userID int64) (_ orders.Hold, err error) {
	defer unavailable(&err)
	h, err := scanHold(s.pool.QueryRow(ctx, `SELECT `+holdColumns+` FROM draw_holds
		WHERE voucher_id = $1 AND user_id = $2`, voucherID, userID))
	if errors.Is(err, pgx.ErrNoRows) {
		return orders.Hold{}, fmt.Errorf("pgstore: hold of user %d: %w", userID, apperr.ErrNotFound)
	}
	if err != nil {
		return orders.Hold{}, fmt.Errorf("pgstore: hold of user %d: %w", userID, err)
	}
	return h, nil
}

// ClaimCapture implements orders.HoldRecord: only for a created order, and
// a stale claim only by the order it was made for (the capture's key is
// the hold's).
func (s *Store) ClaimCapture(ctx context.Context, o orders.Order) (_ orders.Hold, ok bool, err error) {
	defer unavailable(&err)
	h, err := scanHold(s.pool.QueryRow(ctx, `UPDATE draw_holds SET state = 'capturing', order_id = $3, claimed_at = now()
		WHERE voucher_id = $1 AND user_id = $2
		  AND (state = 'held' OR (state = 'capturing' AND order_id = $3 AND claimed_at < now() - `+holdClaimStale+`))
		  AND EXISTS (SELECT 1 FROM orders WHERE id = $3 AND user_id = $2 AND voucher_id = $1 AND status = 'created')
		RETURNING `+holdColumns, o.VoucherID, o.UserID, o.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return orders.Hold{}, false, nil
	}
	if err != nil {
		return orders.Hold{}, false, fmt.Errorf("pgstore: claim capture of order %d: %w", o.ID, err)
	}
	return h, true, nil
}

// Captured implements orders.HoldRecord in one transaction: the hold, its
// payment row and the order.
func (s *Store) Captured(ctx context.Context, h orders.Hold, o orders.Order) (_ orders.Order, err error) {
	defer unavailable(&err)
	return retryConflicts(ctx, func() (orders.Order, error) {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return orders.Order{}, fmt.Errorf("pgstore: captured: begin: %w", err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit
		tag, err := tx.Exec(ctx, `UPDATE draw_holds SET state = 'captured', settled_at = now()
			WHERE payment_id = $1 AND state = 'capturing' AND order_id = $2`, h.PaymentID, o.ID)
		if err != nil {
			return orders.Order{}, fmt.Errorf("pgstore: captured %s: %w", h.PaymentID, err)
		}
		cur, err := scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1 FOR UPDATE`, o.ID))
		if err != nil {
			return orders.Order{}, fmt.Errorf("pgstore: captured %s: order %d: %w", h.PaymentID, o.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return cur, nil // recorded before
		}
		// Money for an order no longer waiting for it is owed back, as a
		// late payment is.
		late := cur.Status != orders.StatusCreated
		if _, err := tx.Exec(ctx, `INSERT INTO payments (id, order_id, provider, status, amount_cents, currency, late, refund_owed)
			VALUES ($1, $2, $3, 'succeeded', $4, $5, $6, $6)`, h.PaymentID, o.ID, h.Provider, cur.AmountCents, h.Currency, late); err != nil {
			return orders.Order{}, fmt.Errorf("pgstore: captured %s: payment: %w", h.PaymentID, err)
		}
		if !late {
			cur, err = scanOrder(tx.QueryRow(ctx, `UPDATE orders SET status = 'paid', payment_id = $2, payment_provider = $3,
				payment_status = 'succeeded', payment_amount_cents = $4, payment_currency = $5, updated_at = now()
				WHERE id = $1 RETURNING `+orderColumns, o.ID, h.PaymentID, h.Provider, cur.AmountCents, h.Currency))
			if err != nil {
				return orders.Order{}, fmt.Errorf("pgstore: captured %s: order %d: %w", h.PaymentID, o.ID, err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return orders.Order{}, fmt.Errorf("pgstore: captured %s: commit: %w", h.PaymentID, err)
		}
		return cur, nil
	})
}

// releasable is a hold a release may claim: held, a stale release, or a
// stale capture whose order no longer waits for money (its capture failed,
// a card never confirmed say, and the order was paid another way or
// cancelled).
const releasable = `(state = 'held' OR (state = 'releasing' AND claimed_at < now() - ` + holdClaimStale + `)
	OR (state = 'capturing' AND claimed_at < now() - ` + holdClaimStale + `
		AND NOT EXISTS (SELECT 1 FROM orders c WHERE c.id = draw_holds.order_id AND c.status = 'created')))`

// ClaimRelease implements orders.HoldRecord; SKIP LOCKED lets concurrent
// sweepers share the work instead of queueing behind each other.
func (s *Store) ClaimRelease(ctx context.Context, voucherID int64, keep []int64, max int) (_ []orders.Hold, err error) {
	defer unavailable(&err)
	if keep == nil {
		keep = []int64{}
	}
	rows, err := s.pool.Query(ctx, `UPDATE draw_holds SET state = 'releasing', claimed_at = now()
		WHERE (voucher_id, user_id) IN (SELECT voucher_id, user_id FROM draw_holds
			WHERE voucher_id = $1 AND NOT (user_id = ANY($2))
			  AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.voucher_id = $1 AND o.user_id = draw_holds.user_id
				AND o.status = 'created')
			  AND `+releasable+`
			ORDER BY user_id LIMIT $3 FOR UPDATE SKIP LOCKED)
		  AND `+releasable+`
		RETURNING `+holdColumns, voucherID, keep, max)
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim release of voucher %d: %w", voucherID, err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (orders.Hold, error) { return scanHold(row) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim release of voucher %d: %w", voucherID, err)
	}
	return list, nil
}

// Released implements orders.HoldRecord.
func (s *Store) Released(ctx context.Context, h orders.Hold) (err error) {
	defer unavailable(&err)
	if _, err := s.pool.Exec(ctx, `UPDATE draw_holds SET state = 'released', settled_at = now()
		WHERE payment_id = $1 AND state = 'releasing'`, h.PaymentID); err != nil {
		return fmt.Errorf("pgstore: released %s: %w", h.PaymentID, err)
	}
	return nil
}

// HoldDraws implements orders.HoldRecord.
func (s *Store) HoldDraws(ctx context.Context) (_ []orders.HoldDraw, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT v.id, v.end_at, v.room_draw_pass_seconds, coalesce(d.void_reason, ''),
			coalesce(d.signature, ''), coalesce(d.cutoff, ''), d.ended_at
		FROM vouchers v LEFT JOIN draws d ON d.voucher_id = v.id
		WHERE v.id IN (SELECT DISTINCT voucher_id FROM draw_holds WHERE state IN ('held', 'capturing', 'releasing'))`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: hold draws: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (orders.HoldDraw, error) {
		var d orders.HoldDraw
		var pass int64
		var drawn *time.Time
		if err := row.Scan(&d.VoucherID, &d.EndAt, &pass, &d.Void, &d.Signature, &d.Cutoff, &drawn); err != nil {
			return d, err
		}
		d.DrawPass = (&seckill.WaitingRoom{Mode: seckill.RoomDraw, DrawPassSeconds: pass}).DrawPass()
		if drawn != nil {
			d.DrawnAt = drawn.UTC()
		}
		return d, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: hold draws: %w", err)
	}
	return list, nil
}

// HoldEntries implements orders.HoldRecord.
func (s *Store) HoldEntries(ctx context.Context, voucherID int64) (_ []draw.Entry, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT e.entry_id, e.user_id FROM draw_entries e
		JOIN draw_holds h ON h.voucher_id = e.voucher_id AND h.user_id = e.user_id
		WHERE e.voucher_id = $1 AND h.state IN ('held', 'capturing', 'releasing')`, voucherID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: hold entries of voucher %d: %w", voucherID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (draw.Entry, error) {
		var e draw.Entry
		return e, row.Scan(&e.EntryID, &e.UserID)
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: hold entries of voucher %d: %w", voucherID, err)
	}
	return out, nil
}

// HeldOrders implements orders.HoldRecord.
func (s *Store) HeldOrders(ctx context.Context, max int) (_ []orders.Order, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT `+orderColumns+` FROM orders WHERE status = 'created' AND id IN (
		SELECT o.id FROM draw_holds h JOIN orders o ON o.voucher_id = h.voucher_id AND o.user_id = h.user_id
		WHERE o.status = 'created' AND (h.state = 'held'
			OR (h.state = 'capturing' AND h.order_id = o.id AND h.claimed_at < now() - `+holdClaimStale+`))
		ORDER BY o.id LIMIT $1)`, max)
	if err != nil {
		return nil, fmt.Errorf("pgstore: held orders: %w", err)
	}
	list, err := collectOrders(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: held orders: %w", err)
	}
	return list, nil
}
