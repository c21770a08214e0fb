package edge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Gate names in metrics.
const (
	gateGlobal      = buy.StepGlobalLimit
	gateUser        = buy.StepUserLimit
	gateCredentials = "credentials_limit"
	gateCaptchaIPs  = "captcha_issue_limit"
	gateRegister    = "register_limit"
	gateLoginName   = "login_name_limit"
	gateShopper     = "shopper_limit"
	gateShopperAddr = "shopper_address_limit"
	gateAnonymous   = "address_limit"
	gateBuyAddress  = "buy_address_limit"
	gateCaptcha     = buy.StepCaptcha
	gateBreaker     = "breaker"
	gateSoldOut     = "sold_out"
)

// limitTimeout bounds one rate-limit check: a Redis that does not answer in
// time must not hold the request (the breaker behind judges it).
const limitTimeout = 500 * time.Millisecond

// globalLimit is this instance's share of the global limit: Rate/N per
// second with Burst/N, N the live instances the fleet heartbeat counts,
// enforced by a GCRA in memory (see the package doc). It costs no Redis call.
type globalLimit struct {
	rate, burst int // the fleet's total, as configured
	gcra        *localGCRA
	m           *metrics
}

func newGlobalLimit(rate, burst int, m *metrics) *globalLimit {
	return &globalLimit{rate: rate, burst: burst, gcra: newLocalGCRA(float64(rate), float64(burst)), m: m}
}

// resize sets the share for a fleet of n instances. A burst share below one
// is raised to one, or an instance could admit nothing at all.
func (g *globalLimit) resize(n int) {
	g.gcra.set(float64(g.rate)/float64(n), max(float64(g.burst)/float64(n), 1))
}

// Take implements buy.Limit.
func (g *globalLimit) Take(_ context.Context, a *buy.Attempt) error {
	res := g.gcra.allow(time.Now())
	if !res.allowed {
		setRateHeaders(a.SetHeader, g.rate, 0, res.resetAfter)
		g.m.reject(gateGlobal, "rate_limited")
		return apperr.WithRetryAfter(
			fmt.Errorf("%w: %s", apperr.ErrRateLimited, gateGlobal), res.retryAfter)
	}
	g.m.allow(gateGlobal)
	return nil
}

// userLimit is the per-user GCRA limit, in Redis through redis_rate (keys
// carry redis_rate's own "rate:" prefix), so it is exact across the fleet.
type userLimit struct {
	lim *redis_rate.Limiter
	// breaker counts the limit's Redis failures on the Redis path (see Take).
	breaker *Breaker
	limit   redis_rate.Limit
	rate    int // advertised in RateLimit-Limit, per second
	m       *metrics
	log     *slog.Logger
	// local, when set (Config.UserLimitInStock), judges seckill vouchers'
	// buys in memory instead: the reservation's script holds the exact
	// limit.
	local *AddrLimit
}

func newUserLimit(lim *redis_rate.Limiter, b *Breaker, rate, burst int, m *metrics, log *slog.Logger) *userLimit {
	return &userLimit{
		lim: lim, breaker: b, rate: rate, m: m, log: log,
		limit: redis_rate.Limit{Rate: rate, Burst: burst, Period: time.Second},
	}
}

// Take implements buy.Limit.
func (g *userLimit) Take(ctx context.Context, a *buy.Attempt) error {
	if g.local != nil && a.Voucher.Kind == seckill.KindSeckill {
		// This instance's copy of the limit: N instances let one account
		// through at most N times its rate here, and the reservation's
		// script refuses the rest, so its flood still spends its own
		// budget before the global one, and no Redis call.
		res, err := g.local.charge(strconv.FormatInt(a.Request.UserID, 10), time.Now())
		setRateHeaders(a.SetHeader, g.rate, res.remaining, res.resetAfter)
		return err
	}
	key := "seckill:rl:user:" + strconv.FormatInt(a.Request.UserID, 10)
	lctx, cancel := context.WithTimeout(ctx, limitTimeout)
	res, err := g.lim.Allow(lctx, key, g.limit)
	cancel()
	if err != nil {
		// Refusing here would turn a Redis hiccup into 429s that lie about
		// the reason. The failure counts on the Redis path's breaker, which
		// the buy asks again right after: a Redis that stopped answering
		// opens it after its threshold of limit calls, each bounded by
		// limitTimeout, instead of each buy also waiting out the
		// reservation's call timeout behind it.
		g.breaker.failed(buy.PathRedis, err)
		g.m.reject(gateUser, "error")
		g.log.WarnContext(ctx, "rate limit not checked; letting the attempt through", "gate", gateUser, "err", err)
		return nil
	}
	setRateHeaders(a.SetHeader, g.rate, res.Remaining, res.ResetAfter)
	if res.Allowed == 0 {
		g.m.reject(gateUser, "rate_limited")
		return apperr.WithRetryAfter(
			fmt.Errorf("%w: %s", apperr.ErrRateLimited, gateUser), res.RetryAfter)
	}
	g.m.allow(gateUser)
	return nil
}

// setRateHeaders writes the IETF draft RateLimit-* headers and the older
// X-RateLimit-* ones that many clients still read.
func setRateHeaders(set func(key, value string), rate, remaining int, resetAfter time.Duration) {
	limit, left := strconv.Itoa(rate), strconv.Itoa(max(remaining, 0))
	reset := strconv.Itoa(ceilSeconds(resetAfter))
	// Every seckill buy sets them: the names are written out, not joined
	// per call.
	set("RateLimit-Limit", limit)
	set("RateLimit-Remaining", left)
	set("RateLimit-Reset", reset)
	set("X-RateLimit-Limit", limit)
	set("X-RateLimit-Remaining", left)
	set("X-RateLimit-Reset", reset)
}

// ceilSeconds rounds d up to whole seconds, at least 0.
func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Ceil(d.Seconds()))
}

// IPLimit is the per-client-IP limit on registration and login, against
// password guessing, and on captcha issuing, against floods. It implements
// gateway.IPLimiter.
type IPLimit struct {
	lim     *redis_rate.Limiter
	limit   redis_rate.Limit
	gate    string // its name in metrics, and its keys' prefix
	metrics *metrics
	log     *slog.Logger
}

// Allow implements gateway.IPLimiter. A Redis failure lets the request
// through: bcrypt still makes each guess slow, and refusing every login
// while Redis blinks would be worse.
func (l *IPLimit) Allow(ctx context.Context, clientIP string) error {
	lctx, cancel := context.WithTimeout(ctx, limitTimeout)
	res, err := l.lim.Allow(lctx, "seckill:rl:"+l.gate+":"+clientIP, l.limit)
	cancel()
	if err != nil {
		l.metrics.reject(l.gate, "error")
		l.log.WarnContext(ctx, "per-address rate limit not checked", "gate", l.gate, "err", err)
		return nil
	}
	if res.Allowed == 0 {
		l.metrics.reject(l.gate, "rate_limited")
		return apperr.WithRetryAfter(fmt.Errorf("%w: too many attempts from this address", apperr.ErrRateLimited), res.RetryAfter)
	}
	l.metrics.allow(l.gate)
	return nil
}

// nameLimit bounds the failed logins of one username, in Redis so that it is
// exact across the fleet whatever instance or address a guess comes from: a
// credential-stuffing bot rotating addresses passes every per-address limit
// but still meets this one. Every login takes its unit before bcrypt, in one
// script call (redis_rate's GCRA), so a hundred concurrent guesses get at
// most the burst through, not as many as start before the first fails; a
// login that was not a wrong password gives the unit back. Past the budget
// the gateway asks for a solved captcha instead of refusing, so that a
// guesser cannot keep the owner out.
type nameLimit struct {
	lim   *redis_rate.Limiter
	limit redis_rate.Limit
	m     *metrics
	log   *slog.Logger
}

// nameKey is the Redis key of a username's budget: a digest, so that any
// bytes a client sends make a short key of fixed shape, and case-folded, so
// that "Alice" and "alice" share one budget.
func nameKey(username string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(username)))
	return "seckill:rl:" + gateLoginName + ":" + hex.EncodeToString(sum[:12])
}

// Take implements gateway.NameLimiter. A Redis failure lets the login
// through: bcrypt still makes each guess slow.
func (l *nameLimit) Take(ctx context.Context, username string) error {
	lctx, cancel := context.WithTimeout(ctx, limitTimeout)
	res, err := l.lim.Allow(lctx, nameKey(username), l.limit)
	cancel()
	if err != nil {
		l.m.reject(gateLoginName, "error")
		l.log.WarnContext(ctx, "per-username login limit not checked", "err", err)
		return nil
	}
	if res.Allowed == 0 {
		l.m.reject(gateLoginName, "rate_limited")
		return apperr.WithRetryAfter(fmt.Errorf(
			"%w: too many failed logins for this username; wait before trying again", apperr.ErrRateLimited), max(res.RetryAfter, time.Second))
	}
	l.m.allow(gateLoginName)
	return nil
}

// Refund implements gateway.NameLimiter: a charge of -1 moves the GCRA's
// arrival time back by one interval. redis_rate does not store an arrival
// time that is not ahead of now, so a refund into a rested budget leaves
// its unit charged until it decays, within one interval: the owner's
// successes never hold more than one unit of their own budget.
func (l *nameLimit) Refund(ctx context.Context, username string) {
	lctx, cancel := context.WithTimeout(ctx, limitTimeout)
	_, err := l.lim.AllowN(lctx, nameKey(username), l.limit, -1)
	cancel()
	if err != nil {
		l.log.WarnContext(ctx, "a login's unit of its username's budget was not given back; it decays on its own", "err", err)
	}
}
