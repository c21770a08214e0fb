package systemtest

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHTTPBuy is the whole accepted path over real HTTP: JWT, the
// reservation script on the real Redis, the Kafka write acknowledged by the
// broker, the 202. Stock is large so nothing sells out; each op is a new
// shopper.
func BenchmarkHTTPBuy(b *testing.B) {
	ts := startSystem(b, nil)
	vid := ts.createVoucher(b, 10_000_000, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	var next atomic.Int64
	next.Store(10_000_000)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a := ts.buy(b, vid, ts.shopper(b, next.Add(1)), 1, "")
			if a.status != http.StatusAccepted {
				b.Fatalf("buy: %d %s", a.status, a.raw)
			}
		}
	})
}

// BenchmarkHTTPSoldOut is the sold-out answer over real HTTP.
func BenchmarkHTTPSoldOut(b *testing.B) {
	ts := startSystem(b, nil)
	vid := ts.createVoucher(b, 1, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	if a := ts.buy(b, vid, ts.shopper(b, 1), 1, ""); a.status != http.StatusAccepted {
		b.Fatalf("first buy: %d %s", a.status, a.raw)
	}
	token := ts.shopper(b, 2)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if a := ts.buy(b, vid, token, 1, ""); a.status != http.StatusConflict {
				b.Fatalf("buy: %d %s", a.status, a.raw)
			}
		}
	})
}

// BenchmarkHTTPReads compares the cheap reads over real HTTP on one system,
// so their ratios come from one run: /healthz (no dependency), /readyz (a
// cached probe), and the catalog list and one voucher (behind the
// per-address limit, charged on every request). Compare ns/op:
//
//	go test -run '^$' -bench HTTPReads -benchtime 3s ./cmd/seckill
func BenchmarkHTTPReads(b *testing.B) {
	ts := startSystem(b, nil)
	vid := ts.createVoucher(b, 100, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	for _, path := range []string{"/healthz", "/readyz", "/api/v1/vouchers", "/api/v1/vouchers/" + vid} {
		b.Run(strings.TrimPrefix(strings.ReplaceAll(path, "/", "_"), "_"), func(b *testing.B) {
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := ts.client.Get(ts.base + path)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("%s: %d", path, resp.StatusCode)
					}
				}
			})
		})
	}
}
