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

	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/orderid"
	"github.com/flashsale/seckill/seckill/redisstock"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newEdge builds and runs one instance's gates on rdb until the test ends.
func newEdge(t testing.TB, rdb redis.UniversalClient, cfg edge.Config) (*edge.Edge, *prometheus.Registry) {
	t.Helper()
	e, reg, _ := newStoppableEdge(t, rdb, cfg)
	return e, reg
}

// newStoppableEdge is newEdge with the function that stops the gates'
// loops before the test ends (and waits for them).
func newStoppableEdge(t testing.TB, rdb redis.UniversalClient, cfg edge.Config) (*edge.Edge, *prometheus.Registry, func()) {
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
	cfg.Redis, cfg.Stock, cfg.Registerer, cfg.Log = rdb, redisstock.New(redisstock.Config{Redis: rdb}), reg, quiet
	e, err := edge.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	<-e.Ready()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return e, reg, stop
}

// sellFunc is a test's seller: what the buy's pipeline calls last.
type sellFunc func(ctx context.Context, a *pipe.Attempt) (pipe.Sale, error)

// buyFunc is one buy through the pipeline.
type buyFunc func(ctx context.Context, a *pipe.Attempt) (pipe.Purchase, error)

// chain is the buy's pipeline (gateway/buy) over steps, whose catalog
// answers v (on sale for the next hour when it has no end, with stock when
// it has none) and whose seller of every kind is last.
func chain(steps pipe.Steps, v seckill.Voucher, last sellFunc) buyFunc {
	return chainKnown(steps, v, last, nil)
}

// chainKnown is chain whose sellers know the request keys of keys.
func chainKnown(steps pipe.Steps, v seckill.Voucher, last sellFunc, keys pipe.RequestKeys) buyFunc {
	if v.EndAt.IsZero() {
		v.EndAt = time.Now().Add(time.Hour)
	}
	if v.StockTotal == 0 {
		v.StockTotal, v.StockLeft = 1<<40, 1<<40
	}
	p, err := pipe.New(pipe.Deps{
		Catalog: oneVoucher{v}, Steps: steps, Logger: quiet,
		Seckill: testSeller{last, keys, pipe.PathRedis}, Sync: testSeller{last, keys, pipe.PathPostgreSQL},
	})
	if err != nil {
		panic(err)
	}
	return p.Buy
}

// oneVoucher is a catalog that answers one voucher for every id.
type oneVoucher struct{ v seckill.Voucher }

func (o oneVoucher) Voucher(context.Context, int64) (seckill.Voucher, error) { return o.v, nil }

// testSeller sells with a test's function.
type testSeller struct {
	sell sellFunc
	keys pipe.RequestKeys
	path string
}

func (s testSeller) Sell(ctx context.Context, req seckill.BuyRequest) (pipe.Sale, error) {
	return s.sell(ctx, &pipe.Attempt{Request: req})
}

func (s testSeller) RequestKnown(ctx context.Context, voucherID, userID int64, key string) (bool, error) {
	if s.keys == nil {
		return false, nil
	}
	return s.keys.RequestKnown(ctx, voucherID, userID, key)
}

func (s testSeller) Path() string { return s.path }

// stockKeys are the requests a real stock accepted.
type stockKeys struct{ stock *redisstock.Store }

func (k stockKeys) RequestKnown(ctx context.Context, voucherID, userID int64, key string) (bool, error) {
	return k.stock.RequestKnown(ctx, voucherID, redisstock.Request{UserID: userID, Key: key})
}

// accept is a last step that sells without touching anything, for tests of
// the steps in front; it counts its calls.
func accept(n *atomic.Int64) sellFunc {
	return func(context.Context, *pipe.Attempt) (pipe.Sale, error) {
		return pipe.Sale{Purchase: pipe.Purchase{OrderID: n.Add(1)}}, nil
	}
}

func attempt(voucherID, userID int64) *pipe.Attempt {
	return &pipe.Attempt{Request: seckill.BuyRequest{VoucherID: voucherID, UserID: userID, Quantity: 1}}
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
	require.NoError(t, redisstock.New(redisstock.Config{Redis: rdb}).Warm(context.Background(), v))
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
	return seckill.NewBuyer(seckill.BuyerConfig{Stock: stock, Queue: p, IDs: ids, Log: quiet})
}

// buyWith sells with the production seckill seller over b.
func buyWith(b *seckill.Buyer) sellFunc {
	return func(ctx context.Context, a *pipe.Attempt) (pipe.Sale, error) {
		return pipe.SeckillSeller{Buyer: b}.Sell(ctx, a.Request)
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
