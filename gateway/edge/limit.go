package edge

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/seckill"
)

// Gate names in metrics.
const (
	gateGlobal      = "global_limit"
	gateUser        = "user_limit"
	gateCredentials = "credentials_limit"
	gateCaptcha     = "captcha"
	gateBreaker     = "breaker"
	gateSoldOut     = "sold_out"
)

// limitTimeout bounds one rate-limit check: a Redis that does not answer in
// time must not hold the request (the breaker behind judges it).
const limitTimeout = 500 * time.Millisecond

// limitGate is a GCRA limit on the buying route. Keys carry redis_rate's own
// "rate:" prefix in Redis.
type limitGate struct {
	name   string
	lim    *redis_rate.Limiter
	limit  redis_rate.Limit
	keys   []string                      // the global limit's shards
	key    func(*gateway.Attempt) string // the per-user key
	rate   int                           // advertised in RateLimit-Limit, per second
	header bool                          // set RateLimit-* on every answer, not only on a refusal
	front  func(string, *gateway.Attempt) error
	m      *metrics
	log    *slog.Logger
}

func newGlobalLimit(lim *redis_rate.Limiter, rate, burst, shards int, front func(string, *gateway.Attempt) error, m *metrics, log *slog.Logger) *limitGate {
	g := &limitGate{
		name: gateGlobal, lim: lim, rate: rate, front: front, m: m, log: log,
		// Rate/N per second written as Rate per N seconds: exact for any N.
		limit: redis_rate.Limit{Rate: rate, Burst: max(burst/shards, 1), Period: time.Duration(shards) * time.Second},
	}
	for n := range shards {
		g.keys = append(g.keys, "seckill:rl:global:{"+strconv.Itoa(n)+"}")
	}
	return g
}

func newUserLimit(lim *redis_rate.Limiter, rate, burst int, front func(string, *gateway.Attempt) error, m *metrics, log *slog.Logger) *limitGate {
	return &limitGate{
		name: gateUser, lim: lim, rate: rate, front: front, m: m, log: log, header: true,
		limit: redis_rate.Limit{Rate: rate, Burst: burst, Period: time.Second},
		key: func(a *gateway.Attempt) string {
			return "seckill:rl:user:" + strconv.FormatInt(a.Request.UserID, 10)
		},
	}
}

// Pass implements gateway.Gate.
func (g *limitGate) Pass(ctx context.Context, a *gateway.Attempt, next gateway.BuyFunc) (gateway.Purchase, error) {
	if err := g.front(g.name, a); err != nil {
		return gateway.Purchase{}, err
	}
	var key string
	if g.key != nil {
		key = g.key(a)
	} else {
		key = g.keys[rand.IntN(len(g.keys))]
	}
	lctx, cancel := context.WithTimeout(ctx, limitTimeout)
	res, err := g.lim.Allow(lctx, key, g.limit)
	cancel()
	if err != nil {
		// The breaker behind judges Redis; refusing here would turn a
		// Redis hiccup into 429s that lie about the reason.
		g.m.reject(g.name, "error")
		g.log.WarnContext(ctx, "rate limit not checked; letting the attempt through", "gate", g.name, "err", err)
		return next(ctx, a)
	}
	if g.header || res.Allowed == 0 {
		setRateHeaders(a, g.rate, res)
	}
	if res.Allowed == 0 {
		g.m.reject(g.name, "rate_limited")
		return gateway.Purchase{}, gateway.WithRetryAfter(
			fmt.Errorf("%w: %s", seckill.ErrRateLimited, g.name), res.RetryAfter)
	}
	g.m.allow(g.name)
	return next(ctx, a)
}

// setRateHeaders writes the IETF draft RateLimit-* headers and the older
// X-RateLimit-* ones that many clients still read.
func setRateHeaders(a *gateway.Attempt, rate int, res *redis_rate.Result) {
	limit, remaining := strconv.Itoa(rate), strconv.Itoa(max(res.Remaining, 0))
	reset := strconv.Itoa(ceilSeconds(res.ResetAfter))
	for _, p := range []string{"RateLimit-", "X-RateLimit-"} {
		a.SetHeader(p+"Limit", limit)
		a.SetHeader(p+"Remaining", remaining)
		a.SetHeader(p+"Reset", reset)
	}
}

// ceilSeconds rounds d up to whole seconds, at least 0.
func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Ceil(d.Seconds()))
}

// IPLimit is the per-client-IP limit on registration and login, against
// password guessing. It implements gateway.IPLimiter.
type IPLimit struct {
	lim     *redis_rate.Limiter
	limit   redis_rate.Limit
	metrics *metrics
	log     *slog.Logger
}

// Allow implements gateway.IPLimiter. A Redis failure lets the request
// through: bcrypt still makes each guess slow, and refusing every login
// while Redis blinks would be worse.
func (l *IPLimit) Allow(ctx context.Context, clientIP string) error {
	lctx, cancel := context.WithTimeout(ctx, limitTimeout)
	res, err := l.lim.Allow(lctx, "seckill:rl:ip:"+clientIP, l.limit)
	cancel()
	if err != nil {
		l.metrics.reject(gateCredentials, "error")
		l.log.WarnContext(ctx, "credential rate limit not checked", "err", err)
		return nil
	}
	if res.Allowed == 0 {
		l.metrics.reject(gateCredentials, "rate_limited")
		return gateway.WithRetryAfter(fmt.Errorf("%w: too many attempts from this address", seckill.ErrRateLimited), res.RetryAfter)
	}
	l.metrics.allow(gateCredentials)
	return nil
}
