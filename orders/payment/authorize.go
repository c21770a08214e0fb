package payment

import "context"

// Authorizer holds money without taking it (a card authorisation) and
// later takes it or lets it go: the seam a sale by draw needs to charge only
// its winners. A provider that cannot hold money does not implement it.
type Authorizer interface {
	// Authorize asks for a payment that holds the amount until Capture or
	// Release (Stripe: a PaymentIntent with capture_method=manual).
	Authorize(ctx context.Context, req CreateRequest) (Intent, error)
	// Capture takes amountCents (in currency's ISO 4217 minor unit, as
	// every amount here) of the held amount (a winner who buys what they
	// bought); the rest of the hold is let go with it.
	Capture(ctx context.Context, id string, amountCents int64, currency, idempotencyKey string) (Intent, error)
	// Release lets the hold go without taking anything (everyone else).
	Release(ctx context.Context, id, idempotencyKey string) error
}
