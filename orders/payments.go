package orders

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// DefaultCurrency is the currency of payments when none is configured.
const DefaultCurrency = seckill.DefaultCurrency

// queryGiveUp is how long past its deadline an order whose provider cannot
// be asked is kept waiting: then it is cancelled all the same, and money
// that comes later is refunded, so a provider's outage holds no unit for
// longer.
const queryGiveUp = 10 * time.Minute

// ErrPayThroughProvider answers the shoppers' pay route while payments go
// through a provider: only the provider's word makes an order paid.
var ErrPayThroughProvider = apperr.Public(apperr.ErrConflict,
	"orders are paid through the payment provider: POST /api/v1/orders/{id}/payments")

// payments is the Lifecycle's part for payments through a provider.
type payments struct {
	record   PaymentRecord
	provider payment.Provider
	currency string
	metrics  *PaymentMetrics
}

func (p payments) on() bool { return p.record != nil && p.provider != nil }

// direct reports whether the shoppers' pay route may mark orders paid by
// itself: without a provider, or with the demo provider of dev mode.
func (p payments) direct() bool { return p.provider == nil || p.provider.Name() == payment.DemoName }

// ProviderName is the configured provider's name, "" without one.
func (l *Lifecycle) ProviderName() string {
	if l.pay.provider == nil {
		return ""
	}
	return l.pay.provider.Name()
}

// CurrencyOf is the currency an order is paid in: its voucher's, or the
// configured one for a voucher recorded before vouchers carried one (it
// was always sold in that). AmountCents is in its minor unit, as the
// voucher's price is.
func (l *Lifecycle) CurrencyOf(o Order) string {
	if o.Currency != "" {
		return payment.NormalizeCurrency(o.Currency)
	}
	return l.pay.currency
}

// StartPayment asks the provider for a payment of the user's created order,
// or returns its pending payment (created false) when it has one: a
// shopper's retry, or a second tab. The provider's create carries an
// idempotency key per order and attempt, so a retry after a lost answer
// gets the same payment back from the provider too.
func (l *Lifecycle) StartPayment(ctx context.Context, userID, orderID int64) (_ Payment, created bool, _ error) {
	if !l.pay.on() {
		return Payment{}, false, fmt.Errorf("%w: payments are not configured on this instance", apperr.ErrUnavailable)
	}
	o, pending, err := l.pay.record.PaymentOf(ctx, userID, orderID)
	if err != nil {
		return Payment{}, false, fmt.Errorf("orders: start payment: %w", err)
	}
	// An order that no longer waits for money gets no payment, not even
	// its pending one: money for it would only be refunded.
	if o.Status != StatusCreated || !o.PayDeadline.After(l.now()) {
		if o.Status == StatusPaid {
			return Payment{}, false, apperr.Public(apperr.ErrConflict, "the order is paid already")
		}
		return Payment{}, false, apperr.Public(apperr.ErrConflict, "the order is no longer waiting for payment")
	}
	if pending != nil {
		return *pending, false, nil
	}
	n, err := l.pay.record.PaymentAttempts(ctx, orderID)
	if err != nil {
		return Payment{}, false, fmt.Errorf("orders: start payment: %w", err)
	}
	in, err := l.pay.provider.Create(ctx, payment.CreateRequest{
		OrderID: orderID, AmountCents: o.AmountCents, Currency: l.CurrencyOf(o),
		IdempotencyKey: "seckill-order-" + strconv.FormatInt(orderID, 10) + "-" + strconv.Itoa(n+1),
	})
	if err != nil {
		l.pay.metrics.providerError("create")
		return Payment{}, false, fmt.Errorf("orders: start payment: %w: %w", apperr.ErrUnavailable, err)
	}
	// The order's own amount and currency are the record's, whatever the
	// provider echoed: its events are checked against them.
	_, p, created, err := l.pay.record.InsertPayment(ctx, userID, Payment{
		ID: in.ID, OrderID: orderID, Provider: l.pay.provider.Name(), AmountCents: o.AmountCents,
		Currency: l.CurrencyOf(o), ClientSecret: in.ClientSecret,
	})
	if err != nil {
		return Payment{}, false, fmt.Errorf("orders: start payment: %w", err)
	}
	if created {
		l.pay.metrics.payment(payment.StatusPending)
	}
	return p, created, nil
}

// HandleEvent applies one verified provider event: at most once per event
// id, a payment's status only ever moving up, the order paid, refunded (its
// unit back on sale, once) or, for money that came too late, refunded at
// the provider. The buyer is told every change of the order's status.
func (l *Lifecycle) HandleEvent(ctx context.Context, ev payment.Event) (EventOutcome, error) {
	if !l.pay.on() {
		return EventOutcome{}, fmt.Errorf("%w: payments are not configured on this instance", apperr.ErrUnavailable)
	}
	out, err := l.pay.record.ApplyPaymentEvent(ctx, ev)
	if errors.Is(err, ErrPaymentMismatch) {
		l.pay.metrics.event(ev.Type, EventRejected)
		return EventOutcome{Result: EventRejected}, fmt.Errorf("orders: payment event %s: %w", ev.ID, err)
	}
	if err != nil {
		return EventOutcome{}, fmt.Errorf("orders: payment event %s: %w", ev.ID, err)
	}
	l.pay.metrics.event(ev.Type, out.Result)
	if out.Result == EventApplied || out.Result == EventLateRefund {
		switch ev.Kind {
		case payment.EventSucceeded:
			l.pay.metrics.payment(payment.StatusSucceeded)
		case payment.EventFailed:
			l.pay.metrics.payment(payment.StatusFailed)
		case payment.EventRefunded:
			l.pay.metrics.payment(payment.StatusRefunded)
		}
	}
	switch {
	case out.Changed && out.Result == EventLateRefund:
		// cancelled → refunded moves no stock: the cancel gave it back
		// (or its release is owed and the release loop finishes it). The
		// buyer is told here, whoever announces the cancel.
		l.publish(ctx, out.Order)
	case out.Changed:
		// paid → refunded gives the unit back: announced by whoever's
		// release gives it back in Redis, like a cancel.
		list, announce := l.release(ctx, []Order{out.Order})
		out.Order = list[0]
		l.publish(ctx, announce...)
	}
	if out.Refund != nil {
		l.pay.metrics.lateRefund()
		l.askRefund(ctx, *out.Refund)
	}
	return out, nil
}

// Refund is an operator's refund of a paid order: the provider is asked to
// give the money back and the order stays paid until it confirms (its
// unit goes back on sale then, once). An order paid without a provider
// payment (the demo provider) is refunded at once. A refunded order is
// returned as it is.
func (l *Lifecycle) Refund(ctx context.Context, orderID int64) (Order, error) {
	if !l.pay.on() {
		return Order{}, fmt.Errorf("%w: payments are not configured on this instance", apperr.ErrUnavailable)
	}
	o, p, err := l.pay.record.AskRefund(ctx, orderID)
	if errors.Is(err, ErrAlready) {
		return o, nil
	}
	if err != nil {
		return Order{}, fmt.Errorf("orders: refund: %w", err)
	}
	if p != nil {
		l.askRefund(ctx, *p)
		return o, nil
	}
	if !l.pay.direct() {
		return Order{}, apperr.Public(apperr.ErrConflict, "the order was not paid through the payment provider")
	}
	o, err = l.pay.record.RefundPaid(ctx, orderID)
	if errors.Is(err, ErrAlready) {
		return o, nil
	}
	if err != nil {
		return Order{}, fmt.Errorf("orders: refund: %w", err)
	}
	l.pay.metrics.payment(payment.StatusRefunded)
	list, announce := l.release(ctx, []Order{o})
	l.publish(ctx, announce...)
	return list[0], nil
}

// askRefund asks the provider for a refund the record owes; a failure is
// left to RefundOwed, which asks again with the same idempotency key.
func (l *Lifecycle) askRefund(ctx context.Context, p Payment) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := l.pay.provider.Refund(ctx, p.ID, "seckill-refund-"+p.ID); err != nil {
		l.pay.metrics.providerError("refund")
		l.log.WarnContext(ctx, "refund not asked; the sweeper asks again", "payment_id", p.ID, "err", err)
		return
	}
	if err := l.pay.record.RefundAsked(ctx, p.ID); err != nil {
		l.log.WarnContext(ctx, "refund asked but not recorded; the sweeper asks again", "payment_id", p.ID, "err", err)
	}
}

// RefundOwed asks the provider for up to max refunds the record owes whose
// asking failed or whose asker died, and returns how many it asked.
func (l *Lifecycle) RefundOwed(ctx context.Context, max int) (int, error) {
	if !l.pay.on() {
		return 0, nil
	}
	list, err := l.pay.record.RefundsOwed(ctx, max)
	if err != nil {
		return 0, fmt.Errorf("orders: refunds owed: %w", err)
	}
	n := 0
	var first error
	for _, p := range list {
		if err := l.pay.provider.Refund(ctx, p.ID, "seckill-refund-"+p.ID); err != nil {
			l.pay.metrics.providerError("refund")
			if first == nil {
				first = fmt.Errorf("orders: refund %s: %w", p.ID, err)
			}
			continue
		}
		if err := l.pay.record.RefundAsked(ctx, p.ID); err != nil && first == nil {
			first = fmt.Errorf("orders: refund %s: %w", p.ID, err)
		}
		n++
	}
	return n, first
}

// cancelDuePayments settles up to max orders past their deadline whose
// payment is pending by asking the provider (the active query): an order
// whose money is there is paid, as the event would have made it; the others
// are cancelled. An order whose provider cannot be asked waits, up to
// queryGiveUp past its deadline.
func (l *Lifecycle) cancelDuePayments(ctx context.Context, max int) ([]Order, error) {
	if !l.pay.on() {
		return nil, nil
	}
	due, err := l.pay.record.DuePendingPayments(ctx, max)
	if err != nil || len(due) == 0 {
		return nil, err
	}
	var cancel []int64
	for _, o := range due {
		in, err := l.pay.provider.Retrieve(ctx, o.Payment.ID)
		if err != nil {
			l.pay.metrics.providerError("retrieve")
			if l.now().Sub(o.PayDeadline) > queryGiveUp {
				cancel = append(cancel, o.ID)
			}
			continue
		}
		if in.Status == payment.StatusSucceeded && in.AmountCents == o.Payment.AmountCents &&
			payment.NormalizeCurrency(in.Currency) == o.Payment.Currency {
			ev := payment.Event{ID: "query_" + in.ID, Provider: l.pay.provider.Name(), Type: "active_query",
				Kind: payment.EventSucceeded, PaymentID: in.ID, OrderID: o.ID, AmountCents: in.AmountCents, Currency: in.Currency}
			if _, err := l.HandleEvent(ctx, ev); err != nil {
				l.log.WarnContext(ctx, "sweep: paid order not settled", "order_id", o.ID, "err", err)
			}
			continue
		}
		cancel = append(cancel, o.ID)
	}
	list, err := l.pay.record.CancelDue(ctx, cancel)
	if err != nil {
		return nil, fmt.Errorf("orders: cancel due: %w", err)
	}
	return list, nil
}
