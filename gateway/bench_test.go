package gateway

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// The benchmarks measure the gateway's own cost of one HTTP buy (auth, JSON,
// the chain, the error table, the access log) over an in-test Buyer that
// answers at once; the reservation's cost is measured in redisstock, the
// whole path in the end-to-end tests.

func benchSetup(b *testing.B) *bundle {
	return setup(b, func(_ *Config, d *Deps) { d.Logger = slog.New(slog.DiscardHandler) })
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
func BenchmarkHandlerBuy(b *testing.B) {
	bb := benchSetup(b)
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
			ctx.Request.SetBodyString(`{"quantity":1}`)
			h(&ctx)
			if ctx.Response.StatusCode() != 202 {
				b.Errorf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
				return
			}
		}
	})
}
