// Package edge is the set of gates in front of the buying path: the global
// and per-user GCRA rate limits, the per-IP limit on registration and login,
// the single-use captcha, the circuit breaker with its fleet-wide ops switch,
// and the sold-out flag. It implements gateway.Gate and gateway.IPLimiter and
// knows nothing of HTTP: every refusal is an error wrapping a seckill sentinel,
// the gateway turns it into a status code.
//
// # Order and the front check
//
// The gateway runs GlobalLimit → UserLimit → voucher → Captcha → Breaker →
// SoldOut → buy. The first three touch Redis, so each of them starts with a
// check that costs no I/O: when the breaker refuses (open, or forced open by
// ops) the attempt gets 503 at once, and when this instance knows the voucher
// is sold out it gets 409 at once. An open breaker therefore answers without
// any Redis or Kafka call (a dead Redis would otherwise make the rate limiters
// wait on it before the breaker is even asked), and a sold-out voucher costs
// a map lookup, not two rate-limit scripts.
//
// # The global limit without one hot key
//
// A single GCRA key for all shoppers puts every buy of the fleet on one Redis
// key, hence one Redis Cluster shard and one CPU. The global limit is split
// over N keys `seckill:rl:global:{n}` (the braces make each its own hash
// slot), each allowing Rate/N per second (Period stretched N-fold, so Rate/N
// need not be an integer) with Burst/N; an attempt picks a key at random. The
// sum of the shares is exactly the configured limit, whatever the number of
// instances, and no membership or fleet count is needed, unlike a per-instance
// local share (which over-admits while a new instance is not yet counted and
// under-admits when one dies). The price is statistical: at low traffic a key
// may refuse while another still has room, so N grows with the rate (about
// one shard per 1000/s, at most 16) and is 1 below 2000/s.
//
// GCRA admits at most Burst + Rate·t in any window of t seconds. With Burst
// equal to Rate (the trap in architecture.md) the first second after a quiet
// spell lets about twice the rate through; set the burst well below the rate
// when that matters.
//
// # Failure policy
//
// A rate limiter whose Redis call fails lets the attempt through (and counts
// it as reason "error"): the reservation behind it uses the same Redis, fails,
// and trips the breaker, which then refuses in front of the limiters. The
// captcha cannot be judged without Redis and answers 503. The sold-out flag
// forgets what it knows when it cannot re-check it, so it never keeps a
// voucher off sale on stale knowledge.
package edge

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/seckill"
)

// Config sets the gates. Zero values take the defaults named on each field.
type Config struct {
	// GlobalRate and GlobalBurst bound the buys of all shoppers together,
	// per second. GlobalShards is the number of keys the limit is spread
	// over (0: one per 1000/s of rate, 1 to 16).
	GlobalRate, GlobalBurst, GlobalShards int
	// UserRate and UserBurst bound one shopper's buys, per second.
	UserRate, UserBurst int
	// CredentialLimit bounds registrations and logins per client IP
	// (default 20 per minute, burst 10).
	CredentialLimit redis_rate.Limit

	// BreakerFailures is how many dependency failures in a row open the
	// breaker (default 5).
	BreakerFailures uint32
	// BreakerOpenFor is how long the breaker stays open before it lets
	// probes through (default 2s).
	BreakerOpenFor time.Duration
	// BreakerProbes is how many attempts half-open lets through; that many
	// successes close it (default 3).
	BreakerProbes uint32
	// CallTimeout bounds one reservation and Kafka write behind the breaker
	// so that a hung dependency becomes a failure instead of a hung request
	// (default 3s).
	CallTimeout time.Duration
	// ModeKey is the Redis key of the ops switch (default ModeKey; tests
	// give each fleet its own).
	ModeKey string
	// ModePoll is how often the ops switch is read from Redis (default
	// 250ms, so every instance obeys within well under 1s).
	ModePoll time.Duration

	// CaptchaTTL is how long a captcha may be answered (default 2 minutes).
	CaptchaTTL time.Duration

	// SoldOutRecheck is how often the stock of the vouchers flagged sold out
	// is read again, in one pipelined round trip (default 500ms; the flag
	// must not outlive returned stock by more than 1s).
	SoldOutRecheck time.Duration
}

func (c *Config) defaults() error {
	if c.GlobalRate <= 0 || c.GlobalBurst <= 0 || c.UserRate <= 0 || c.UserBurst <= 0 {
		return errors.New("edge: rates and bursts must be positive")
	}
	if c.GlobalShards <= 0 {
		c.GlobalShards = min(max(c.GlobalRate/1000, 1), 16)
		if c.GlobalRate < 2000 {
			c.GlobalShards = 1
		}
	}
	if c.CredentialLimit.IsZero() {
		c.CredentialLimit = redis_rate.Limit{Rate: 20, Burst: 10, Period: time.Minute}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.BreakerFailures == 0 {
		c.BreakerFailures = 5
	}
	if c.BreakerProbes == 0 {
		c.BreakerProbes = 3
	}
	def(&c.BreakerOpenFor, 2*time.Second)
	def(&c.CallTimeout, 3*time.Second)
	def(&c.ModePoll, 250*time.Millisecond)
	if c.ModeKey == "" {
		c.ModeKey = ModeKey
	}
	def(&c.CaptchaTTL, 2*time.Minute)
	def(&c.SoldOutRecheck, 500*time.Millisecond)
	return nil
}

// StockReader reads the live stock of vouchers in one round trip
// (redisstock.Store implements it).
type StockReader interface {
	StockLeft(ctx context.Context, voucherIDs ...int64) (map[int64]int64, error)
}

// Edge owns every gate of one instance. Build it with New, run its
// background loops with Start, stop them with Stop.
type Edge struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics

	// Breaker is the circuit breaker and the ops switch (GET/PUT
	// /api/v1/admin/breaker).
	Breaker *Breaker
	// Captchas issues and checks captchas (GET /api/v1/captcha).
	Captchas *Captchas
	// SoldOut is the local sold-out flag.
	SoldOut *SoldOut

	global      *limitGate
	user        *limitGate
	credentials *IPLimit

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// New builds the gates over rdb (the stock's Redis) and stock (to re-check
// sold-out vouchers). Collectors are registered on reg.
func New(rdb redis.UniversalClient, stock StockReader, cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Edge, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	e := &Edge{cfg: cfg, log: log, metrics: m}
	e.Breaker = newBreaker(rdb, cfg, m, log)
	e.SoldOut = newSoldOut(rdb, stock, cfg.SoldOutRecheck, m, log)
	e.Captchas = NewCaptchas(rdb, cfg.CaptchaTTL)
	lim := redis_rate.NewLimiter(rdb)
	e.global = newGlobalLimit(lim, cfg.GlobalRate, cfg.GlobalBurst, cfg.GlobalShards, e.front, m, log)
	e.user = newUserLimit(lim, cfg.UserRate, cfg.UserBurst, e.front, m, log)
	e.credentials = &IPLimit{lim: lim, limit: cfg.CredentialLimit, metrics: m, log: log}
	return e, nil
}

// Start reads the ops switch once (so an instance started after a PUT obeys
// from its first request) and starts the loops: mode polling, the sold-out
// re-check and the stock channel subscription. They end at Stop or when ctx ends.
func (e *Edge) Start(ctx context.Context) {
	ctx, e.stop = context.WithCancel(ctx)
	e.Breaker.refresh(ctx)
	e.wg.Go(func() { e.Breaker.poll(ctx) })
	e.SoldOut.start(ctx, &e.wg)
}

// Stop ends the background loops and waits for them.
func (e *Edge) Stop() {
	if e.stop != nil {
		e.stop()
	}
	e.wg.Wait()
}

// Gates returns the gates for gateway.Deps.Gates.
func (e *Edge) Gates() gateway.Gates {
	return gateway.Gates{
		GlobalLimit: e.global,
		UserLimit:   e.user,
		Captcha:     captchaGate{e},
		Breaker:     e.Breaker,
		SoldOut:     e.SoldOut,
		Credentials: e.credentials,
	}
}

// ObserveStock wraps the stock the buyer reserves in, so the sold-out flag
// learns from every answer's StockLeft (the buyer drops it on a refusal) and
// from every release. Pass the result to seckill.NewBuyer.
func (e *Edge) ObserveStock(s seckill.Stock) seckill.Stock {
	return &observedStock{Stock: s, soldOut: e.SoldOut}
}

// front is the check without I/O that every Redis-touching gate makes first.
func (e *Edge) front(gate string, a *gateway.Attempt) error {
	if err := e.Breaker.Refuse(); err != nil {
		e.metrics.reject(gate, "breaker_open")
		return err
	}
	if err := e.SoldOut.refuse(a.Request.VoucherID); err != nil {
		e.metrics.reject(gate, "sold_out")
		return err
	}
	return nil
}

var (
	_ gateway.Captchas     = (*Captchas)(nil)
	_ gateway.BreakerAdmin = (*Breaker)(nil)
	_ gateway.Gate         = (*Breaker)(nil)
	_ gateway.Gate         = (*SoldOut)(nil)
	_ gateway.IPLimiter    = (*IPLimit)(nil)
)
