package orders_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/orders/payment/stripepay"
	"github.com/flashsale/seckill/orders/payment/stripepay/stripetest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// payEnv is lifeEnv with payments through Stripe's SDK against a private
// stripe-mock; events are delivered as Stripe delivers them, signed.
type payEnv struct {
	*lifeEnv
	stripe *stripepay.Stripe
	evSeq  atomic.Int64
}

func newPayEnv(t testing.TB, total int64, payTimeout time.Duration, mock *devstack.StripeMock) *payEnv {
	t.Helper()
	e := &payEnv{lifeEnv: newLifeEnv(t, seckill.KindSeckill, total, 1, payTimeout)}
	var err error
	e.stripe, err = stripepay.New(stripepay.Config{SecretKey: devstack.StripeMockKey, WebhookSecret: stripetest.Secret, APIBase: mock.URL})
	require.NoError(t, err)
	e.life = orders.NewLifecycle(orders.LifecycleConfig{Record: e.store, Stock: e.stock, Events: e.events, Log: testLog(t),
		Payments: e.store, Provider: e.stripe})
	return e
}

// deliver sends one signed event through the adapter's check to the
// lifecycle, as the webhook route does.
func (e *payEnv) deliver(t testing.TB, d stripetest.Delivery) (orders.EventOutcome, error) {
	t.Helper()
	ev, err := e.stripe.Verify(d.Body, d.Signature)
	if err != nil {
		return orders.EventOutcome{}, err
	}
	return e.life.HandleEvent(e.ctx, ev)
}

func (e *payEnv) succeeded(p orders.Payment) stripetest.Delivery {
	id := fmt.Sprintf("evt_ok_%s", p.ID)
	return stripetest.Sign(stripetest.Event(id, "payment_intent.succeeded",
		stripetest.PaymentIntent(p.ID, p.OrderID, p.AmountCents, p.Currency, "succeeded")), stripetest.Secret, time.Now())
}

func (e *payEnv) failed(p orders.Payment) stripetest.Delivery {
	id := fmt.Sprintf("evt_fail_%d_%s", e.evSeq.Add(1), p.ID)
	return stripetest.Sign(stripetest.Event(id, "payment_intent.payment_failed",
		stripetest.PaymentIntent(p.ID, p.OrderID, p.AmountCents, p.Currency, "requires_payment_method")), stripetest.Secret, time.Now())
}

func (e *payEnv) refunded(p orders.Payment) stripetest.Delivery {
	id := fmt.Sprintf("evt_refund_%s", p.ID)
	return stripetest.Sign(stripetest.Event(id, "charge.refunded",
		stripetest.RefundedCharge("ch_"+p.ID, p.ID, p.AmountCents, p.Currency)), stripetest.Secret, time.Now())
}

func (e *payEnv) eventRows(t testing.TB, orderID int64) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM payment_events WHERE order_id = $1`, orderID).Scan(&n))
	return n
}

// A crowd pays through the provider: every shopper asks for a payment
// twice at once (one payment), its success is delivered twice at once and a
// stale failure after it. Every order is paid exactly once, announced once,
// and the stock balances in Redis and PostgreSQL.
func TestPaymentsCrowdPaysOnce(t *testing.T) {
	t.Parallel()
	const n = 60
	e := newPayEnv(t, n+5, time.Minute, stack.StripeMock(t))
	rs := e.buy(t, n, 1)

	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // paced, not one burst
			var got [2]orders.Payment
			var made [2]bool
			var inner sync.WaitGroup
			for i := range 2 {
				inner.Go(func() {
					p, created, err := e.life.StartPayment(e.ctx, r.UserID, r.OrderID)
					if err != nil {
						t.Errorf("start payment of %d: %v", r.OrderID, err)
					}
					got[i], made[i] = p, created
				})
			}
			inner.Wait()
			if got[0].ID != got[1].ID || made[0] == made[1] {
				t.Errorf("order %d: two asks made %v, payments %q %q", r.OrderID, made, got[0].ID, got[1].ID)
				return
			}
			p := got[0]
			if p.AmountCents != 250 || p.Currency != "CNY" || p.Status != payment.StatusPending || p.ClientSecret == "" {
				t.Errorf("payment %+v", p)
			}
			ok := e.succeeded(p)
			var deliveries sync.WaitGroup
			for range 2 {
				deliveries.Go(func() {
					if _, err := e.deliver(t, ok); err != nil {
						t.Errorf("deliver success of %d: %v", r.OrderID, err)
					}
				})
			}
			deliveries.Wait()
			out, err := e.deliver(t, e.failed(p))
			if err != nil || out.Result != orders.EventStale {
				t.Errorf("a failure after the success: %+v %v", out, err)
			}
		})
	}
	wg.Wait()

	for _, r := range rs {
		o := e.order(t, r.OrderID)
		require.Equal(t, orders.StatusPaid, o.Status)
		require.NotNil(t, o.Payment)
		require.Equal(t, payment.StatusSucceeded, o.Payment.Status)
		require.Equal(t, []orders.Status{orders.StatusCreated, orders.StatusPaid}, e.events.eventsFor(r.OrderID), "announced once")
		require.Equal(t, 2, e.eventRows(t, r.OrderID), "each event recorded once")
		var payments int
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM payments WHERE order_id = $1`, r.OrderID).Scan(&payments))
		require.Equal(t, 1, payments, "one payment per order, however often it was asked for")
	}
	st := e.check(t)
	require.Equal(t, int64(n), st.Orders[orders.StatusPaid])

	// The pay route is the provider's now.
	_, err := e.life.Pay(e.ctx, rs[0].UserID, rs[0].OrderID)
	require.ErrorIs(t, err, apperr.ErrConflict)
	_, _, err = e.life.StartPayment(e.ctx, rs[0].UserID, rs[0].OrderID)
	require.ErrorIs(t, err, apperr.ErrConflict, "a paid order takes no new payment")
	_, _, err = e.life.StartPayment(e.ctx, rs[1].UserID, rs[0].OrderID)
	require.ErrorIs(t, err, apperr.ErrNotFound, "someone else's order")
}

// Forged, stale and mismatched events change nothing and are not recorded.
func TestPaymentEventsRefused(t *testing.T) {
	t.Parallel()
	e := newPayEnv(t, 3, time.Minute, stack.StripeMock(t))
	r := e.buy(t, 1, 1)[0]
	p, created, err := e.life.StartPayment(e.ctx, r.UserID, r.OrderID)
	require.NoError(t, err)
	require.True(t, created)

	body := stripetest.Event("evt_forged", "payment_intent.succeeded", stripetest.PaymentIntent(p.ID, p.OrderID, p.AmountCents, "CNY", "succeeded"))
	for name, d := range map[string]stripetest.Delivery{
		"another secret": stripetest.Sign(body, "whsec_other", time.Now()),
		"too old":        stripetest.Sign(body, stripetest.Secret, time.Now().Add(-stripepay.Tolerance-time.Minute)),
		"no signature":   {Body: body},
		"body changed":   {Body: append([]byte(" "), body...), Signature: stripetest.Sign(body, stripetest.Secret, time.Now()).Signature},
	} {
		_, err := e.deliver(t, d)
		require.ErrorIs(t, err, payment.ErrInvalidEvent, name)
	}
	for name, pi := range map[string]map[string]any{
		"amount":   stripetest.PaymentIntent(p.ID, p.OrderID, p.AmountCents-1, "CNY", "succeeded"),
		"currency": stripetest.PaymentIntent(p.ID, p.OrderID, p.AmountCents, "USD", "succeeded"),
		"order":    stripetest.PaymentIntent(p.ID, p.OrderID+1, p.AmountCents, "CNY", "succeeded"),
	} {
		_, err := e.deliver(t, stripetest.Sign(stripetest.Event("evt_"+name, "payment_intent.succeeded", pi), stripetest.Secret, time.Now()))
		require.ErrorIs(t, err, orders.ErrPaymentMismatch, name)
	}
	o := e.order(t, r.OrderID)
	require.Equal(t, orders.StatusCreated, o.Status)
	require.Equal(t, payment.StatusPending, o.Payment.Status)
	require.Equal(t, 0, e.eventRows(t, r.OrderID))

	// A payment nobody made here is recorded and ignored.
	out, err := e.deliver(t, stripetest.Sign(stripetest.Event("evt_stranger", "payment_intent.succeeded",
		stripetest.PaymentIntent("pi_stranger", 0, 100, "CNY", "succeeded")), stripetest.Secret, time.Now()))
	require.NoError(t, err)
	require.Equal(t, orders.EventIgnored, out.Result)
}

// The race decided by money: holds expire while their money arrives. Money
// before the sweeper's cancel pays the order; money after it is refunded at
// once and the order ends refunded, its unit staying with whoever bought
// it since. No payment is lost, none kept twice, and the stock balances.
func TestLatePaymentsRefunded(t *testing.T) {
	t.Parallel()
	const n = 80
	e := newPayEnv(t, n, 800*time.Millisecond, stack.StripeMock(t))
	metricsReg := newRegistry()
	pm, err := orders.NewPaymentMetrics(metricsReg)
	require.NoError(t, err)
	e.life = orders.NewLifecycle(orders.LifecycleConfig{Record: e.store, Stock: e.stock, Events: e.events, Log: testLog(t),
		Payments: e.store, Provider: e.stripe, PaymentMetrics: pm})
	rs := e.buy(t, n, 1)
	pays := make([]orders.Payment, n)
	for i, r := range rs {
		var err error
		pays[i], _, err = e.life.StartPayment(e.ctx, r.UserID, r.OrderID)
		require.NoError(t, err)
	}
	deadline := e.order(t, rs[n-1].OrderID).PayDeadline
	time.Sleep(time.Until(deadline) - 100*time.Millisecond)

	var wg sync.WaitGroup
	for _, p := range pays {
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
			if _, err := e.deliver(t, e.succeeded(p)); err != nil {
				t.Errorf("deliver %s: %v", p.ID, err)
			}
		})
	}
	sweeper := orders.NewSweeper(orders.SweeperConfig{Lifecycle: e.life, Interval: 20 * time.Millisecond, Batch: 10, Log: testLog(t)})
	for range 2 {
		wg.Go(func() {
			for end := time.Now().Add(700 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				sweeper.Sweep(e.ctx)
			}
		})
	}
	wg.Wait()
	sweeper.Sweep(e.ctx) // refunds whose asking raced the end

	var paid, refunded int
	for _, r := range rs {
		o := e.order(t, r.OrderID)
		switch o.Status {
		case orders.StatusPaid:
			paid++
			require.Equal(t, []orders.Status{orders.StatusCreated, orders.StatusPaid}, e.events.eventsFor(r.OrderID))
		case orders.StatusRefunded:
			refunded++
			// The shopper is told the refund; the cancel too, unless the
			// money came before the cancel's stock was back in Redis
			// (whoever gives the stock back announces the order as it is).
			got := e.events.eventsFor(r.OrderID)
			require.Equal(t, 1, count(got, orders.StatusRefunded), "told of the refund once: %v", got)
			require.LessOrEqual(t, count(got, orders.StatusCancelled), 1, "told of the cancel at most once: %v", got)
		default:
			t.Fatalf("order %d has money and ended %s", r.OrderID, o.Status)
		}
		require.Equal(t, payment.StatusSucceeded, o.Payment.Status)
	}
	t.Logf("paid %d, refunded late %d", paid, refunded)
	require.Equal(t, n, paid+refunded, "no payment lost")
	var owed, late int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FILTER (WHERE refund_owed), count(*) FILTER (WHERE late) FROM payments`).Scan(&owed, &late))
	require.Equal(t, 0, owed, "every refund asked of the provider")
	require.Equal(t, refunded, late)
	require.Equal(t, float64(refunded), counterValue(t, metricsReg, "seckill_payment_late_refunds_total"))

	// The late orders' units are on sale again: sell them to others, then
	// confirm the refunds (twice): nothing comes back a second time.
	st := e.check(t)
	require.Equal(t, int64(refunded), st.StockLeft)
	more := make([]seckill.Reservation, refunded)
	for i := range more {
		more[i] = e.reserve(t, int64(10_000+i), 1)
	}
	if refunded > 0 {
		require.NoError(t, e.worker.Handle(e.ctx, more))
	}
	for i, r := range rs {
		if e.order(t, r.OrderID).Status == orders.StatusRefunded {
			for range 2 {
				_, err := e.deliver(t, e.refunded(pays[i]))
				require.NoError(t, err)
			}
			o := e.order(t, r.OrderID)
			require.Equal(t, orders.StatusRefunded, o.Status)
			require.Equal(t, payment.StatusRefunded, o.Payment.Status)
		}
	}
	st = e.check(t)
	require.Equal(t, int64(0), st.StockLeft, "sold + held + left == stock, no unit sold twice")
	_, err = e.stock.Reserve(e.ctx, seckill.Reservation{OrderID: e.ids.Next(), VoucherID: e.v.ID, UserID: 99_999, Quantity: 1, ReservedAt: time.Now()})
	require.ErrorIs(t, err, seckill.ErrSoldOut)
}

// The active query: an order whose money is there when its deadline passes
// is kept and paid, though its event never came.
func TestSweeperAsksProviderFirst(t *testing.T) {
	t.Parallel()
	e := newPayEnv(t, 4, 300*time.Millisecond, stack.StripeMockPaid(t, 250, "CNY"))
	rs := e.buy(t, 2, 1)
	for _, r := range rs {
		_, _, err := e.life.StartPayment(e.ctx, r.UserID, r.OrderID)
		require.NoError(t, err)
	}
	time.Sleep(400 * time.Millisecond)
	list, err := e.life.CancelExpired(e.ctx, 10)
	require.NoError(t, err)
	require.Empty(t, list, "nothing cancelled: the money is there")
	for _, r := range rs {
		o := e.order(t, r.OrderID)
		require.Equal(t, orders.StatusPaid, o.Status)
		require.Equal(t, []orders.Status{orders.StatusCreated, orders.StatusPaid}, e.events.eventsFor(r.OrderID))
	}
	e.check(t)

	// Against a provider where the money is not there, the same order is
	// cancelled.
	e2 := newPayEnv(t, 4, 300*time.Millisecond, stack.StripeMock(t))
	r := e2.buy(t, 1, 1)[0]
	_, _, err = e2.life.StartPayment(e2.ctx, r.UserID, r.OrderID)
	require.NoError(t, err)
	time.Sleep(400 * time.Millisecond)
	list, err = e2.life.CancelExpired(e2.ctx, 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, orders.StatusCancelled, list[0].Status)
	e2.check(t)
	_, _, err = e2.life.StartPayment(e2.ctx, r.UserID, r.OrderID)
	require.ErrorIs(t, err, apperr.ErrConflict, "a cancelled order takes no payment, not even its pending one")
}

// An operator's refund: the order stays paid until the provider confirms;
// the confirmation, delivered twice and before a stale success, puts the
// unit back on sale exactly once.
func TestOperatorRefund(t *testing.T) {
	t.Parallel()
	e := newPayEnv(t, 3, time.Minute, stack.StripeMock(t))
	r := e.buy(t, 1, 1)[0]
	p, _, err := e.life.StartPayment(e.ctx, r.UserID, r.OrderID)
	require.NoError(t, err)
	_, err = e.life.Refund(e.ctx, r.OrderID)
	require.ErrorIs(t, err, apperr.ErrConflict, "an unpaid order cannot be refunded")
	_, err = e.deliver(t, e.succeeded(p))
	require.NoError(t, err)

	o, err := e.life.Refund(e.ctx, r.OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusPaid, o.Status, "paid until the provider confirms")
	require.Equal(t, int64(2), e.check(t).StockLeft)

	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := e.deliver(t, e.refunded(p)); err != nil {
				t.Errorf("deliver refund: %v", err)
			}
		})
	}
	wg.Wait()
	out, err := e.deliver(t, e.succeeded(p))
	require.NoError(t, err)
	require.Equal(t, orders.EventDuplicate, out.Result)
	o = e.order(t, r.OrderID)
	require.Equal(t, orders.StatusRefunded, o.Status)
	require.Equal(t, payment.StatusRefunded, o.Payment.Status)
	require.Equal(t, int64(3), e.check(t).StockLeft, "the unit is back once")
	require.Equal(t, []orders.Status{orders.StatusCreated, orders.StatusPaid, orders.StatusRefunded}, e.events.eventsFor(r.OrderID))
	again, err := e.life.Refund(e.ctx, r.OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusRefunded, again.Status)
}

// The demo provider: the pay route works as it always did, and an
// operator's refund of such an order is immediate.
func TestDemoProvider(t *testing.T) {
	t.Parallel()
	e := newLifeEnv(t, seckill.KindSeckill, 3, 1, time.Minute)
	e.life = orders.NewLifecycle(orders.LifecycleConfig{Record: e.store, Stock: e.stock, Events: e.events, Log: testLog(t),
		Payments: e.store, Provider: payment.Demo{}})
	rs := e.buy(t, 2, 1)
	p, created, err := e.life.StartPayment(e.ctx, rs[1].UserID, rs[1].OrderID)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, payment.DemoName, p.Provider)
	o, err := e.life.Pay(e.ctx, rs[0].UserID, rs[0].OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusPaid, o.Status)
	require.Nil(t, o.Payment)
	o, err = e.life.Refund(e.ctx, rs[0].OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusRefunded, o.Status)
	require.Equal(t, int64(2), e.check(t).StockLeft)
}

func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// counterValue sums the counter name's series in reg.
func counterValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func count(list []orders.Status, s orders.Status) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// A voucher's own currency is what its orders are charged in (at Stripe's
// mock, through the SDK): a JPY voucher's payment is in JPY while the
// instance's default is CNY, its JPY event pays the order, and an event in
// the default currency is refused as money that is not the payment's.
func TestPaymentInVoucherCurrency(t *testing.T) {
	t.Parallel()
	e := newPayEnv(t, 3, time.Minute, stack.StripeMock(t))
	_, err := e.pool.Exec(e.ctx, `UPDATE vouchers SET currency = 'JPY' WHERE id = $1`, e.v.ID)
	require.NoError(t, err)
	r := e.buy(t, 1, 1)[0]
	p, created, err := e.life.StartPayment(e.ctx, r.UserID, r.OrderID)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "JPY", p.Currency)
	require.Equal(t, "JPY", e.order(t, r.OrderID).Payment.Currency)

	wrong := stripetest.PaymentIntent(p.ID, p.OrderID, p.AmountCents, "CNY", "succeeded")
	_, err = e.deliver(t, stripetest.Sign(stripetest.Event("evt_cny", "payment_intent.succeeded", wrong), stripetest.Secret, time.Now()))
	require.ErrorIs(t, err, orders.ErrPaymentMismatch)
	_, err = e.deliver(t, e.succeeded(p))
	require.NoError(t, err)
	require.Equal(t, orders.StatusPaid, e.order(t, r.OrderID).Status)
}
