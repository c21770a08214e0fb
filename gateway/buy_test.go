package gateway

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

func TestBuy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID)

	resp, body := b.do(t, "POST", path, "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 202, resp.StatusCode, "%s", body)
	require.JSONEq(t, `{"order_id":"1000001","status":"reserved"}`, string(body))

	resp, body = b.do(t, "POST", path, `{"quantity":3}`, "Authorization", bearerOf(b.shopper), "Idempotency-Key", "f3b0c1e2-retry-1")
	require.Equal(t, 202, resp.StatusCode, "%s", body)

	reqs := b.buyer.requests()
	require.Equal(t, []seckill.BuyRequest{
		{VoucherID: b.onSale.ID, UserID: 42, Quantity: 1, EndsAt: b.onSale.EndAt},
		{VoucherID: b.onSale.ID, UserID: 42, Quantity: 3, RequestKey: "f3b0c1e2-retry-1", EndsAt: b.onSale.EndAt},
	}, reqs)

	// A replay answers the same order with its current status: what the
	// order reader says, and failed when nothing knows it any more (its
	// hold was released without a record).
	b.buyer.setFn(func(seckill.BuyRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{OrderID: 1000002, Replayed: true}, nil
	})
	_, body = b.do(t, "POST", path, `{"quantity":3}`, "Authorization", bearerOf(b.shopper), "Idempotency-Key", "f3b0c1e2-retry-1")
	require.JSONEq(t, `{"order_id":"1000002","status":"failed"}`, string(body))
	for _, st := range []orders.Status{orders.StatusReserved, orders.StatusCreated, orders.StatusPaid, orders.StatusCancelled} {
		b.orders.mu.Lock()
		b.orders.orders = []orders.Order{{ID: 1000002, VoucherID: b.onSale.ID, UserID: 42, Quantity: 3, Status: st}}
		b.orders.mu.Unlock()
		_, body = b.do(t, "POST", path, `{"quantity":3}`, "Authorization", bearerOf(b.shopper), "Idempotency-Key", "f3b0c1e2-retry-1")
		require.JSONEq(t, `{"order_id":"1000002","status":"`+string(st)+`"}`, string(body))
	}

	// The largest key the contract allows passes.
	resp, _ = b.do(t, "POST", path, `{}`, "Authorization", bearerOf(b.shopper), "Idempotency-Key", strings.Repeat("k", 64))
	require.Equal(t, 202, resp.StatusCode)
}

// limitFunc is a test's limit step.
type limitFunc func(ctx context.Context, a *pipe.Attempt) error

func (f limitFunc) Take(ctx context.Context, a *pipe.Attempt) error { return f(ctx, a) }

// captchaFunc is a test's captcha step.
type captchaFunc func(ctx context.Context, a *pipe.Attempt, known bool) error

func (f captchaFunc) Check(ctx context.Context, a *pipe.Attempt, known bool) error {
	return f(ctx, a, known)
}

// trail records the steps of the buy, as a test's every step.
type trail struct {
	mu     sync.Mutex
	steps  []string
	refuse map[string]error
	seen   []*pipe.Attempt
}

func (r *trail) add(step string, a *pipe.Attempt) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, step)
	if a != nil {
		r.seen = append(r.seen, a)
	}
	return r.refuse[step]
}

func (r *trail) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.steps...)
}

func (r *trail) reset(refuse map[string]error) {
	r.mu.Lock()
	r.steps, r.refuse, r.seen = nil, refuse, nil
	r.mu.Unlock()
}

// steps are every step of the buy, each recording itself in r.
func (r *trail) buySteps() pipe.Steps {
	lim := func(name string) pipe.Limit {
		return limitFunc(func(_ context.Context, a *pipe.Attempt) error {
			return r.add(fmt.Sprintf("%s(voucher=%d)", name, a.Voucher.ID), a)
		})
	}
	return pipe.Steps{
		Address: lim("address"), User: lim("user"), Global: lim("global"),
		Fast: fastFunc(func(step, path string, a *pipe.Attempt) error {
			return r.add("fast("+step+","+path+")", nil)
		}),
		Captcha: captchaFunc(func(_ context.Context, a *pipe.Attempt, known bool) error {
			return r.add(fmt.Sprintf("captcha(known=%v)", known), a)
		}),
		Breaker: breakerFunc(func(ctx context.Context, path string, call func(context.Context) (pipe.Purchase, error)) (pipe.Purchase, error) {
			if err := r.add("breaker("+path+")", nil); err != nil {
				return pipe.Purchase{}, err
			}
			p, err := call(ctx)
			r.add(fmt.Sprintf("breaker<-%v", err), nil)
			return p, err
		}),
		SoldOut: soldOutSteps{r},
	}
}

type fastFunc func(step, path string, a *pipe.Attempt) error

func (f fastFunc) Refuse(step, path string, a *pipe.Attempt) error { return f(step, path, a) }

type breakerFunc func(ctx context.Context, path string, call func(context.Context) (pipe.Purchase, error)) (pipe.Purchase, error)

func (f breakerFunc) Run(ctx context.Context, path string, call func(context.Context) (pipe.Purchase, error)) (pipe.Purchase, error) {
	return f(ctx, path, call)
}

type soldOutSteps struct{ r *trail }

func (s soldOutSteps) Replay(a *pipe.Attempt) (int64, bool) { s.r.add("replay", a); return 0, false }
func (s soldOutSteps) Refuse(*pipe.Attempt) error           { return s.r.add("soldout", nil) }
func (s soldOutSteps) Saw(_ int64, _ pipe.Sale, err error)  { s.r.add(fmt.Sprintf("saw(%v)", err), nil) }

// TestPipelineOrder checks the order written on buy.Pipeline (the
// narrowest budget first, the fast refusal in front of each step that costs
// something), that a refusing step stops the buy, and what each step sees.
func TestPipelineOrder(t *testing.T) {
	t.Parallel()
	r := &trail{}
	syncBuyer := &fakeSyncBuyer{}
	b := setup(t, func(_ *Config, d *testDeps) { d.Steps = r.buySteps(); d.SyncBuyer = syncBuyer })
	v := b.catalog.put(seckill.Voucher{Title: "c", Kind: seckill.KindSeckill, StockTotal: 5, PerUserLimit: 1, CaptchaRequired: true})
	id := v.ID
	path := fmt.Sprintf("/api/v1/vouchers/%d/orders", id)

	resp, _ := b.do(t, "POST", path, "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 202, resp.StatusCode)
	require.Equal(t, []string{
		// The catalog step comes first: every step sees the voucher.
		fmt.Sprintf("address(voucher=%d)", id),
		"fast(user_limit,redis)", fmt.Sprintf("user(voucher=%d)", id),
		"fast(global_limit,redis)", fmt.Sprintf("global(voucher=%d)", id),
		"fast(captcha,redis)", "captcha(known=false)",
		"breaker(redis)", "replay", "soldout", "saw(<nil>)", "breaker<-<nil>",
	}, r.got())

	// The sold-out flag and the breaker see the seller's answer.
	r.reset(nil)
	b.buyer.setFn(func(seckill.BuyRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{}, seckill.ErrSoldOut
	})
	resp, _ = b.do(t, "POST", path, "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 409, resp.StatusCode)
	require.Contains(t, r.got(), "saw(sold out)")
	require.Contains(t, r.got(), "breaker<-sold out")
	b.buyer.setFn(nil)

	// A refusal stops everything behind it: no global limit charged, no
	// seller (the catalog was read once, first, from memory).
	r.reset(map[string]error{fmt.Sprintf("user(voucher=%d)", id): apperr.ErrRateLimited})
	catalogCalls, buyerCalls := b.catalog.calls.Load(), b.buyer.calls.Load()
	resp, _ = b.do(t, "POST", path, "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 429, resp.StatusCode)
	require.Equal(t, []string{fmt.Sprintf("address(voucher=%d)", id), "fast(user_limit,redis)", fmt.Sprintf("user(voucher=%d)", id)}, r.got())
	require.Equal(t, catalogCalls+1, b.catalog.calls.Load())
	require.Equal(t, buyerCalls, b.buyer.calls.Load())

	// The fast refusal stops the buy before the limit it stands in front of.
	r.reset(map[string]error{"fast(global_limit,redis)": seckill.ErrSoldOut})
	resp, _ = b.do(t, "POST", path, "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 409, resp.StatusCode)
	require.Equal(t, []string{fmt.Sprintf("address(voucher=%d)", id), "fast(user_limit,redis)", fmt.Sprintf("user(voucher=%d)", id),
		"fast(global_limit,redis)"}, r.got())

	// A limit voucher runs behind the PostgreSQL path, without a captcha.
	r.reset(nil)
	limit := b.catalog.put(seckill.Voucher{Title: "l", Kind: seckill.KindLimit, StockTotal: 5, PerUserLimit: 1})
	resp, _ = b.do(t, "POST", fmt.Sprintf("/api/v1/vouchers/%d/orders", limit.ID), "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 202, resp.StatusCode)
	require.Equal(t, []string{
		fmt.Sprintf("address(voucher=%d)", limit.ID),
		"fast(user_limit,postgresql)", fmt.Sprintf("user(voucher=%d)", limit.ID),
		"fast(global_limit,postgresql)", fmt.Sprintf("global(voucher=%d)", limit.ID),
		"breaker(postgresql)", "replay", "soldout", "saw(<nil>)", "breaker<-<nil>",
	}, r.got())

	// An unknown voucher ends at the catalog step, before any limiter.
	r.reset(nil)
	resp, _ = b.do(t, "POST", "/api/v1/vouchers/424242/orders", "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 404, resp.StatusCode)
	require.Empty(t, r.got(), "no step charged for an unknown voucher")
}

func TestAttemptCarriesCaptchaAndHeaders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen pipe.Attempt
	b := setup(t, func(_ *Config, d *testDeps) {
		d.Steps.Captcha = captchaFunc(func(_ context.Context, a *pipe.Attempt, _ bool) error {
			mu.Lock()
			seen = *a
			mu.Unlock()
			a.SetHeader("X-Captcha", "checked")
			return nil
		})
	})
	v := b.catalog.put(seckill.Voucher{Title: "c", Kind: seckill.KindSeckill, StockTotal: 5, PerUserLimit: 1, CaptchaRequired: true})
	path := fmt.Sprintf("/api/v1/vouchers/%d/orders", v.ID)
	resp, _ := b.do(t, "POST", path, `{"captcha_id":"c-1","captcha_answer":" 7Xq2 "}`, "Authorization", bearerOf(b.shopper))
	require.Equal(t, 202, resp.StatusCode)
	require.Equal(t, "checked", resp.Header.Get("X-Captcha"))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, "c-1", seen.CaptchaID)
	require.Equal(t, " 7Xq2 ", seen.CaptchaAnswer, "the step judges the answer as sent")
	require.Equal(t, v.ID, seen.Voucher.ID)
	require.Equal(t, seckill.KindSeckill, seen.Voucher.Kind)
}

func TestSyncBuyerByKind(t *testing.T) {
	t.Parallel()
	syncBuyer := &fakeSyncBuyer{}
	b := setup(t, func(_ *Config, d *testDeps) { d.SyncBuyer = syncBuyer })
	limit := b.catalog.put(seckill.Voucher{Title: "l", Kind: seckill.KindLimit, StockTotal: 5, PerUserLimit: 1})
	common := b.catalog.put(seckill.Voucher{Title: "c", Kind: seckill.KindCommon, StockTotal: 5, PerUserLimit: 1})

	for _, v := range []seckill.Voucher{limit, common} {
		resp, body := b.do(t, "POST", fmt.Sprintf("/api/v1/vouchers/%d/orders", v.ID), "", "Authorization", bearerOf(b.shopper))
		require.Equal(t, 202, resp.StatusCode)
		require.JSONEq(t, `{"order_id":"777","status":"created"}`, string(body))
	}
	require.EqualValues(t, 2, syncBuyer.calls.Load())
	require.Zero(t, b.buyer.calls.Load())

	resp, _ := b.do(t, "POST", fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID), "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 202, resp.StatusCode)
	require.EqualValues(t, 1, b.buyer.calls.Load(), "seckill vouchers still go to the async buyer")

	syncBuyer.setErr(fmt.Errorf("pgstore: %w", seckill.ErrLimitExceeded))
	resp, body := b.do(t, "POST", fmt.Sprintf("/api/v1/vouchers/%d/orders", limit.ID), "", "Authorization", bearerOf(b.shopper))
	requireAPIError(t, resp, body, 409, "limit_exceeded")

	// Without a SyncBuyer every kind goes to Buyer.
	b2 := setup(t)
	l2 := b2.catalog.put(seckill.Voucher{Title: "l", Kind: seckill.KindLimit, StockTotal: 5, PerUserLimit: 1})
	resp, _ = b2.do(t, "POST", fmt.Sprintf("/api/v1/vouchers/%d/orders", l2.ID), "", "Authorization", bearerOf(b2.shopper))
	require.Equal(t, 202, resp.StatusCode)
	require.EqualValues(t, 1, b2.buyer.calls.Load())
}

// TestStringsOutliveTheRequest sends many buys over one keep-alive
// connection, where fasthttp reuses its buffers, and checks that what the
// buyer kept (the Idempotency-Key travels on to Redis and Kafka) was not
// overwritten by the requests after it.
func TestStringsOutliveTheRequest(t *testing.T) {
	t.Parallel()
	r := &trail{}
	b := setup(t, func(_ *Config, d *testDeps) { d.Steps.SoldOut = soldOutSteps{r} })
	path := fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID)
	const n = 200
	for i := range n {
		key := fmt.Sprintf("key-%03d-%s", i, strings.Repeat(string(rune('a'+i%26)), 40))
		body := fmt.Sprintf(`{"captcha_id":"id-%03d-%s","captcha_answer":"ans-%03d"}`, i, strings.Repeat("z", i%50), i)
		resp, _ := b.do(t, "POST", path, body, "Authorization", bearerOf(b.shopper), "Idempotency-Key", key)
		require.Equal(t, 202, resp.StatusCode)
	}
	reqs := b.buyer.requests()
	require.Len(t, reqs, n)
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.seen
	for i, r := range reqs {
		require.Equal(t, fmt.Sprintf("key-%03d-%s", i, strings.Repeat(string(rune('a'+i%26)), 40)), r.RequestKey)
		require.Equal(t, fmt.Sprintf("id-%03d-%s", i, strings.Repeat("z", i%50)), kept[i].CaptchaID)
		require.Equal(t, fmt.Sprintf("ans-%03d", i), kept[i].CaptchaAnswer)
	}
}
