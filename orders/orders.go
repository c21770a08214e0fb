// Package orders takes an order from its reservation to paid, cancelled or
// failed.
//
// Its workers persist reservations, its sweeper ends unpaid orders, and its
// reconciler releases holds whose message never arrived. It declares the interfaces it needs and
// keeps drivers in subpackages (pgstore for PostgreSQL, kafkaq for Kafka).
//
// Every transition (created, paid, cancelled, failed) is published once, after
// its commit, as an Event through the Events interface; notify.Publisher sends
// it on its buyer's Redis shard channel (notify.ChannelOf). Pub/sub rather than a Kafka
// topic, because gateways only need live changes for the sockets they hold:
// the durable record is PostgreSQL, and a socket that (re)connects is sent a
// snapshot of the user's non-final orders, so a change missed while a gateway
// was away costs nothing. A Kafka topic would add a consumer group per gateway
// and replay history nobody needs.
//
// Lifecycle moves persisted orders on (pay, cancel, the payment timeout) with
// one conditional UPDATE per transition and the redis_release_pending column
// as the outbox of the Redis release; Sweeper runs the timeouts and the
// outbox; SyncBuyer sells the limit and common kinds straight into
// PostgreSQL; Reconciler releases holds whose message never reached Kafka.
package orders

import (
	"errors"
	"time"

	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/seckill"
)

// ErrAlready is wrapped by a LifecycleStore transition to the status the
// order already has (a retried pay or cancel whose first answer was lost).
// The store returns the order as it is; nothing changed.
var ErrAlready = errors.New("orders: the order already has that status")

// Status is where an order is in its life.
type Status string

// The statuses of gateway/openapi.yaml's Order.
const (
	StatusReserved  Status = "reserved"
	StatusCreated   Status = "created"
	StatusPaid      Status = "paid"
	StatusCancelled Status = "cancelled"
	StatusFailed    Status = "failed"
	// StatusRefunded is final: the order was paid, then its money went
	// back (an operator's refund, or money that came after the order was
	// cancelled).
	StatusRefunded Status = "refunded"
)

// Final reports whether no transition leaves s.
func (s Status) Final() bool {
	return s == StatusPaid || s == StatusCancelled || s == StatusFailed || s == StatusRefunded
}

// Order is one shopper's purchase of a voucher.
type Order struct {
	ID          int64
	VoucherID   int64
	UserID      int64
	Quantity    int64
	AmountCents int64
	Status      Status
	RequestKey  string
	// ReservedAt is when the stock was held in Redis (the gateway's clock).
	ReservedAt time.Time
	CreatedAt  time.Time
	// PayDeadline is zero until the order is persisted, and for failed orders.
	PayDeadline time.Time
	UpdatedAt   time.Time
	// ReleasePending is true while the order is cancelled or failed in
	// PostgreSQL but its stock is not yet back in Redis (the outbox flag).
	ReleasePending bool
	// Payment is the order's current payment through a provider, nil
	// before one is asked for.
	Payment *Payment
	// Currency is its voucher's currency, read only with a payment to
	// start (PaymentRecord.PaymentOf); "" for a voucher recorded before
	// vouchers carried one, which is charged in the configured currency.
	Currency string
}

// Payment is an order's payment through a provider (gateway/openapi.yaml's
// OrderPayment, and Payment with its client secret).
type Payment struct {
	ID          string
	OrderID     int64
	Provider    string
	Status      payment.Status
	AmountCents int64
	Currency    string
	// ClientSecret is only read with the payment itself, never with an
	// order.
	ClientSecret string
}

// OrderFromReservation is the order a live Redis hold stands for, before
// PostgreSQL has it: status reserved, no deadline yet.
func OrderFromReservation(r seckill.Reservation, priceCents int64) Order {
	return Order{
		ID:          r.OrderID,
		VoucherID:   r.VoucherID,
		UserID:      r.UserID,
		Quantity:    r.Quantity,
		AmountCents: r.Quantity * priceCents,
		Status:      StatusReserved,
		RequestKey:  r.RequestKey,
		ReservedAt:  r.ReservedAt,
		CreatedAt:   r.ReservedAt,
		UpdatedAt:   r.ReservedAt,
	}
}

// Outcome is what persisting one reservation did.
type Outcome int

// The outcomes of persisting a reservation.
const (
	// OutcomeCreated: this call created the order (stock and limit taken in
	// PostgreSQL).
	OutcomeCreated Outcome = iota + 1
	// OutcomeDuplicate: the order already existed (a redelivered message, or
	// the same order twice in one batch); nothing changed. Persisted.Order is
	// the stored row, whatever its status now.
	OutcomeDuplicate
	// OutcomeFailed: the reservation can never become an order (voucher
	// missing, sold out or limit reached in PostgreSQL, request key used by
	// another order, invalid). It was stored as a failed order with
	// ReleasePending set, unless it was too malformed to store at all.
	OutcomeFailed
)

// String names the outcome for logs.
func (o Outcome) String() string {
	switch o {
	case OutcomeCreated:
		return "created"
	case OutcomeDuplicate:
		return "duplicate"
	case OutcomeFailed:
		return "failed"
	}
	return "unknown"
}

// Persisted is the fate of one reservation of a batch.
type Persisted struct {
	Reservation seckill.Reservation
	Outcome     Outcome
	// Order is the stored order after the call (for a duplicate, the row as
	// it is now, which may have moved on to paid or cancelled).
	Order Order
	// Reason says why an OutcomeFailed failed; it wraps a refusal of
	// seckill (ErrSoldOut, ErrLimitExceeded) or a kind of seckill/apperr
	// (ErrNotFound, ErrConflict, ErrInvalidInput).
	Reason error
}

// BatchResult is the fate of every reservation of a batch, in input order.
type BatchResult struct {
	Results []Persisted
}

// Count returns how many results had outcome o.
func (b BatchResult) Count(o Outcome) int {
	n := 0
	for _, p := range b.Results {
		if p.Outcome == o {
			n++
		}
	}
	return n
}

// Stats is what PostgreSQL knows of one voucher's sales (the admin stats
// route adds the reserved figure from Redis).
type Stats struct {
	VoucherID  int64
	StockTotal int64
	StockLeft  int64
	// Orders counts orders per status; every persisted status is present,
	// zero when there are none.
	Orders map[Status]int64
	// Quantity sums the orders' quantities per status, like Orders.
	Quantity map[Status]int64
	// Redis and Drift are set by StatsService for seckill vouchers: Redis's
	// view and how it differs from PostgreSQL.
	Redis *RedisView
	Drift *Drift
}

// Event is one status change, published once per transition so every
// gateway can push it to the buyer.
type Event struct {
	Order Order
	// At is when the change was made, for the push delay metric.
	At time.Time
}
