package gateway

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
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

// TestGateChain checks the order of the README's purchase path (the
// narrowest budget first), that nil gates pass,
// that a refusing gate stops the chain, and what each gate sees.
func TestGateChain(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var trail []string
	refuse := map[string]error{}
	gate := func(name string) Gate {
		return GateFunc(func(ctx context.Context, a *Attempt, next BuyFunc) (Purchase, error) {
			mu.Lock()
			trail = append(trail, fmt.Sprintf("%s(voucher=%d)", name, a.Voucher.ID))
			err := refuse[name]
			mu.Unlock()
			if err != nil {
				return Purchase{}, err
			}
			p, err := next(ctx, a)
			mu.Lock()
			trail = append(trail, fmt.Sprintf("%s<-%v", name, err))
			mu.Unlock()
			return p, err
		})
	}
	b := setup(t, func(_ *Config, d *Deps) {
		d.Gates = Gates{
			BuyAddress: gate("address"), GlobalLimit: gate("global"), UserLimit: gate("user"), Captcha: gate("captcha"),
			Breaker: gate("breaker"), SoldOut: gate("soldout"),
		}
	})
	id := b.onSale.ID
	path := fmt.Sprintf("/api/v1/vouchers/%d/orders", id)
	reset := func() { mu.Lock(); trail = nil; mu.Unlock() }
	got := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), trail...) }

	resp, _ := b.do(t, "POST", path, "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 202, resp.StatusCode)
	require.Equal(t, []string{
		// The catalog gate comes first: every gate sees the voucher.
		fmt.Sprintf("address(voucher=%d)", id), fmt.Sprintf("user(voucher=%d)", id), fmt.Sprintf("global(voucher=%d)", id),
		fmt.Sprintf("captcha(voucher=%d)", id), fmt.Sprintf("breaker(voucher=%d)", id), fmt.Sprintf("soldout(voucher=%d)", id),
		"soldout<-<nil>", "breaker<-<nil>", "captcha<-<nil>", "global<-<nil>", "user<-<nil>", "address<-<nil>",
	}, got())

	// The outer gates see the buyer's answer (a breaker counts it, the
	// sold-out flag learns from it).
	reset()
	b.buyer.setFn(func(seckill.BuyRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{}, seckill.ErrSoldOut
	})
	resp, _ = b.do(t, "POST", path, "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 409, resp.StatusCode)
	require.Contains(t, got(), "soldout<-sold out")
	b.buyer.setFn(nil)

	// A refusal stops everything behind it: no global limit charged, no
	// buyer (the catalog was read once, first, from memory).
	reset()
	mu.Lock()
	refuse["user"] = seckill.ErrRateLimited
	mu.Unlock()
	catalogCalls, buyerCalls := b.catalog.calls.Load(), b.buyer.calls.Load()
	resp, _ = b.do(t, "POST", path, "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 429, resp.StatusCode)
	require.Equal(t, []string{fmt.Sprintf("address(voucher=%d)", id), fmt.Sprintf("user(voucher=%d)", id), "address<-rate limited"}, got())
	require.Equal(t, catalogCalls+1, b.catalog.calls.Load())
	require.Equal(t, buyerCalls, b.buyer.calls.Load())

	// An unknown voucher ends at the catalog step, before any limiter.
	reset()
	mu.Lock()
	delete(refuse, "user")
	mu.Unlock()
	resp, _ = b.do(t, "POST", "/api/v1/vouchers/424242/orders", "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 404, resp.StatusCode)
	require.Empty(t, got(), "no gate charged for an unknown voucher")
}

func TestAttemptCarriesCaptchaAndHeaders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen Attempt
	b := setup(t, func(_ *Config, d *Deps) {
		d.Gates.Captcha = GateFunc(func(ctx context.Context, a *Attempt, next BuyFunc) (Purchase, error) {
			mu.Lock()
			seen = *a
			mu.Unlock()
			a.SetHeader("X-Captcha", "checked")
			return next(ctx, a)
		})
	})
	path := fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID)
	resp, _ := b.do(t, "POST", path, `{"captcha_id":"c-1","captcha_answer":" 7Xq2 "}`, "Authorization", bearerOf(b.shopper))
	require.Equal(t, 202, resp.StatusCode)
	require.Equal(t, "checked", resp.Header.Get("X-Captcha"))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, "c-1", seen.CaptchaID)
	require.Equal(t, " 7Xq2 ", seen.CaptchaAnswer, "the gate judges the answer as sent")
	require.Equal(t, b.onSale.ID, seen.Voucher.ID)
	require.Equal(t, seckill.KindSeckill, seen.Voucher.Kind)
}

func TestSyncBuyerByKind(t *testing.T) {
	t.Parallel()
	syncBuyer := &fakeSyncBuyer{}
	b := setup(t, func(_ *Config, d *Deps) { d.SyncBuyer = syncBuyer })
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
	var kept []*Attempt
	var mu sync.Mutex
	b := setup(t, func(_ *Config, d *Deps) {
		d.Gates.SoldOut = GateFunc(func(ctx context.Context, a *Attempt, next BuyFunc) (Purchase, error) {
			mu.Lock()
			kept = append(kept, a)
			mu.Unlock()
			return next(ctx, a)
		})
	})
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
	mu.Lock()
	defer mu.Unlock()
	for i, r := range reqs {
		require.Equal(t, fmt.Sprintf("key-%03d-%s", i, strings.Repeat(string(rune('a'+i%26)), 40)), r.RequestKey)
		require.Equal(t, fmt.Sprintf("id-%03d-%s", i, strings.Repeat("z", i%50)), kept[i].CaptchaID)
		require.Equal(t, fmt.Sprintf("ans-%03d", i), kept[i].CaptchaAnswer)
	}
}
