package stripepay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/orders/payment/stripepay"
	"github.com/flashsale/seckill/orders/payment/stripepay/stripetest"
)

// mockURL is the package's private stripe-mock, started by TestMain.
var mockURL string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "seckill-stripepay-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	mock, err := devstack.StartStripeMock(ctx, devstack.StripeMockOptions{Dir: dir})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "stripepay tests need stripe-mock (make test-deps):", err)
		return 1
	}
	defer mock.Stop(context.Background())
	mockURL = mock.URL
	return m.Run()
}

func newStripe(t *testing.T) *stripepay.Stripe {
	t.Helper()
	s, err := stripepay.New(stripepay.Config{SecretKey: devstack.StripeMockKey, WebhookSecret: stripetest.Secret, APIBase: mockURL})
	require.NoError(t, err)
	return s
}

// The SDK's requests reach Stripe's mock server, whose answers are shaped
// by Stripe's own API description: a payment, read back, refunded; a hold,
// captured or released.
func TestPaymentIntents(t *testing.T) {
	s := newStripe(t)
	ctx := t.Context()
	in, err := s.Create(ctx, payment.CreateRequest{OrderID: 77, AmountCents: 990, Currency: "CNY", IdempotencyKey: "k-77-1"})
	require.NoError(t, err)
	require.Regexp(t, `^pi_`, in.ID)
	require.Equal(t, int64(77), in.OrderID)
	require.Equal(t, int64(990), in.AmountCents, "the amount asked for")
	require.Equal(t, "CNY", in.Currency, "ISO 4217's upper case from Stripe's lower")
	require.Equal(t, payment.StatusPending, in.Status, "a new intent waits for its money")
	require.NotEmpty(t, in.ClientSecret)

	got, err := s.Retrieve(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, in.ID, got.ID)
	require.NoError(t, s.Refund(ctx, in.ID, "refund-"+in.ID))

	hold, err := s.Authorize(ctx, payment.CreateRequest{OrderID: 78, AmountCents: 500, Currency: "CNY"})
	require.NoError(t, err)
	_, err = s.Capture(ctx, hold.ID, hold.AmountCents, hold.Currency, "capture-"+hold.ID)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, hold.ID, "release-"+hold.ID))

	_, err = stripepay.New(stripepay.Config{WebhookSecret: "x"})
	require.Error(t, err, "no key")
	_, err = stripepay.New(stripepay.Config{SecretKey: "x"})
	require.Error(t, err, "no webhook secret")
}

func TestVerify(t *testing.T) {
	s := newStripe(t)
	sign := func(body []byte) stripetest.Delivery { return stripetest.Sign(body, stripetest.Secret, time.Now()) }
	verify := func(d stripetest.Delivery) (payment.Event, error) { return s.Verify(d.Body, d.Signature) }

	ev, err := verify(sign(stripetest.Event("evt_1", "payment_intent.payment_failed",
		stripetest.PaymentIntent("pi_1", 5, 990, "cny", "requires_payment_method"))))
	require.NoError(t, err)
	require.Equal(t, payment.Event{ID: "evt_1", Provider: "stripe", Type: "payment_intent.payment_failed", Kind: payment.EventFailed,
		PaymentID: "pi_1", OrderID: 5, AmountCents: 990, Currency: "CNY"}, ev)

	ev, err = verify(sign(stripetest.Event("evt_2", "charge.refunded", stripetest.RefundedCharge("ch_1", "pi_1", 990, "cny"))))
	require.NoError(t, err)
	require.Equal(t, payment.EventRefunded, ev.Kind)
	require.Equal(t, "pi_1", ev.PaymentID)

	partial := stripetest.RefundedCharge("ch_1", "pi_1", 990, "cny")
	partial["amount_refunded"], partial["refunded"] = 100, false
	ev, err = verify(sign(stripetest.Event("evt_3", "charge.refunded", partial)))
	require.NoError(t, err)
	require.Equal(t, payment.EventOther, ev.Kind, "a partial refund is not the full one an order waits for")

	// A captured hold received less than it held: the event names what
	// was received.
	held := stripetest.PaymentIntent("pi_2", 0, 500, "cny", "succeeded")
	held["amount_received"] = 250
	ev, err = verify(sign(stripetest.Event("evt_5", "payment_intent.succeeded", held)))
	require.NoError(t, err)
	require.Equal(t, payment.EventSucceeded, ev.Kind)
	require.Equal(t, int64(250), ev.AmountCents)

	ev, err = verify(sign(stripetest.Event("evt_4", "customer.created", map[string]any{"id": "cus_1", "object": "customer"})))
	require.NoError(t, err)
	require.Equal(t, payment.EventOther, ev.Kind)

	// An event of another API release train is refused, as the SDK does.
	var old map[string]any
	require.NoError(t, json.Unmarshal(stripetest.Event("evt_5", "payment_intent.succeeded",
		stripetest.PaymentIntent("pi_1", 5, 990, "cny", "succeeded")), &old))
	old["api_version"] = "2024-06-20"
	body, err := json.Marshal(old)
	require.NoError(t, err)
	_, err = verify(sign(body))
	require.ErrorIs(t, err, payment.ErrInvalidEvent)

	// A success that names no intent cannot be acted on.
	_, err = verify(sign(stripetest.Event("evt_6", "payment_intent.succeeded", map[string]any{"object": "payment_intent", "amount": 1})))
	require.ErrorIs(t, err, payment.ErrInvalidEvent)
}

// TestVerifyInISOUnits: an ISK event's amount, in Stripe's hundredths of
// a krona, is read back in whole krona (ISO's unit, the record's); a JPY
// one is yen either way.
func TestVerifyInISOUnits(t *testing.T) {
	s := newStripe(t)
	for _, c := range []struct {
		currency     string
		stripe, want int64
	}{{"isk", 50000, 500}, {"jpy", 1200, 1200}} {
		d := stripetest.Sign(stripetest.Event("evt_"+c.currency, "payment_intent.succeeded",
			stripetest.PaymentIntent("pi_"+c.currency, 9, c.stripe, c.currency, "succeeded")), stripetest.Secret, time.Now())
		ev, err := s.Verify(d.Body, d.Signature)
		require.NoError(t, err)
		require.Equal(t, c.want, ev.AmountCents, c.currency)
	}
}
