package edge_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/orderid"
	"github.com/flashsale/seckill/seckill/redisstock"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newEdge builds and starts one instance's gates on rdb.
func newEdge(t testing.TB, rdb redis.UniversalClient, cfg edge.Config) (*edge.Edge, *prometheus.Registry) {
	t.Helper()
	if cfg.GlobalRate == 0 {
		cfg.GlobalRate, cfg.GlobalBurst = 1_000_000, 1_000_000
	}
	if cfg.UserRate == 0 {
		cfg.UserRate, cfg.UserBurst = 1_000_000, 1_000_000
	}
	if cfg.ModeKey == "" {
		// Each test its own ops switch: they share one Redis.
		cfg.ModeKey = "seckill:breaker:mode:" + t.Name()
	}
	if cfg.FleetKey == "" {
		// And its own fleet, or every parallel test's instances would share
		// the global limit.
		cfg.FleetKey = "seckill:rl:instances:" + t.Name()
	}
	reg := prometheus.NewRegistry()
	e, err := edge.New(rdb, redisstock.New(rdb), cfg, reg, quiet)
	require.NoError(t, err)
	e.Start(context.Background())
	t.Cleanup(e.Stop)
	return e, reg
}

// chain runs the gates in the gateway's order (gateway/gates.go) in front of
// last; the voucher step sets Attempt.Voucher.
func chain(g gateway.Gates, v seckill.Voucher, last gateway.BuyFunc) gateway.BuyFunc {
	voucher := gateway.GateFunc(func(ctx context.Context, a *gateway.Attempt, next gateway.BuyFunc) (gateway.Purchase, error) {
		a.Voucher = v
		return next(ctx, a)
	})
	return g.Chain(voucher, last)
}

// accept is a last step that sells without touching anything, for tests of
// the gates in front; it counts its calls.
func accept(n *atomic.Int64) gateway.BuyFunc {
	return func(context.Context, *gateway.Attempt) (gateway.Purchase, error) {
		return gateway.Purchase{OrderID: n.Add(1)}, nil
	}
}

func attempt(voucherID, userID int64) *gateway.Attempt {
	return &gateway.Attempt{Request: seckill.BuyRequest{VoucherID: voucherID, UserID: userID, Quantity: 1}}
}

func retryAfter(err error) time.Duration {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter()
	}
	return 0
}

// countingStock counts the reservations that reach the real Redis stock.
type countingStock struct {
	*redisstock.Store
	reserves atomic.Int64
}

func (c *countingStock) Reserve(ctx context.Context, r seckill.Reservation) (seckill.ReserveResult, error) {
	c.reserves.Add(1)
	return c.Store.Reserve(ctx, r)
}

// warm puts a fresh seckill voucher on sale in Redis.
func warm(t testing.TB, rdb redis.UniversalClient, stock int64) seckill.Voucher {
	t.Helper()
	v := seckill.Voucher{
		ID: rand.Int64N(1<<50) + 1, Title: "t", Kind: seckill.KindSeckill, PriceCents: 100,
		StockTotal: stock, StockLeft: stock, PerUserLimit: 1000,
		BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour),
	}
	require.NoError(t, redisstock.New(rdb).Warm(context.Background(), v))
	return v
}

// realBuyer is the production buyer over stock and a real Kafka topic.
func realBuyer(t testing.TB, stock seckill.Stock) *seckill.Buyer {
	t.Helper()
	p, err := kafkaq.NewProducer(stack.KafkaBrokers, stack.NewTopic(t, 1), quiet)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ids, err := orderid.New(rand.Int64N(500) + 1)
	require.NoError(t, err)
	return seckill.NewBuyer(stock, p, ids, quiet)
}

func buyWith(b *seckill.Buyer) gateway.BuyFunc {
	return func(ctx context.Context, a *gateway.Attempt) (gateway.Purchase, error) {
		res, err := b.Buy(ctx, a.Request)
		return gateway.Purchase{OrderID: res.OrderID}, err
	}
}

// switchProxy forwards TCP to a real server while up, and refuses (closes at
// once) while down: Redis going away and coming back without killing the
// package's shared redis-server.
type switchProxy struct {
	ln     net.Listener
	target string
	up     atomic.Bool
	// dials counts connections clients opened, refused ones included: how
	// often Redis was asked for.
	dials atomic.Int64
	mu    sync.Mutex
	conns []net.Conn
}

func newSwitchProxy(t testing.TB, target string) *switchProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &switchProxy{ln: ln, target: target}
	p.up.Store(true)
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.down() })
	return p
}

func (p *switchProxy) addr() string { return p.ln.Addr().String() }

func (p *switchProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.dials.Add(1)
		if !p.up.Load() {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
		go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
	}
}

// down cuts every connection and refuses new ones.
func (p *switchProxy) down() {
	p.up.Store(false)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// counterValue sums every series of a counter family.
func counterValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetCounter() != nil {
				sum += m.GetCounter().GetValue()
			}
			if m.GetGauge() != nil {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
