package orders

import (
	"context"
	"errors"

	"github.com/flashsale/seckill/orders/payment"
)

// ErrPaymentMismatch is wrapped when a provider's event names an amount or
// a currency other than its payment's: nothing changes because of it.
var ErrPaymentMismatch = errors.New("orders: the event's amount or currency is not its payment's")

// The results of an event, as PaymentRecord.ApplyPaymentEvent records them
// in payment_events and the metrics count them.
const (
	// EventApplied: the event moved its payment (and maybe its order) on.
	EventApplied = "applied"
	// EventDuplicate: the event was handled before; nothing changed.
	EventDuplicate = "duplicate"
	// EventStale: the payment was already past what the event says (an
	// event out of order); nothing changed.
	EventStale = "stale"
	// EventIgnored: not a kind of event the orders act on, or about a
	// payment this platform did not make.
	EventIgnored = "ignored"
	// EventLateRefund: money came for an order that was no longer waiting
	// for it (cancelled at its deadline); it is owed back.
	EventLateRefund = "late_refund"
	// EventRejected: the event's amount or currency was not its payment's
	// (never recorded: the transaction is rolled back).
	EventRejected = "rejected"
)

// EventOutcome is what applying one provider event did.
type EventOutcome struct {
	Result string
	// Order is the order after the event; Changed says whether its status
	// changed (and must be announced).
	Order   Order
	Changed bool
	// Refund is the payment whose money is now owed back (a late or
	// second payment), nil when none.
	Refund *Payment
}

// PaymentRecord is the record of payments in PostgreSQL
// (orders/pgstore.Store implements it).
type PaymentRecord interface {
	// PaymentOf returns the user's order and its pending payment, if any;
	// ErrNotFound for an unknown or someone else's order.
	PaymentOf(ctx context.Context, userID, orderID int64) (Order, *Payment, error)
	// PaymentAttempts counts the payments asked for the order so far.
	PaymentAttempts(ctx context.Context, orderID int64) (int, error)
	// InsertPayment records p as the order's pending payment if the order
	// is still the user's, created and before its deadline, and has no
	// pending payment (created false: the one it has is returned).
	InsertPayment(ctx context.Context, userID int64, p Payment) (_ Order, _ Payment, created bool, _ error)
	// ApplyPaymentEvent applies one verified event in one transaction,
	// once per event id (see EventOutcome); ErrPaymentMismatch when its
	// money is not its payment's.
	ApplyPaymentEvent(ctx context.Context, ev payment.Event) (EventOutcome, error)
	// DuePendingPayments lists up to max created orders past their
	// deadline whose payment is pending: those the sweeper asks the
	// provider about before cancelling.
	DuePendingPayments(ctx context.Context, max int) ([]Order, error)
	// CancelDue cancels those of ids that are still created and past their
	// deadline, as CancelExpired does.
	CancelDue(ctx context.Context, ids []int64) ([]Order, error)
	// AskRefund marks the paid order's payment as owed back (an
	// operator's refund); the order stays paid until the provider confirms.
	// ErrAlready with the order when it is refunded already; ErrConflict
	// when it is not paid.
	AskRefund(ctx context.Context, orderID int64) (Order, *Payment, error)
	// RefundPaid refunds a paid order that has no provider payment (paid
	// through the demo provider) at once: status refunded, its stock back
	// as a cancellation gives it.
	RefundPaid(ctx context.Context, orderID int64) (Order, error)
	// RefundsOwed lists up to max payments owed back whose refund the
	// provider has not taken yet.
	RefundsOwed(ctx context.Context, max int) ([]Payment, error)
	// RefundAsked records that the provider took the refund of paymentID.
	RefundAsked(ctx context.Context, paymentID string) error
}
