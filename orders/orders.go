// Package orders is the order domain: the life of an order from reservation to
// paid, cancelled or failed, the workers that persist reservations, the sweeper
// of unpaid orders and the reconciler. It declares the interfaces it needs and
// keeps drivers in subpackages (pgstore for PostgreSQL, kafkaq for Kafka).
package orders

import (
	"time"
)

// Status is where an order is in its life.
type Status string

// The statuses of api.md.
const (
	StatusReserved  Status = "reserved"
	StatusCreated   Status = "created"
	StatusPaid      Status = "paid"
	StatusCancelled Status = "cancelled"
	StatusFailed    Status = "failed"
)

// Final reports whether no transition leaves s.
func (s Status) Final() bool {
	return s == StatusPaid || s == StatusCancelled || s == StatusFailed
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
	CreatedAt   time.Time
	// PayDeadline is zero until the order is persisted.
	PayDeadline time.Time
	UpdatedAt   time.Time
}

// Event is one status change, published once per transition so every
// gateway can push it to the buyer.
type Event struct {
	Order Order
	// At is when the change was made, for the push delay metric.
	At time.Time
}
