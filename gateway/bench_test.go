package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/tracing"
)

// The benchmarks measure the gateway's own cost of one HTTP buy (auth, JSON,
// the chain, the error table, the access log) over an in-test Buyer that
// answers at once; the reservation's cost is measured in redisstock, the
// whole path in the end-to-end tests.

func benchSetup(b *testing.B) *bundle {
	return setup(b, func(_ *Config, d *testDeps) { d.Logger = slog.New(slog.DiscardHandler) })
}

// BenchmarkHTTPBuy goes through a real loopback listener with keep-alive
// connections, many buyers in parallel.
func BenchmarkHTTPBuy(b *testing.B) {
	bb := benchSetup(b)
	addr := strings.TrimPrefix(bb.base, "http://")
	client := &fasthttp.HostClient{Addr: addr, MaxConns: 512, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
	path := fmt.Sprintf("/api/v1/vouchers/%d/orders", bb.onSale.ID)
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		for pb.Next() {
			req.Reset()
			req.SetRequestURI(bb.base + path)
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/json")
			req.Header.Set("Authorization", "Bearer "+bb.shopper)
			req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d", n.Add(1)))
			req.SetBodyString(`{"quantity":1}`)
			if err := client.Do(req, resp); err != nil {
				b.Error(err)
				return
			}
			if resp.StatusCode() != 202 {
				b.Errorf("status %d: %s", resp.StatusCode(), resp.Body())
				return
			}
		}
	})
}

// BenchmarkHandlerBuy calls the app's handler in memory: the gateway's cost
// per request without sockets or a client.
func BenchmarkHandlerBuy(b *testing.B) { handlerBuy(b, benchSetup(b), "") }

// BenchmarkHandlerBuyAsServed is BenchmarkHandlerBuy as the process serves
// it: the access log written as cmd/seckill writes it (text, durations
// made readable, trace ids added; here to io.Discard), and a per-user limit
// that lets every attempt through and sets the six RateLimit headers on
// it, as gateway/edge's does on every seckill buy.
func BenchmarkHandlerBuyAsServed(b *testing.B) {
	handlerBuy(b, setup(b, func(_ *Config, d *testDeps) {
		d.Logger = slog.New(tracing.LogHandler(slog.NewTextHandler(io.Discard,
			&slog.HandlerOptions{ReplaceAttr: tracing.ReadableDurations})))
		d.Steps.User = rateHeaders{}
	}), "")
}

// rateHeaders is a limit that admits every attempt with the RateLimit
// headers of gateway/edge's limits.
type rateHeaders struct{}

func (rateHeaders) Take(_ context.Context, a *pipe.Attempt) error {
	for _, h := range [...][2]string{
		{"RateLimit-Limit", "1000000"}, {"RateLimit-Remaining", "999999"}, {"RateLimit-Reset", "1"},
		{"X-RateLimit-Limit", "1000000"}, {"X-RateLimit-Remaining", "999999"}, {"X-RateLimit-Reset", "1"},
	} {
		a.SetHeader(h[0], h[1])
	}
	return nil
}

// handlerBuy is BenchmarkHandlerBuy on bb, each request with the
// traceparent header tp (none when empty).
func handlerBuy(b *testing.B, bb *bundle, tp string) {
	h := bb.srv.App().Handler()
	path := fmt.Sprintf("/api/v1/vouchers/%d/orders", bb.onSale.ID)
	auth := "Bearer " + bb.shopper
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var ctx fasthttp.RequestCtx
		for pb.Next() {
			ctx.Request.Reset()
			ctx.Response.Reset()
			ctx.Request.SetRequestURI(path)
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.Header.SetContentType("application/json")
			ctx.Request.Header.Set("Authorization", auth)
			ctx.Request.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d", n.Add(1)))
			if tp != "" {
				ctx.Request.Header.Set("traceparent", tp)
			}
			ctx.Request.SetBodyString(`{"quantity":1}`)
			h(&ctx)
			if ctx.Response.StatusCode() != 202 {
				b.Errorf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
				return
			}
		}
	})
}

// BenchmarkHTTPCatalog reads GET /healthz, the catalog list (44 vouchers)
// and single vouchers through a real loopback listener, many readers in
// parallel: the catalog's cost beside the cheapest route, in one run. The
// list and the voucher come from memory, pre-encoded (catalog.go).
func BenchmarkHTTPCatalog(b *testing.B) {
	bb := benchSetup(b)
	for i := range 43 {
		bb.catalog.put(seckill.Voucher{Title: fmt.Sprint("voucher ", i), Kind: seckill.KindSeckill, PriceCents: 100, StockTotal: 100, PerUserLimit: 1})
	}
	addr := strings.TrimPrefix(bb.base, "http://")
	client := &fasthttp.HostClient{Addr: addr, MaxConns: 512, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
	for _, c := range []struct {
		name string
		path func(i int64) string
		etag bool
	}{
		{"healthz", func(int64) string { return "/healthz" }, false},
		{"list", func(int64) string { return "/api/v1/vouchers" }, false},
		{"list-304", func(int64) string { return "/api/v1/vouchers" }, true},
		{"voucher", func(i int64) string { return fmt.Sprintf("/api/v1/vouchers/%d", 1+i%44) }, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			var n atomic.Int64
			etag := ""
			if c.etag {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				req.SetRequestURI(bb.base + c.path(0))
				if err := client.Do(req, resp); err != nil {
					b.Fatal(err)
				}
				etag = string(resp.Header.Peek("ETag"))
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				for pb.Next() {
					req.Reset()
					req.SetRequestURI(bb.base + c.path(n.Add(1)))
					if etag != "" {
						req.Header.Set("If-None-Match", etag)
					}
					if err := client.Do(req, resp); err != nil {
						b.Error(err)
						return
					}
					if want := map[bool]int{false: 200, true: 304}[etag != ""]; resp.StatusCode() != want {
						b.Errorf("status %d: %s", resp.StatusCode(), resp.Body())
						return
					}
				}
			})
		})
	}
}
