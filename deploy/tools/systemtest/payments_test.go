package systemtest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/orders/payment/stripepay/stripetest"
)

// startStripeSystem runs the system with Stripe as its payment provider,
// against the package's stripe-mock.
func startStripeSystem(t *testing.T, payTimeout string) *testSystem {
	t.Helper()
	return startSystem(t, map[string]string{
		"SECKILL_PAYMENT_PROVIDER":      "stripe",
		"SECKILL_STRIPE_API_BASE":       stack.StripeMock(t).URL,
		"SECKILL_STRIPE_SECRET_KEY":     devstack.StripeMockKey,
		"SECKILL_STRIPE_WEBHOOK_SECRET": stripetest.Secret,
		"SECKILL_PAY_TIMEOUT":           payTimeout,
	})
}

// webhook delivers one signed event as Stripe does: raw bytes and a
// Stripe-Signature header.
func (ts *testSystem) webhook(t *testing.T, d stripetest.Delivery) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.base+"/api/v1/payments/webhooks/stripe", bytes.NewReader(d.Body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if d.Signature != "" {
		req.Header.Set("Stripe-Signature", d.Signature)
	}
	resp, err := ts.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, header: resp.Header, raw: raw}
}

func succeededEvent(evID, piID, orderID string, amount int64) stripetest.Delivery {
	oid, _ := strconv.ParseInt(orderID, 10, 64)
	return stripetest.Sign(stripetest.Event(evID, "payment_intent.succeeded",
		stripetest.PaymentIntent(piID, oid, amount, "cny", "succeeded")), stripetest.Secret, time.Now())
}

// A sale paid through Stripe end to end: a paced crowd buys and pays
// through the provider, every success delivered twice; the shoppers who
// pay too late are refunded and their units sold to others; an operator's
// refund returns its unit once confirmed; forged deliveries change
// nothing. Then the stock balances in Redis and PostgreSQL and the sale
// report, on the operator page too, counts payments, refunds and late
// payments.
func TestPaymentsThroughStripe(t *testing.T) {
	// This test is serial (main_test.go): the on-time payers must pay, and the late one be read unpaid, within its 8 s pay timeout.
	ts := startStripeSystem(t, "8s") // long enough for the on-time payers on a busy machine
	const stock, onTime, late = 12, 8, 3
	vid := ts.createVoucher(t, stock, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))

	type buyer struct {
		user            int64
		tok, order, pay string
		amount          int64
	}
	buyers := make([]buyer, onTime+late)
	for i := range buyers {
		buyers[i].user = 41_000_000 + int64(i)
		buyers[i].tok = ts.shopper(t, buyers[i].user)
		a := ts.buy(t, vid, buyers[i].tok, 1, "")
		require.Equal(t, http.StatusAccepted, a.status, "%s", a.raw)
		buyers[i].order = fmt.Sprint(a.body["order_id"])
	}
	ts.waitPersisted(t, vid, len(buyers))

	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			b := &buyers[i]
			time.Sleep(time.Duration(i*10) * time.Millisecond) // paced
			pay := ts.do(t, http.MethodPost, "/api/v1/orders/"+b.order+"/pay", b.tok, nil, nil)
			if pay.status != http.StatusConflict {
				t.Errorf("the pay route with a provider: %d %s", pay.status, pay.raw)
			}
			a := ts.do(t, http.MethodPost, "/api/v1/orders/"+b.order+"/payments", b.tok, nil, nil)
			if a.status != http.StatusCreated {
				t.Errorf("payment of %s: %d %s", b.order, a.status, a.raw)
				return
			}
			b.pay = a.body["payment_id"].(string)
			b.amount = int64(a.body["amount_cents"].(float64))
			again := ts.do(t, http.MethodPost, "/api/v1/orders/"+b.order+"/payments", b.tok, nil, nil)
			if again.status != http.StatusOK || again.body["payment_id"] != b.pay {
				t.Errorf("the same payment again: %d %s", again.status, again.raw)
			}
			if i >= onTime {
				return // these pay after their deadline
			}
			ev := succeededEvent("evt_ok_"+b.order, b.pay, b.order, b.amount)
			for range 2 {
				if a := ts.webhook(t, ev); a.status != http.StatusOK {
					t.Errorf("webhook: %d %s", a.status, a.raw)
				}
			}
		})
	}
	wg.Wait()
	for _, b := range buyers[:onTime] {
		o := ts.waitStatus(t, b.tok, b.order, "paid")
		require.Equal(t, "succeeded", o.body["payment"].(map[string]any)["status"])
	}

	// Forged and stale deliveries: 400 invalid_signature, nothing changes.
	lateOne := buyers[onTime]
	forged := succeededEvent("evt_forged", lateOne.pay, lateOne.order, lateOne.amount)
	for _, d := range []stripetest.Delivery{
		{Body: forged.Body},
		{Body: forged.Body, Signature: stripetest.Sign(forged.Body, "whsec_forged", time.Now()).Signature},
		{Body: forged.Body, Signature: stripetest.Sign(forged.Body, stripetest.Secret, time.Now().Add(-10*time.Minute)).Signature},
		succeededEvent("evt_cheap", lateOne.pay, lateOne.order, lateOne.amount-1),
	} {
		a := ts.webhook(t, d)
		require.Equal(t, http.StatusBadRequest, a.status, "%s", a.raw)
		require.Contains(t, string(a.raw), `"invalid_signature"`)
	}
	require.Equal(t, "created", ts.do(t, http.MethodGet, "/api/v1/orders/"+lateOne.order, lateOne.tok, nil, nil).body["status"])

	// The deadline passes: stripe-mock says the late ones' intents are not
	// paid, so the sweeper cancels them; their money then arrives.
	for _, b := range buyers[onTime:] {
		ts.waitStatus(t, b.tok, b.order, "cancelled")
	}
	// A cancel puts its unit back after the order's status changes: the
	// stock is read until it has.
	require.Eventually(t, func() bool { return int64(ts.stockLeft(t, vid)) == int64(stock-onTime) },
		10*time.Second, 50*time.Millisecond, "the cancelled orders' units are back on sale")
	for _, b := range buyers[onTime:] {
		for range 2 {
			a := ts.webhook(t, succeededEvent("evt_late_"+b.order, b.pay, b.order, b.amount))
			require.Equal(t, http.StatusOK, a.status, "%s", a.raw)
		}
		ts.waitStatus(t, b.tok, b.order, "refunded")
	}
	// Their units stay on sale: others buy them all, none twice.
	for i := range stock - onTime {
		a := ts.buy(t, vid, ts.shopper(t, 42_000_000+int64(i)), 1, "")
		require.Equal(t, http.StatusAccepted, a.status, "%s", a.raw)
	}
	soldOut := ts.buy(t, vid, ts.shopper(t, 42_999_999), 1, "")
	require.Equal(t, "sold_out", soldOut.errorCode(), "%s", soldOut.raw)
	ts.waitPersisted(t, vid, len(buyers)+stock-onTime)

	// An operator refunds one paid order: still paid until Stripe confirms,
	// then refunded and its unit back on sale, once.
	r := buyers[0]
	a := ts.do(t, http.MethodPost, "/api/v1/admin/orders/"+r.order+"/refund", ts.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, a.status, "%s", a.raw)
	require.Equal(t, "paid", a.body["status"])
	refund := stripetest.Sign(stripetest.Event("evt_refund_"+r.order, "charge.refunded",
		stripetest.RefundedCharge("ch_"+r.order, r.pay, r.amount, "cny")), stripetest.Secret, time.Now())
	for range 2 {
		require.Equal(t, http.StatusOK, ts.webhook(t, refund).status)
	}
	ts.waitStatus(t, r.tok, r.order, "refunded")
	require.Eventually(t, func() bool { return ts.stockLeft(t, vid) == 1 }, 10*time.Second, 50*time.Millisecond, "the refunded unit is back once")
	ts.checkInvariants(t, vid, 1)

	rep := ts.saleReport(t, vid)
	require.Equal(t, int64(onTime+late), rep.Payments)
	require.Equal(t, int64(late+1), rep.Refunds)
	require.Equal(t, int64(late), rep.LatePayments)

	// The metrics count each event once by its result.
	fams := ts.scrape(t)
	ev := func(typ, result string) float64 {
		return counter(t, fams, "seckill_payment_events_total", "type", typ, "result", result)
	}
	require.Equal(t, float64(onTime), ev("payment_intent.succeeded", "applied"))
	require.Equal(t, float64(late), ev("payment_intent.succeeded", "late_refund"))
	require.Equal(t, float64(onTime+late), ev("payment_intent.succeeded", "duplicate"))
	require.Equal(t, 1.0, ev("payment_intent.succeeded", "rejected"), "the underpaid one")
	require.Equal(t, 3.0, ev("unknown", "invalid_signature"))
	require.Equal(t, 1.0, ev("charge.refunded", "applied"))
	require.Equal(t, float64(late), counter(t, fams, "seckill_payment_late_refunds_total"))
	require.Equal(t, float64(onTime+late), counter(t, fams, "seckill_payments_total", "status", "pending"))
	require.Equal(t, float64(onTime+late), counter(t, fams, "seckill_payments_total", "status", "succeeded"))
	require.Equal(t, 1.0, counter(t, fams, "seckill_payments_total", "status", "refunded"))

	// The operator page shows them.
	b := openSaleReport(t, ts, vid)
	b.waitJS("the report is shown", fmt.Sprintf(`document.querySelector('#report').dataset.voucherId === %q && %s !== undefined`, vid, figure("payments_refunds")))
	require.Equal(t, fmt.Sprintf("%d / %d", onTime+late, late+1), b.eval(figure("payments_refunds")))
	require.Equal(t, strconv.Itoa(late), b.eval(figure("late_payments")))
}
