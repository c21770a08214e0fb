// Package payment is the seam between the order domain and whoever takes
// the money: a small Provider interface, the events a provider reports, and
// the demo provider of dev mode. Adapters live beside it (stripepay for
// Stripe); an Alipay or WeChat Pay adapter is one more Provider plus a
// Verifier of its notifications (README, "Paying").
package payment

import (
	"context"
	"errors"
	"strings"
)

// Status is where a payment is. It only moves up the order of Rank, so an
// event delivered twice or out of order changes a payment once.
type Status string

// The statuses of gateway/openapi.yaml's Payment.
const (
	StatusPending   Status = "pending"
	StatusFailed    Status = "failed"
	StatusSucceeded Status = "succeeded"
	StatusRefunded  Status = "refunded"
)

// Rank orders the statuses: a payment may move only to a higher rank (a
// failed attempt may still succeed; succeeded money can only go back).
func (s Status) Rank() int {
	switch s {
	case StatusPending:
		return 0
	case StatusFailed:
		return 1
	case StatusSucceeded:
		return 2
	case StatusRefunded:
		return 3
	}
	return -1
}

// ErrInvalidEvent is wrapped by a Verifier for a notification whose
// signature, age or content does not hold: nothing may change because of it.
var ErrInvalidEvent = errors.New("payment: invalid event")

// Intent is a payment as its provider sees it.
type Intent struct {
	// ID is the provider's id of the payment (a PaymentIntent's pi_...).
	ID string
	// OrderID is the order the payment was created for (its metadata).
	OrderID int64
	Status  Status
	// AmountCents is in the currency's smallest unit.
	AmountCents int64
	// Currency is ISO 4217, upper case.
	Currency string
	// ClientSecret lets the shopper's page confirm the payment with the
	// provider; empty for providers that need none.
	ClientSecret string
}

// CreateRequest asks a provider for a payment of one order.
type CreateRequest struct {
	OrderID     int64
	AmountCents int64
	Currency    string
	// IdempotencyKey makes a retried create return the same payment.
	IdempotencyKey string
}

// Provider takes money for orders. Every call may be retried: Create and
// Refund carry idempotency keys, Retrieve only reads.
type Provider interface {
	// Name is the provider's name in the API (stripe, demo).
	Name() string
	// Create asks for a payment of an order.
	Create(ctx context.Context, req CreateRequest) (Intent, error)
	// Retrieve reads a payment as the provider has it now: the active
	// query before an unpaid order is cancelled.
	Retrieve(ctx context.Context, id string) (Intent, error)
	// Refund gives a succeeded payment's money back in full. The provider
	// confirms it later with an EventRefunded.
	Refund(ctx context.Context, id, idempotencyKey string) error
}

// EventKind is what an event tells of a payment.
type EventKind string

// The kinds of event the order domain acts on; anything else is recorded
// and ignored.
const (
	EventSucceeded EventKind = "succeeded"
	EventFailed    EventKind = "failed"
	EventRefunded  EventKind = "refunded"
	EventOther     EventKind = "other"
)

// Event is one verified notification of a provider.
type Event struct {
	// ID is the provider's id of the event (a delivery repeated carries it
	// again).
	ID       string
	Provider string
	// Type is the provider's own name of the event (payment_intent.succeeded).
	Type string
	Kind EventKind
	// PaymentID is the payment the event is about.
	PaymentID string
	// OrderID is the order named by the payment's metadata, 0 when the
	// event does not say (a charge's refund: the payment id finds it).
	OrderID int64
	// AmountCents and Currency are the money the event moved, checked
	// against the payment's before anything changes.
	AmountCents int64
	Currency    string
}

// Verifier turns a provider's raw notification into an Event, or an error
// wrapping ErrInvalidEvent.
type Verifier interface {
	Verify(payload []byte, signature string) (Event, error)
}

// NormalizeCurrency is ISO 4217's upper case, whatever case a provider
// speaks (Stripe speaks lower case).
func NormalizeCurrency(c string) string { return strings.ToUpper(strings.TrimSpace(c)) }
