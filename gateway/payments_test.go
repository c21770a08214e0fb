package gateway

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/orders/payment/stripepay"
	"github.com/flashsale/seckill/orders/payment/stripepay/stripetest"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// fakePayments records what the routes hand the lifecycle (whose own tests
// run against stripe-mock, PostgreSQL and Redis).
type fakePayments struct {
	mu       sync.Mutex
	events   []payment.Event
	started  map[int64]bool
	mismatch bool
}

func (f *fakePayments) StartPayment(_ context.Context, userID, orderID int64) (orders.Payment, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if userID != 42 {
		return orders.Payment{}, false, apperr.ErrNotFound
	}
	created := !f.started[orderID]
	f.started[orderID] = true
	return orders.Payment{ID: "pi_1", OrderID: orderID, Provider: "stripe", Status: payment.StatusPending,
		AmountCents: 500, Currency: "CNY", ClientSecret: "pi_1_secret"}, created, nil
}

func (f *fakePayments) HandleEvent(_ context.Context, ev payment.Event) (orders.EventOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mismatch {
		return orders.EventOutcome{}, orders.ErrPaymentMismatch
	}
	f.events = append(f.events, ev)
	return orders.EventOutcome{Result: orders.EventApplied}, nil
}

func (f *fakePayments) Refund(_ context.Context, orderID int64) (orders.Order, error) {
	return orders.Order{ID: orderID, UserID: 42, VoucherID: 1, Quantity: 1, Status: orders.StatusPaid}, nil
}

func (f *fakePayments) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events)
}

func setupPayments(t *testing.T, withStripe bool) (*bundle, *fakePayments) {
	t.Helper()
	pays := &fakePayments{started: map[int64]bool{}}
	b := setup(t, func(_ *Config, d *testDeps) {
		d.Payments = pays
		if withStripe {
			st, err := stripepay.New(stripepay.Config{SecretKey: "sk_test_x", WebhookSecret: stripetest.Secret})
			require.NoError(t, err)
			d.StripeEvents = st
		}
	})
	return b, pays
}

func TestStartPaymentRoute(t *testing.T) {
	t.Parallel()
	b, _ := setupPayments(t, true)
	resp, body := b.do(t, "POST", "/api/v1/orders/11/payments", "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 201, resp.StatusCode, string(body))
	p := decode[api.Payment](t, body)
	require.Equal(t, api.Payment{PaymentID: "pi_1", OrderID: "11", Provider: "stripe", AmountCents: 500, Currency: "CNY",
		Status: "pending", ClientSecret: "pi_1_secret"}, p)
	resp, _ = b.do(t, "POST", "/api/v1/orders/11/payments", "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 200, resp.StatusCode, "the same pending payment again")
	resp, body = b.do(t, "POST", "/api/v1/orders/11/payments", "", "Authorization", bearerOf(b.shopper2))
	requireAPIError(t, resp, body, 404, "not_found")
	resp, body = b.do(t, "POST", "/api/v1/orders/11/payments", "")
	requireAPIError(t, resp, body, 401, "unauthenticated")
	resp, body = b.do(t, "POST", "/api/v1/orders/x/payments", "", "Authorization", bearerOf(b.shopper))
	requireAPIError(t, resp, body, 400, "invalid_input")
}

// The webhook takes Stripe's signed deliveries byte for byte, refuses the
// rest with 400 invalid_signature, and never rate-limits the provider.
func TestStripeWebhookRoute(t *testing.T) {
	t.Parallel()
	b, pays := setupPayments(t, true)
	const path = "/api/v1/payments/webhooks/stripe"
	// Stripe's bodies are pretty-printed: the signature is over these bytes.
	body := "{\n  \"id\": \"evt_1\",\n  \"object\": \"event\",\n  \"api_version\": \"2025-08-27.basil\",\n  \"type\": \"payment_intent.succeeded\",\n" +
		"  \"data\": {\"object\": {\"id\": \"pi_1\", \"object\": \"payment_intent\", \"amount\": 500, \"currency\": \"cny\", \"status\": \"succeeded\", \"metadata\": {\"order_id\": \"11\"}}}\n}"
	d := stripetest.Sign([]byte(body), stripetest.Secret, time.Now())

	resp, raw := b.do(t, "POST", path, body, HeaderStripeSignature, d.Signature)
	require.Equal(t, 200, resp.StatusCode, string(raw))
	require.Equal(t, api.WebhookAnswer{Received: true, Result: "applied"}, decode[api.WebhookAnswer](t, raw))
	require.Equal(t, payment.Event{ID: "evt_1", Provider: "stripe", Type: "payment_intent.succeeded", Kind: payment.EventSucceeded,
		PaymentID: "pi_1", OrderID: 11, AmountCents: 500, Currency: "CNY"}, pays.events[0])

	stale := stripetest.Sign([]byte(body), stripetest.Secret, time.Now().Add(-10*time.Minute))
	for name, h := range map[string][]string{
		"no signature":   nil,
		"another secret": {HeaderStripeSignature, stripetest.Sign([]byte(body), "whsec_forged", time.Now()).Signature},
		"stale":          {HeaderStripeSignature, stale.Signature},
		"garbage":        {HeaderStripeSignature, "t=1,v1=00"},
	} {
		t.Run(name, func(t *testing.T) {
			resp, raw := b.do(t, "POST", path, body, h...)
			requireAPIError(t, resp, raw, 400, "invalid_signature")
		})
	}
	resp, raw = b.do(t, "POST", path, body+" ", HeaderStripeSignature, d.Signature)
	requireAPIError(t, resp, raw, 400, "invalid_signature")
	require.Equal(t, 1, pays.count(), "nothing refused reached the orders")

	pays.mu.Lock()
	pays.mismatch = true
	pays.mu.Unlock()
	resp, raw = b.do(t, "POST", path, body, HeaderStripeSignature, d.Signature)
	requireAPIError(t, resp, raw, 400, "invalid_signature")
	pays.mu.Lock()
	pays.mismatch = false
	pays.mu.Unlock()

	// The provider's retries from one address are never refused.
	for range 300 {
		resp, _ := b.do(t, "POST", path, body, HeaderStripeSignature, d.Signature)
		require.Equal(t, 200, resp.StatusCode)
	}

	// Without Stripe as the provider, every delivery is unsigned.
	nb, npays := setupPayments(t, false)
	resp, raw = nb.do(t, "POST", path, body, HeaderStripeSignature, d.Signature)
	requireAPIError(t, resp, raw, 400, "invalid_signature")
	require.Equal(t, 0, npays.count())
}

func TestRefundRoute(t *testing.T) {
	t.Parallel()
	b, _ := setupPayments(t, true)
	resp, body := b.do(t, "POST", "/api/v1/admin/orders/11/refund", "", "Authorization", bearerOf(testAdminToken))
	require.Equal(t, 200, resp.StatusCode, string(body))
	require.Equal(t, "paid", decode[api.Order](t, body).Status)
	resp, body = b.do(t, "POST", "/api/v1/admin/orders/11/refund", "", "Authorization", bearerOf(b.shopper))
	requireAPIError(t, resp, body, 403, "forbidden")
}

// Stripe's deliveries may be larger than the API's own bodies; every other
// route still refuses a body over the limit.
func TestWebhookTakesLargerBodies(t *testing.T) {
	t.Parallel()
	b, pays := setupPayments(t, true)
	pad := strings.Repeat(" ", 20<<10)
	body := `{"id":"evt_big","object":"event","api_version":"2025-08-27.basil","type":"payment_intent.succeeded","data":{"object":` +
		`{"id":"pi_1","object":"payment_intent","amount":500,"currency":"cny","status":"succeeded","metadata":{"order_id":"11"}}},"pad":"` + pad + `"}`
	d := stripetest.Sign([]byte(body), stripetest.Secret, time.Now())
	resp, raw := b.do(t, "POST", "/api/v1/payments/webhooks/stripe", body, HeaderStripeSignature, d.Signature)
	require.Equal(t, 200, resp.StatusCode, string(raw))
	require.Equal(t, 1, pays.count())

	resp, raw = b.do(t, "POST", "/api/v1/users", `{"username":"abc","password":"`+pad+`"}`)
	requireAPIError(t, resp, raw, 413, "too_large")
	resp, raw = b.do(t, "POST", "/api/v1/payments/webhooks/stripe", strings.Repeat(" ", WebhookBodyLimit+1), HeaderStripeSignature, d.Signature)
	require.Equal(t, 413, resp.StatusCode, string(raw))
}
