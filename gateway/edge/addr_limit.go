package edge

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill/apperr"
)

// addrShards splits AddrLimit's table so that concurrent requests from
// different addresses rarely wait on one mutex.
const addrShards = 64

// addrSweepEvery is how often AddrLimit forgets the addresses that are fully
// rested. A rested address and a forgotten one decide alike (GCRA with a tat
// in the past is a fresh limiter), so forgetting changes no answer; it only
// keeps the table as small as the set of addresses seen in the last
// burst/rate seconds.
const addrSweepEvery = 5 * time.Second

// AddrLimit is a per-client-address GCRA kept in this instance's memory:
// rate per second with a burst, for each key (gateway.Server.clientKey: the
// address for IPv4, the /56 for IPv6; the signed-in routes' shopper limit
// keys one of them by user id instead). It costs a hash and a mutex, no Redis
// round trip, so it can stand in front of routes that must stay nearly as
// fast as /healthz (the catalog) and in front of the buy without adding a
// round trip.
//
// It is per instance on purpose. A limit for anonymous reads exists to stop
// scripts, not to meter shoppers exactly; N instances behind a balancer give
// one address up to N times the rate, which still stops a script and costs
// the fleet nothing per request. Exact, fleet-wide per-address budgets
// (password guessing) stay in Redis (IPLimit).
type AddrLimit struct {
	name     string // its name in metrics
	interval float64
	offset   float64
	rate     int
	epoch    time.Time
	seed     maphash.Seed
	shards   [addrShards]addrShard
	m        *metrics
}

type addrShard struct {
	mu  sync.Mutex
	tat map[string]float64
	_   [40]byte // keep neighbouring shards' mutexes off one cache line
}

// newAddrLimit returns a limit of rate per second and burst per key.
func newAddrLimit(name string, rate, burst int, m *metrics) *AddrLimit {
	interval := float64(time.Second) / float64(rate)
	l := &AddrLimit{
		name: name, rate: rate, interval: interval, offset: float64(burst) * interval,
		epoch: time.Now(), seed: maphash.MakeSeed(), m: m,
	}
	for i := range l.shards {
		l.shards[i].tat = make(map[string]float64)
	}
	return l
}

// decide charges one request from key at now.
func (l *AddrLimit) decide(key string, now time.Time) gcraResult {
	t := float64(now.Sub(l.epoch))
	sh := &l.shards[maphash.String(l.seed, key)%addrShards]
	sh.mu.Lock()
	tat, res := gcraStep(sh.tat[key], t, l.interval, l.offset)
	if res.allowed {
		sh.tat[key] = tat
	}
	sh.mu.Unlock()
	return res
}

// Allow implements gateway.IPLimiter.
func (l *AddrLimit) Allow(_ context.Context, key string) error {
	_, err := l.charge(key, time.Now())
	return err
}

// charge decides one request of key at now; a refusal carries its
// Retry-After.
func (l *AddrLimit) charge(key string, now time.Time) (gcraResult, error) {
	res := l.decide(key, now)
	if !res.allowed {
		l.m.reject(l.name, "rate_limited")
		return res, apperr.WithRetryAfter(
			fmt.Errorf("%w: %s: too many requests", apperr.ErrRateLimited, l.name), res.retryAfter)
	}
	l.m.allow(l.name)
	return res, nil
}

// Take implements buy.Limit on the buying path, keyed on
// Attempt.ClientKey: an address (or an IPv6 /56) can use only its own
// budget, whatever number of accounts it sends from, and a request refused
// here charges no limit behind it.
func (l *AddrLimit) Take(ctx context.Context, a *buy.Attempt) error {
	if a.ClientKey == "" {
		return nil // no address known (a test's direct call): nothing to key on
	}
	return l.Allow(ctx, a.ClientKey)
}

// sweep forgets every key whose tat is in the past: fully rested.
func (l *AddrLimit) sweep(now time.Time) (kept int) {
	t := float64(now.Sub(l.epoch))
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k, tat := range sh.tat {
			if tat <= t {
				delete(sh.tat, k)
			}
		}
		kept += len(sh.tat)
		sh.mu.Unlock()
	}
	return kept
}

// run sweeps until ctx ends.
func (l *AddrLimit) run(ctx context.Context) {
	every(ctx, addrSweepEvery, func(context.Context) { l.sweep(time.Now()) })
}
