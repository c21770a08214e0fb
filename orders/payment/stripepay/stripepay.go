// Package stripepay is the Stripe adapter of orders/payment: PaymentIntents
// through Stripe's Go SDK, refunds, and the check of Stripe's signed
// webhook events.
package stripepay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/flashsale/seckill/orders/payment"
)

// Name is the provider's name in the API.
const Name = "stripe"

// Tolerance is how old a signed event may be: Stripe's own default, so a
// replay of a captured delivery is refused after five minutes.
const Tolerance = 300 * time.Second

// metadataOrderID is the intent's metadata key that names its order.
const metadataOrderID = "order_id"

// Config is what New builds the adapter from.
type Config struct {
	// SecretKey is the account's API key (sk_...).
	SecretKey string
	// WebhookSecret checks the Stripe-Signature of events (whsec_...).
	WebhookSecret string
	// APIBase, when set, is where the SDK sends its requests instead of
	// Stripe's API (Stripe's mock server in dev mode and tests).
	APIBase string
	// HTTPClient, when nil, is a client with a 10 s timeout.
	HTTPClient *http.Client
}

// Stripe implements payment.Provider and payment.Verifier.
type Stripe struct {
	sc            *stripe.Client
	webhookSecret string
}

// The adapter is the seam's provider, verifier and authorizer.
var (
	_ payment.Provider   = (*Stripe)(nil)
	_ payment.Verifier   = (*Stripe)(nil)
	_ payment.Authorizer = (*Stripe)(nil)
)

// New returns the adapter. It makes no request.
func New(cfg Config) (*Stripe, error) {
	if cfg.SecretKey == "" {
		return nil, errors.New("stripepay: no secret key")
	}
	if cfg.WebhookSecret == "" {
		return nil, errors.New("stripepay: no webhook secret")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	bc := &stripe.BackendConfig{HTTPClient: cfg.HTTPClient, LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelError}}
	if cfg.APIBase != "" {
		bc.URL = stripe.String(cfg.APIBase)
	}
	sc := stripe.NewClient(cfg.SecretKey, stripe.WithBackends(stripe.NewBackendsWithConfig(bc)))
	return &Stripe{sc: sc, webhookSecret: cfg.WebhookSecret}, nil
}

// Name implements payment.Provider.
func (s *Stripe) Name() string { return Name }

// Create implements payment.Provider with a PaymentIntent whose metadata
// names the order, so that its events find it.
func (s *Stripe) Create(ctx context.Context, req payment.CreateRequest) (payment.Intent, error) {
	return s.create(ctx, req, false)
}

// Authorize implements payment.Authorizer: the same PaymentIntent with
// capture_method=manual, so the card is only held.
func (s *Stripe) Authorize(ctx context.Context, req payment.CreateRequest) (payment.Intent, error) {
	return s.create(ctx, req, true)
}

// Capture implements payment.Authorizer.
func (s *Stripe) Capture(ctx context.Context, id string, amountCents int64, currency, idempotencyKey string) (payment.Intent, error) {
	amount, err := toStripe(amountCents, payment.NormalizeCurrency(currency))
	if err != nil {
		return payment.Intent{}, err
	}
	params := &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(amount)}
	if idempotencyKey != "" {
		params.SetIdempotencyKey(idempotencyKey)
	}
	pi, err := s.sc.V1PaymentIntents.Capture(ctx, id, params)
	if err != nil {
		return payment.Intent{}, fmt.Errorf("stripepay: capture payment intent %s: %w", id, err)
	}
	return intentOf(pi), nil
}

// Release implements payment.Authorizer by cancelling the intent.
func (s *Stripe) Release(ctx context.Context, id, idempotencyKey string) error {
	params := &stripe.PaymentIntentCancelParams{}
	if idempotencyKey != "" {
		params.SetIdempotencyKey(idempotencyKey)
	}
	if _, err := s.sc.V1PaymentIntents.Cancel(ctx, id, params); err != nil {
		return fmt.Errorf("stripepay: release payment intent %s: %w", id, err)
	}
	return nil
}

func (s *Stripe) create(ctx context.Context, req payment.CreateRequest, hold bool) (payment.Intent, error) {
	amount, err := toStripe(req.AmountCents, payment.NormalizeCurrency(req.Currency))
	if err != nil {
		return payment.Intent{}, err
	}
	params := &stripe.PaymentIntentCreateParams{
		Amount:   stripe.Int64(amount),
		Currency: stripe.String(lowerCurrency(req.Currency)),
		Metadata: map[string]string{metadataOrderID: strconv.FormatInt(req.OrderID, 10)},
	}
	if hold {
		params.CaptureMethod = stripe.String(string(stripe.PaymentIntentCaptureMethodManual))
	}
	if req.IdempotencyKey != "" {
		params.SetIdempotencyKey(req.IdempotencyKey)
	}
	pi, err := s.sc.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		return payment.Intent{}, fmt.Errorf("stripepay: create payment intent of order %d: %w", req.OrderID, err)
	}
	in := intentOf(pi)
	// Stripe's mock server answers fixtures, not what was asked; the order
	// is what this intent was created for either way.
	in.OrderID = req.OrderID
	return in, nil
}

// Retrieve implements payment.Provider.
func (s *Stripe) Retrieve(ctx context.Context, id string) (payment.Intent, error) {
	pi, err := s.sc.V1PaymentIntents.Retrieve(ctx, id, nil)
	if err != nil {
		return payment.Intent{}, fmt.Errorf("stripepay: retrieve payment intent %s: %w", id, err)
	}
	return intentOf(pi), nil
}

// Refund implements payment.Provider: a full refund of the intent's charge.
func (s *Stripe) Refund(ctx context.Context, id, idempotencyKey string) error {
	params := &stripe.RefundCreateParams{PaymentIntent: stripe.String(id)}
	if idempotencyKey != "" {
		params.SetIdempotencyKey(idempotencyKey)
	}
	if _, err := s.sc.V1Refunds.Create(ctx, params); err != nil {
		return fmt.Errorf("stripepay: refund payment intent %s: %w", id, err)
	}
	return nil
}

// Verify implements payment.Verifier with the SDK's check of the
// Stripe-Signature header (HMAC-SHA256 of "t.payload", at most Tolerance
// old, an api_version of the SDK's release train).
func (s *Stripe) Verify(payload []byte, signature string) (payment.Event, error) {
	ev, err := webhook.ConstructEventWithTolerance(payload, signature, s.webhookSecret, Tolerance)
	if err != nil {
		return payment.Event{}, fmt.Errorf("%w: %w", payment.ErrInvalidEvent, err)
	}
	out := payment.Event{ID: ev.ID, Provider: Name, Type: string(ev.Type), Kind: payment.EventOther}
	if ev.Data == nil {
		return out, nil
	}
	switch ev.Type {
	case "payment_intent.succeeded", "payment_intent.payment_failed":
		var pi stripe.PaymentIntent
		if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil {
			return payment.Event{}, fmt.Errorf("%w: payment intent: %w", payment.ErrInvalidEvent, err)
		}
		in := intentOf(&pi)
		out.Kind = payment.EventFailed
		if ev.Type == "payment_intent.succeeded" {
			out.Kind = payment.EventSucceeded
		}
		out.PaymentID, out.OrderID, out.AmountCents, out.Currency = in.ID, in.OrderID, in.AmountCents, in.Currency
		if ev.Type == "payment_intent.succeeded" && pi.AmountReceived > 0 {
			// A captured hold received less than it held: the money moved
			// is what was received.
			out.AmountCents = fromStripe(pi.AmountReceived, in.Currency)
		}
	case "charge.refunded":
		var ch stripe.Charge
		if err := json.Unmarshal(ev.Data.Raw, &ch); err != nil {
			return payment.Event{}, fmt.Errorf("%w: charge: %w", payment.ErrInvalidEvent, err)
		}
		if ch.PaymentIntent == nil || ch.PaymentIntent.ID == "" {
			return out, nil // a charge made without an intent is none of ours
		}
		if !ch.Refunded || ch.AmountRefunded != ch.Amount {
			return out, nil // a partial refund is not the full refund the order waits for
		}
		out.Kind = payment.EventRefunded
		out.Currency = payment.NormalizeCurrency(string(ch.Currency))
		out.PaymentID, out.AmountCents = ch.PaymentIntent.ID, fromStripe(ch.AmountRefunded, out.Currency)
		out.OrderID = orderIDOf(ch.Metadata)
	}
	if out.Kind != payment.EventOther && out.PaymentID == "" {
		return payment.Event{}, fmt.Errorf("%w: %s names no payment intent", payment.ErrInvalidEvent, ev.Type)
	}
	return out, nil
}

func intentOf(pi *stripe.PaymentIntent) payment.Intent {
	currency := payment.NormalizeCurrency(string(pi.Currency))
	return payment.Intent{
		ID:           pi.ID,
		OrderID:      orderIDOf(pi.Metadata),
		Status:       statusOf(pi.Status),
		AmountCents:  fromStripe(pi.Amount, currency),
		Currency:     currency,
		ClientSecret: pi.ClientSecret,
	}
}

// statusOf maps an intent's status: only succeeded money counts, and a
// cancelled intent will never take any.
func statusOf(s stripe.PaymentIntentStatus) payment.Status {
	switch s {
	case stripe.PaymentIntentStatusSucceeded:
		return payment.StatusSucceeded
	case stripe.PaymentIntentStatusCanceled:
		return payment.StatusFailed
	}
	return payment.StatusPending
}

func orderIDOf(md map[string]string) int64 {
	id, err := strconv.ParseInt(md[metadataOrderID], 10, 64)
	if err != nil || id <= 0 {
		return 0
	}
	return id
}

func lowerCurrency(c string) string {
	b := []byte(payment.NormalizeCurrency(c))
	for i := range b {
		b[i] |= 0x20
	}
	return string(b)
}
