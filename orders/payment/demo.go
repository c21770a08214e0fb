package payment

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// DemoName is the name of the demo provider.
const DemoName = "demo"

// Demo is dev mode's provider: it takes no money. With it the shoppers' pay
// route marks an order paid as it always did; a payment asked of it stays
// pending, since no event will ever come.
type Demo struct{}

// Name implements Provider.
func (Demo) Name() string { return DemoName }

// Create implements Provider with a payment that nobody can pay.
func (Demo) Create(_ context.Context, req CreateRequest) (Intent, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Intent{}, fmt.Errorf("payment: demo id: %w", err)
	}
	return Intent{ID: "demo_" + hex.EncodeToString(b[:]), OrderID: req.OrderID, Status: StatusPending,
		AmountCents: req.AmountCents, Currency: NormalizeCurrency(req.Currency)}, nil
}

// Retrieve implements Provider: a demo payment never receives money.
func (Demo) Retrieve(_ context.Context, id string) (Intent, error) {
	return Intent{ID: id, Status: StatusPending}, nil
}

// Refund implements Provider: there is no money to give back.
func (Demo) Refund(context.Context, string, string) error { return nil }
