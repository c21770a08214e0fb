package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/seckill/apperr"
)

// The store is the payment record of package orders as it is.
var _ orders.PaymentRecord = (*Store)(nil)

const paymentColumns = `id, order_id, provider, status, amount_cents, currency, client_secret`

func scanPayment(row pgx.Row) (orders.Payment, error) {
	var p orders.Payment
	var status string
	if err := row.Scan(&p.ID, &p.OrderID, &p.Provider, &status, &p.AmountCents, &p.Currency, &p.ClientSecret); err != nil {
		return orders.Payment{}, err
	}
	p.Status = payment.Status(status)
	return p, nil
}

// PaymentOf implements orders.PaymentRecord.
func (s *Store) PaymentOf(ctx context.Context, userID, orderID int64) (_ orders.Order, _ *orders.Payment, err error) {
	defer unavailable(&err)
	o, err := s.Order(ctx, orderID)
	if err != nil {
		return orders.Order{}, nil, err
	}
	if o.UserID != userID {
		return orders.Order{}, nil, fmt.Errorf("pgstore: order %d: %w", orderID, apperr.ErrNotFound)
	}
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(currency, '') FROM vouchers WHERE id = $1`, o.VoucherID).
		Scan(&o.Currency); err != nil {
		return orders.Order{}, nil, fmt.Errorf("pgstore: currency of order %d: %w", orderID, err)
	}
	p, err := scanPayment(s.pool.QueryRow(ctx, `SELECT `+paymentColumns+` FROM payments
		WHERE order_id = $1 AND status = 'pending'`, orderID))
	if errors.Is(err, pgx.ErrNoRows) {
		return o, nil, nil
	}
	if err != nil {
		return orders.Order{}, nil, fmt.Errorf("pgstore: payment of order %d: %w", orderID, err)
	}
	return o, &p, nil
}

// PaymentAttempts implements orders.PaymentRecord.
func (s *Store) PaymentAttempts(ctx context.Context, orderID int64) (_ int, err error) {
	defer unavailable(&err)
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE order_id = $1`, orderID).Scan(&n); err != nil {
		return 0, fmt.Errorf("pgstore: payments of order %d: %w", orderID, err)
	}
	return n, nil
}

// InsertPayment implements orders.PaymentRecord in one transaction: the
// order's row is locked first, so two shoppers' tabs asking at once make
// one pending payment, and a cancellation racing it either comes first
// (conflict) or waits and finds the payment.
func (s *Store) InsertPayment(ctx context.Context, userID int64, p orders.Payment) (_ orders.Order, _ orders.Payment, created bool, err error) {
	defer unavailable(&err)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return orders.Order{}, orders.Payment{}, false, fmt.Errorf("pgstore: insert payment: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit

	var owner int64
	var status string
	var due bool
	err = tx.QueryRow(ctx, `SELECT user_id, status, pay_deadline <= now() FROM orders WHERE id = $1 FOR UPDATE`, p.OrderID).
		Scan(&owner, &status, &due)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != userID):
		return orders.Order{}, orders.Payment{}, false, fmt.Errorf("pgstore: order %d: %w", p.OrderID, apperr.ErrNotFound)
	case err != nil:
		return orders.Order{}, orders.Payment{}, false, fmt.Errorf("pgstore: insert payment: order %d: %w", p.OrderID, err)
	case status != string(orders.StatusCreated) || due:
		return orders.Order{}, orders.Payment{}, false, apperr.Public(apperr.ErrConflict, "the order is no longer waiting for payment")
	}
	existing, err := scanPayment(tx.QueryRow(ctx, `SELECT `+paymentColumns+` FROM payments
		WHERE order_id = $1 AND status = 'pending'`, p.OrderID))
	if err == nil {
		// Read inside the transaction: a second connection per waiting
		// request would drain the pool under a crowd.
		o, err := scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1`, p.OrderID))
		if err != nil {
			return orders.Order{}, orders.Payment{}, false, fmt.Errorf("pgstore: insert payment: order %d: %w", p.OrderID, err)
		}
		return o, existing, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return orders.Order{}, orders.Payment{}, false, fmt.Errorf("pgstore: insert payment: %w", err)
	}
	p.Status = payment.StatusPending
	if _, err := tx.Exec(ctx, `INSERT INTO payments (id, order_id, provider, status, amount_cents, currency, client_secret)
		VALUES ($1, $2, $3, 'pending', $4, $5, $6)`, p.ID, p.OrderID, p.Provider, p.AmountCents, p.Currency, p.ClientSecret); err != nil {
		return orders.Order{}, orders.Payment{}, false, fmt.Errorf("pgstore: insert payment %s: %w", p.ID, err)
	}
	o, err := scanOrder(tx.QueryRow(ctx, `UPDATE orders SET payment_id = $2, payment_provider = $3, payment_status = 'pending',
		payment_amount_cents = $4, payment_currency = $5, updated_at = now() WHERE id = $1 RETURNING `+orderColumns,
		p.OrderID, p.ID, p.Provider, p.AmountCents, p.Currency))
	if err != nil {
		return orders.Order{}, orders.Payment{}, false, fmt.Errorf("pgstore: insert payment: order %d: %w", p.OrderID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return orders.Order{}, orders.Payment{}, false, fmt.Errorf("pgstore: insert payment: commit: %w", err)
	}
	return o, p, true, nil
}

// ApplyPaymentEvent implements orders.PaymentRecord: the event's row, the
// payment's status (only ever up its rank) and the order's, in ONE
// transaction. The event's primary key makes a repeated delivery a no-op;
// the payment's row lock orders concurrent events of one payment; the
// order's conditional updates decide a payment racing the sweeper, exactly
// one wins.
func (s *Store) ApplyPaymentEvent(ctx context.Context, ev payment.Event) (_ orders.EventOutcome, err error) {
	defer unavailable(&err)
	return retryConflicts(ctx, func() (orders.EventOutcome, error) { return s.applyPaymentEvent(ctx, ev) })
}

func (s *Store) applyPaymentEvent(ctx context.Context, ev payment.Event) (orders.EventOutcome, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return orders.EventOutcome{}, fmt.Errorf("pgstore: payment event: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit

	var payID *string
	if ev.PaymentID != "" {
		payID = &ev.PaymentID
	}
	var orderID *int64
	if ev.OrderID > 0 {
		orderID = &ev.OrderID
	}
	tag, err := tx.Exec(ctx, `INSERT INTO payment_events (id, provider, type, payment_id, order_id, result)
		VALUES ($1, $2, $3, $4, $5, '') ON CONFLICT (id) DO NOTHING`, ev.ID, ev.Provider, ev.Type, payID, orderID)
	if err != nil {
		return orders.EventOutcome{}, fmt.Errorf("pgstore: payment event %s: %w", ev.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return orders.EventOutcome{Result: orders.EventDuplicate}, nil
	}
	out, err := s.applyToPayment(ctx, tx, ev)
	if err != nil {
		return orders.EventOutcome{}, err
	}
	if _, err := tx.Exec(ctx, `UPDATE payment_events SET result = $2, order_id = coalesce(order_id, $3) WHERE id = $1`,
		ev.ID, out.Result, nullID(out.Order.ID)); err != nil {
		return orders.EventOutcome{}, fmt.Errorf("pgstore: payment event %s: %w", ev.ID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return orders.EventOutcome{}, fmt.Errorf("pgstore: payment event %s: commit: %w", ev.ID, err)
	}
	return out, nil
}

func nullID(id int64) *int64 {
	if id <= 0 {
		return nil
	}
	return &id
}

// applyToPayment is the body of ApplyPaymentEvent once its event is new.
func (s *Store) applyToPayment(ctx context.Context, tx pgx.Tx, ev payment.Event) (orders.EventOutcome, error) {
	var to payment.Status
	switch ev.Kind {
	case payment.EventSucceeded:
		to = payment.StatusSucceeded
	case payment.EventFailed:
		to = payment.StatusFailed
	case payment.EventRefunded:
		to = payment.StatusRefunded
	default:
		return orders.EventOutcome{Result: orders.EventIgnored}, nil
	}
	p, err := scanPayment(tx.QueryRow(ctx, `SELECT `+paymentColumns+` FROM payments WHERE id = $1 FOR UPDATE`, ev.PaymentID))
	if errors.Is(err, pgx.ErrNoRows) {
		return orders.EventOutcome{Result: orders.EventIgnored}, nil
	}
	if err != nil {
		return orders.EventOutcome{}, fmt.Errorf("pgstore: payment %s: %w", ev.PaymentID, err)
	}
	if (ev.OrderID != 0 && ev.OrderID != p.OrderID) || ev.AmountCents != p.AmountCents ||
		payment.NormalizeCurrency(ev.Currency) != p.Currency {
		return orders.EventOutcome{}, fmt.Errorf("pgstore: payment %s: %w", p.ID, orders.ErrPaymentMismatch)
	}
	o, err := scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1 FOR UPDATE`, p.OrderID))
	if err != nil {
		return orders.EventOutcome{}, fmt.Errorf("pgstore: payment %s: order %d: %w", p.ID, p.OrderID, err)
	}
	if to.Rank() <= p.Status.Rank() {
		return orders.EventOutcome{Result: orders.EventStale, Order: o}, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE payments SET status = $2, updated_at = now(),
		refund_owed = CASE WHEN $2 = 'refunded' THEN false ELSE refund_owed END WHERE id = $1`, p.ID, string(to)); err != nil {
		return orders.EventOutcome{}, fmt.Errorf("pgstore: payment %s: %w", p.ID, err)
	}
	p.Status = to
	current := o.Payment != nil && o.Payment.ID == p.ID
	out := orders.EventOutcome{Result: orders.EventApplied, Order: o}

	next := o.Status
	switch {
	case to == payment.StatusSucceeded && o.Status == orders.StatusCreated && current:
		// The money is there: the order is paid, even past its deadline
		// (the sweeper asks the provider before cancelling, and whoever
		// commits first wins the order's row).
		next = orders.StatusPaid
	case to == payment.StatusSucceeded:
		// Money for an order no longer waiting for it (cancelled at its
		// deadline, or paid another way): owed back. A cancelled order
		// becomes refunded; its unit, already back on sale, stays with
		// whoever bought it since.
		if _, err := tx.Exec(ctx, `UPDATE payments SET late = true, refund_owed = true WHERE id = $1`, p.ID); err != nil {
			return orders.EventOutcome{}, fmt.Errorf("pgstore: payment %s: refund owed: %w", p.ID, err)
		}
		out.Result, out.Refund = orders.EventLateRefund, &p
		if o.Status == orders.StatusCancelled && current {
			next = orders.StatusRefunded
		}
	case to == payment.StatusRefunded && o.Status == orders.StatusPaid && current:
		// The refund is confirmed: the unit goes back on sale, once (the
		// conditional update below is the once).
		list, err := refundPaidTx(ctx, tx, o.ID)
		if err != nil {
			return orders.EventOutcome{}, err
		}
		if len(list) == 1 {
			out.Order, out.Changed = list[0], true
		}
		o, next = out.Order, orders.StatusRefunded
	}
	if !current {
		return out, nil
	}
	o, err = scanOrder(tx.QueryRow(ctx, `UPDATE orders SET status = $2, payment_status = $3, updated_at = now()
		WHERE id = $1 RETURNING `+orderColumns, o.ID, string(next), string(to)))
	if err != nil {
		return orders.EventOutcome{}, fmt.Errorf("pgstore: payment %s: order %d: %w", p.ID, p.OrderID, err)
	}
	out.Changed = out.Changed || next != out.Order.Status
	out.Order = o
	return out, nil
}

// refundPaidTx turns the paid order id refunded inside tx and gives its
// stock back as a cancellation does (stock_left, the buyer's count, and the
// Redis release flagged for a seckill voucher).
func refundPaidTx(ctx context.Context, tx pgx.Tx, id int64) ([]orders.Order, error) {
	rows, err := tx.Query(ctx, `
		UPDATE orders o SET status = 'refunded', updated_at = now(),
			redis_release_pending = EXISTS (SELECT 1 FROM vouchers v WHERE v.id = o.voucher_id AND v.kind = 'seckill')
		WHERE id = $1 AND status = 'paid'
		RETURNING `+orderColumns, id)
	if err != nil {
		return nil, fmt.Errorf("pgstore: refund order %d: %w", id, err)
	}
	list, err := collectOrders(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: refund order %d: %w", id, err)
	}
	if len(list) == 0 {
		return nil, nil
	}
	if err := giveBack(ctx, tx, list); err != nil {
		return nil, fmt.Errorf("pgstore: refund order %d: %w", id, err)
	}
	return list, nil
}

// DuePendingPayments implements orders.PaymentRecord.
func (s *Store) DuePendingPayments(ctx context.Context, max int) (_ []orders.Order, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT `+orderColumns+` FROM orders
		WHERE status = 'created' AND pay_deadline <= now() AND payment_status = 'pending'
		ORDER BY pay_deadline LIMIT $1`, max)
	if err != nil {
		return nil, fmt.Errorf("pgstore: due pending payments: %w", err)
	}
	list, err := collectOrders(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: due pending payments: %w", err)
	}
	return list, nil
}

// CancelDue implements orders.PaymentRecord.
func (s *Store) CancelDue(ctx context.Context, ids []int64) (_ []orders.Order, err error) {
	defer unavailable(&err)
	if len(ids) == 0 {
		return nil, nil
	}
	list, err := s.cancelWhere(ctx, `id IN (SELECT id FROM orders WHERE id = ANY($1) AND status = 'created'
		AND pay_deadline <= now() ORDER BY id FOR UPDATE SKIP LOCKED)`, ids)
	if err != nil {
		return nil, fmt.Errorf("pgstore: cancel due: %w", err)
	}
	return list, nil
}

// AskRefund implements orders.PaymentRecord.
func (s *Store) AskRefund(ctx context.Context, orderID int64) (_ orders.Order, _ *orders.Payment, err error) {
	defer unavailable(&err)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return orders.Order{}, nil, fmt.Errorf("pgstore: ask refund: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit

	o, err := scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1 FOR UPDATE`, orderID))
	if errors.Is(err, pgx.ErrNoRows) {
		return orders.Order{}, nil, fmt.Errorf("pgstore: order %d: %w", orderID, apperr.ErrNotFound)
	}
	if err != nil {
		return orders.Order{}, nil, fmt.Errorf("pgstore: ask refund of order %d: %w", orderID, err)
	}
	switch {
	case o.Status == orders.StatusRefunded:
		return o, nil, fmt.Errorf("pgstore: order %d: %w", orderID, orders.ErrAlready)
	case o.Status != orders.StatusPaid:
		return orders.Order{}, nil, apperr.Public(apperr.ErrConflict, "only a paid order can be refunded")
	case o.Payment == nil || o.Payment.Status != payment.StatusSucceeded:
		return o, nil, nil
	}
	p, err := scanPayment(tx.QueryRow(ctx, `UPDATE payments SET refund_owed = true, updated_at = now()
		WHERE id = $1 RETURNING `+paymentColumns, o.Payment.ID))
	if err != nil {
		return orders.Order{}, nil, fmt.Errorf("pgstore: ask refund of order %d: %w", orderID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return orders.Order{}, nil, fmt.Errorf("pgstore: ask refund: commit: %w", err)
	}
	return o, &p, nil
}

// RefundPaid implements orders.PaymentRecord.
func (s *Store) RefundPaid(ctx context.Context, orderID int64) (_ orders.Order, err error) {
	defer unavailable(&err)
	return retryConflicts(ctx, func() (orders.Order, error) {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return orders.Order{}, fmt.Errorf("pgstore: refund: begin: %w", err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit
		list, err := refundPaidTx(ctx, tx, orderID)
		if err != nil {
			return orders.Order{}, err
		}
		if len(list) == 0 {
			o, err := scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1`, orderID))
			if errors.Is(err, pgx.ErrNoRows) {
				return orders.Order{}, fmt.Errorf("pgstore: order %d: %w", orderID, apperr.ErrNotFound)
			}
			if err == nil && o.Status == orders.StatusRefunded {
				return o, fmt.Errorf("pgstore: order %d: %w", orderID, orders.ErrAlready)
			}
			if err != nil {
				return orders.Order{}, err
			}
			return orders.Order{}, apperr.Public(apperr.ErrConflict, "only a paid order can be refunded")
		}
		if err := tx.Commit(ctx); err != nil {
			return orders.Order{}, fmt.Errorf("pgstore: refund: commit: %w", err)
		}
		return list[0], nil
	})
}

// RefundsOwed implements orders.PaymentRecord.
func (s *Store) RefundsOwed(ctx context.Context, max int) (_ []orders.Payment, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT `+paymentColumns+` FROM payments WHERE refund_owed ORDER BY id LIMIT $1`, max)
	if err != nil {
		return nil, fmt.Errorf("pgstore: refunds owed: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (orders.Payment, error) { return scanPayment(row) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: refunds owed: %w", err)
	}
	return list, nil
}

// RefundAsked implements orders.PaymentRecord.
func (s *Store) RefundAsked(ctx context.Context, paymentID string) (err error) {
	defer unavailable(&err)
	if _, err := s.pool.Exec(ctx, `UPDATE payments SET refund_owed = false, refund_asked_at = now(), updated_at = now()
		WHERE id = $1`, paymentID); err != nil {
		return fmt.Errorf("pgstore: refund asked of %s: %w", paymentID, err)
	}
	return nil
}
