// Package edge holds the gates in front of the buying path.
//
// They are the per-address, per-user and global rate limits, the per-address limit of the
// anonymous routes, the per-user and per-address limits of the other signed-in routes, the
// per-username limit of failed logins, the single-use
// captcha, the circuit breaker with its fleet-wide ops switch, and the
// sold-out flag. It implements buy.Steps and gateway.Gates and knows
// nothing of HTTP: every refusal is an error wrapping a kind of
// seckill/apperr or a refusal of seckill, which the gateway turns into a
// status code.
//
// # Order
//
// The buy runs its steps in the order written once, on buy.Pipeline
// (gateway/buy/pipeline.go): this package gives it the limits, the fast
// refusal (the breaker's and the sold-out flag's answer without I/O), the
// captcha, the breaker and the sold-out flag, through Steps.
//
// # The global limit without a hot key or a round trip
//
// A single GCRA key for all shoppers puts every buy of the fleet on one Redis
// key (one Redis Cluster shard, one CPU) and costs a round trip per buy;
// splitting it over a few keys removes the hot key but not the round trip,
// which was a quarter of the accepted rate on the benchmark machine. So each
// instance enforces its share, Rate/N per second with Burst/N, in memory with
// the same GCRA (a mutex and a few float operations), where N is the number of
// live gateway instances. The sum of the shares is the configured limit, with
// no hot key and no Redis call per request.
//
// N is learned from Redis: once a second every instance heartbeats into the
// sorted set FleetKey (member its id, score Redis's clock), drops the members
// silent for 3 s and counts the rest, all in one script call, off the request
// path. A new instance counts itself in Run before it serves, and a stopped
// one takes itself out; if Redis does not answer, the last N is kept.
//
// The price is the time the fleet takes to agree on N: for the one to three
// seconds after an instance joins, the others still use the old N, and after
// an instance dies without leaving the others wait for the stale window. In
// that time the fleet admits up to one instance's share too much (on a join)
// or too little (on a death). The error is bounded by one share and by a few
// seconds, and nothing that must be exact rests on it: the per-user limit is
// GCRA in Redis (redis_rate, exact across the fleet) and the stock is checked
// by reserve.lua. Traffic should be spread evenly over the instances (any
// load balancer does): an instance that gets less than its share leaves the
// rest of it unused.
//
// GCRA admits at most Burst + Rate·t in any window of t seconds. With Burst
// equal to Rate (a known trap of GCRA) the first second after a quiet
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
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// Config sets the gates. Zero values take the defaults named on each field,
// but for the four rates and bursts of the buy, which must be set.
type Config struct {
	// Redis is the stock's Redis: the limits, the captchas, the ops switch
	// and the fleet's heartbeat live there.
	Redis redis.UniversalClient
	// Stock is read to re-check the vouchers flagged sold out.
	Stock StockReader
	// Registerer receives the gates' collectors; nil registers nothing.
	Registerer prometheus.Registerer
	// Log gets the gates' failures (slog.Default() when nil).
	Log *slog.Logger

	// GlobalRate and GlobalBurst bound the buys of all shoppers together,
	// per second, over the whole fleet: each instance enforces 1/N of both.
	GlobalRate, GlobalBurst int
	// FleetKey is the Redis sorted set the instances heartbeat in to count
	// themselves (default FleetKey; tests give each fleet its own).
	FleetKey string
	// FleetBeat is how often an instance heartbeats; one silent for three
	// beats is no longer counted (default 1s).
	FleetBeat time.Duration
	// UserRate and UserBurst bound one shopper's buys, per second.
	UserRate, UserBurst int
	// UserLimitInStock says the seckill reservation itself judges the
	// per-user limit, exactly and fleet-wide, per voucher bucket
	// (redisstock.Config.UserLimit, with the same rate and burst). The
	// user limit then keeps, for seckill vouchers, only an in-memory copy
	// per instance (no Redis call), so that one account's flood is still cut
	// by its own budget before the global limit; other kinds keep the
	// Redis limit.
	UserLimitInStock bool
	// CredentialLimit bounds registrations and logins per client IP,
	// together (default 20 per minute, burst 10): password guessing.
	CredentialLimit redis_rate.Limit
	// AddressRate and AddressBurst bound every anonymous route (catalog,
	// captcha, registration, login, WebSocket handshake) per client
	// address, an IPv6 /56 counting as one, in this instance's memory
	// (default 50/s, burst 200: a shopper's page makes a handful of such
	// requests when it opens, a script thousands).
	AddressRate, AddressBurst int
	// BuyAddressRate and BuyAddressBurst bound the buys of one client
	// address, whatever accounts they are sent for, in this instance's
	// memory, before the per-user and global limits (default 50/s, burst
	// 100: ten shoppers behind one address, each at the per-user limit).
	BuyAddressRate, BuyAddressBurst int
	// ShopperRate and ShopperBurst bound one shopper's requests to the
	// signed-in routes other than the buy (orders, one order, pay, cancel,
	// the waiting room's join and read, the WebSocket's handshake with a
	// token), in this instance's memory (default
	// 10/s, burst 30: the page makes a few such requests when it opens and
	// then listens on its socket).
	ShopperRate, ShopperBurst int
	// ShopperAddressRate and ShopperAddressBurst bound the same routes per
	// client address, an IPv6 /64 counting as one, whatever accounts the
	// requests are for, after the per-user limit (default 100/s, burst 300:
	// many shoppers may share one address).
	ShopperAddressRate, ShopperAddressBurst int
	// LoginNameLimit bounds the failed logins of one username, fleet-wide
	// in Redis, whatever addresses they come from (default 10 per minute,
	// burst 5): credential stuffing from rotating addresses. Past it a
	// login needs a solved captcha.
	LoginNameLimit redis_rate.Limit
	// CaptchaLimit bounds new captchas per client IP (default 120 per
	// minute, burst 30): generous, since many shoppers may share one
	// address, but an anonymous client cannot flood image generation.
	CaptchaLimit redis_rate.Limit
	// RegisterLimit bounds registrations per client IP, fleet-wide in
	// Redis (default 10 per minute, burst 5): each account a bot makes
	// costs it a unit of its address's budget, beside CredentialLimit's.
	RegisterLimit redis_rate.Limit

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
	// PoW prices the proof-of-work challenges (defaults on PoWConfig).
	PoW PoWConfig

	// SoldOutRecheck is how often the stock of the vouchers flagged sold out
	// is read again, in one pipelined round trip (default 500ms; the flag
	// must not outlive returned stock by more than 1s).
	SoldOutRecheck time.Duration
}

func (c *Config) defaults() error {
	if c.GlobalRate <= 0 || c.GlobalBurst <= 0 || c.UserRate <= 0 || c.UserBurst <= 0 {
		return errors.New("edge: rates and bursts must be positive")
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.CredentialLimit.IsZero() {
		c.CredentialLimit = redis_rate.Limit{Rate: 20, Burst: 10, Period: time.Minute}
	}
	if c.RegisterLimit.IsZero() {
		c.RegisterLimit = redis_rate.Limit{Rate: 10, Burst: 5, Period: time.Minute}
	}
	if c.LoginNameLimit.IsZero() {
		c.LoginNameLimit = redis_rate.Limit{Rate: 10, Burst: 5, Period: time.Minute}
	}
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	defInt(&c.AddressRate, 50)
	defInt(&c.AddressBurst, 200)
	defInt(&c.BuyAddressRate, 50)
	defInt(&c.BuyAddressBurst, 100)
	defInt(&c.ShopperRate, 10)
	defInt(&c.ShopperBurst, 30)
	defInt(&c.ShopperAddressRate, 100)
	defInt(&c.ShopperAddressBurst, 300)
	if c.CaptchaLimit.IsZero() {
		c.CaptchaLimit = redis_rate.Limit{Rate: 120, Burst: 30, Period: time.Minute}
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
	c.PoW.defaults()
	def(&c.SoldOutRecheck, 500*time.Millisecond)
	def(&c.FleetBeat, time.Second)
	if c.FleetKey == "" {
		c.FleetKey = FleetKey
	}
	return nil
}

// StockReader is what the sold-out flag reads of the stock (redisstock.Store
// implements it): the live stock of vouchers in one round trip, and the
// requests a voucher accepted, for replays of a sold-out voucher.
type StockReader interface {
	StockLeft(ctx context.Context, voucherIDs ...int64) (map[int64]int64, error)
	RequestKeys(ctx context.Context, voucherID int64, max int) (map[redisstock.Request]int64, bool, error)
}

// Edge owns every gate of one instance. Build it with New; Run runs its
// background loops.
type Edge struct {
	cfg     Config
	rdb     redis.UniversalClient
	stock   StockReader
	log     *slog.Logger
	metrics *metrics

	// Breaker is the circuit breaker and the ops switch (GET/PUT
	// /api/v1/admin/breaker).
	Breaker *Breaker
	// Captchas issues and checks captchas (GET /api/v1/captcha).
	Captchas *Captchas
	// Challenges issues and spends proof-of-work challenges (GET
	// /api/v1/challenges).
	Challenges *Challenges
	// SoldOut is the local sold-out flag.
	SoldOut *SoldOut

	global       *globalLimit
	fleet        *fleet
	user         *userLimit
	credentials  *IPLimit
	captchaIssue *IPLimit
	register     *IPLimit
	anonymous    *AddrLimit
	buyAddress   *AddrLimit
	loginName    *nameLimit
	shopper      *shopperLimit

	ran   atomic.Bool
	ready chan struct{}
}

// New builds the gates of cfg. It starts nothing: Run does.
func New(cfg Config) (*Edge, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rdb, stock, reg, log := cfg.Redis, cfg.Stock, cfg.Registerer, cfg.Log
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	e := &Edge{cfg: cfg, rdb: rdb, stock: stock, log: log, metrics: m, ready: make(chan struct{})}
	e.Breaker = newBreaker(rdb, cfg, m, log)
	e.SoldOut = newSoldOut(rdb, stock, cfg.SoldOutRecheck, m, log)
	e.Captchas = NewCaptchas(rdb, cfg.CaptchaTTL)
	e.Challenges = &Challenges{rdb: rdb, cfg: cfg.PoW, m: m, now: time.Now}
	// The limits' scripts share round trips with the reservations of
	// concurrent buys (redisstock.GroupCommit): the per-user limit is the
	// buy's other Redis call.
	lim := redis_rate.NewLimiter(redisstock.GroupCommit(rdb))
	e.global = newGlobalLimit(cfg.GlobalRate, cfg.GlobalBurst, m)
	e.fleet = newFleet(rdb, cfg.FleetKey, cfg.FleetBeat, log, e.global.resize)
	if reg != nil {
		if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "seckill_gateway_instances",
			Help: "Live gateway instances as this one last counted them; its global rate limit share is 1/this.",
		}, func() float64 { return float64(e.fleet.n()) })); err != nil {
			return nil, err
		}
	}
	e.user = newUserLimit(lim, e.Breaker, cfg.UserRate, cfg.UserBurst, m, log)
	if cfg.UserLimitInStock {
		e.user.local = newAddrLimit(gateUser, cfg.UserRate, cfg.UserBurst, m)
	}
	e.credentials = &IPLimit{lim: lim, limit: cfg.CredentialLimit, gate: gateCredentials, metrics: m, log: log}
	e.register = &IPLimit{lim: lim, limit: cfg.RegisterLimit, gate: gateRegister, metrics: m, log: log}
	e.captchaIssue = &IPLimit{lim: lim, limit: cfg.CaptchaLimit, gate: gateCaptchaIPs, metrics: m, log: log}
	e.anonymous = newAddrLimit(gateAnonymous, cfg.AddressRate, cfg.AddressBurst, m)
	e.buyAddress = newAddrLimit(gateBuyAddress, cfg.BuyAddressRate, cfg.BuyAddressBurst, m)
	e.loginName = &nameLimit{lim: lim, limit: cfg.LoginNameLimit, m: m, log: log}
	e.shopper = &shopperLimit{
		user: newAddrLimit(gateShopper, cfg.ShopperRate, cfg.ShopperBurst, m),
		addr: newAddrLimit(gateShopperAddr, cfg.ShopperAddressRate, cfg.ShopperAddressBurst, m),
	}
	return e, nil
}

// Run reads the ops switch once (so an instance started after a PUT obeys
// from its first request), heartbeats once (so it takes its share of the
// global limit, not all of it, from its first request) and subscribes to
// the stock channel, closes Ready, then runs the loops: the heartbeat, mode
// polling, the in-memory limits' sweeps and the sold-out re-check. When ctx
// ends they stop, the heartbeat takes this instance out of the fleet, and
// Run returns nil. Call it once.
func (e *Edge) Run(ctx context.Context) error {
	if e.ran.Swap(true) {
		return errors.New("edge: Run was called twice")
	}
	var wg sync.WaitGroup
	e.Breaker.refresh(ctx)
	e.fleet.beat(ctx)
	wg.Go(func() { e.fleet.run(ctx) })
	wg.Go(func() { e.Breaker.poll(ctx) })
	wg.Go(func() { e.anonymous.run(ctx) })
	wg.Go(func() { e.buyAddress.run(ctx) })
	wg.Go(func() { e.shopper.user.run(ctx) })
	wg.Go(func() { e.shopper.addr.run(ctx) })
	if e.user.local != nil {
		wg.Go(func() { e.user.local.run(ctx) })
	}
	e.SoldOut.start(ctx, &wg)
	close(e.ready)
	wg.Wait()
	return nil
}

// Ready is closed once Run has read the ops switch, counted this instance
// in the fleet and subscribed to the stock channel: the gates may be asked
// from then on.
func (e *Edge) Ready() <-chan struct{} { return e.ready }

// Instances is the number of live gateway instances, this one included, as
// this instance last counted them. Its share of the global limit is
// 1/Instances of the rate and of the burst.
func (e *Edge) Instances() int { return e.fleet.n() }

// Gates returns the limits of the routes other than the buy, for
// gateway.Deps.Gates.
func (e *Edge) Gates() gateway.Gates {
	return gateway.Gates{
		Credentials:  e.credentials,
		Registration: e.register,
		CaptchaIssue: e.captchaIssue,
		Anonymous:    e.anonymous,
		LoginName:    e.loginName,
		Shopper:      e.shopper,
	}
}

// Steps returns the buy's steps, for buy.Deps.Steps.
func (e *Edge) Steps() buy.Steps {
	return buy.Steps{
		Address:   e.buyAddress,
		User:      e.user,
		Global:    e.global,
		Fast:      fastRefusal{e},
		Captcha:   captchaGate{e},
		Challenge: e.Challenges,
		Breaker:   e.Breaker,
		SoldOut:   e.SoldOut,
	}
}

// fastRefusal is the buy's check without I/O in front of each step that
// costs something: the breaker's refusal, then the sold-out flag's.
type fastRefusal struct{ e *Edge }

// Refuse implements buy.Fast. The refusal is counted under the step it
// stands in front of.
func (f fastRefusal) Refuse(step, path string, a *buy.Attempt) error {
	if err := f.e.Breaker.Refuse(path); err != nil {
		f.e.metrics.reject(step, "breaker_open")
		return err
	}
	if err := f.e.SoldOut.refuseAttempt(a); err != nil {
		f.e.metrics.reject(step, "sold_out")
		return err
	}
	return nil
}

var (
	_ gateway.Captchas       = (*Captchas)(nil)
	_ gateway.Challenges     = (*Challenges)(nil)
	_ buy.Challenge          = (*Challenges)(nil)
	_ gateway.BreakerAdmin   = (*Breaker)(nil)
	_ gateway.BreakerPaths   = (*Breaker)(nil)
	_ buy.Breaker            = (*Breaker)(nil)
	_ buy.SoldOut            = (*SoldOut)(nil)
	_ gateway.IPLimiter      = (*IPLimit)(nil)
	_ gateway.IPLimiter      = (*AddrLimit)(nil)
	_ buy.Limit              = (*AddrLimit)(nil)
	_ gateway.NameLimiter    = (*nameLimit)(nil)
	_ gateway.ShopperLimiter = (*shopperLimit)(nil)
)
