package redisstock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill/apperr"
)

// healRequests is the list on which gateways ask the healers to look at a
// voucher at once (voucher ids, newest first). It is read and written by
// plain commands only, never inside a script, so one key outside any
// voucher's hash tag is legal on Redis Cluster. It is trimmed on every push.
const healRequests = "seckill:heal:requests"

// healRequestsMax bounds healRequests: a flood of refused buys cannot grow it.
const healRequestsMax = 1000

// healAskEvery is how often one instance asks for the same voucher's heal:
// a crowd refused for the same missing voucher sends one request, not one
// per shopper.
const healAskEvery = 500 * time.Millisecond

// healAsks remembers when this Store last asked for each voucher's heal.
type healAsks struct {
	mu   sync.Mutex
	last map[int64]time.Time
}

// RequestHeal asks the healers (orders.Healer, in the sweeper role) to look
// at voucherID now rather than at their next pass. It is the Buyer's hook
// (seckill.HealRequests): at most one push per voucher per healAskEvery from
// this instance, best effort (a lost request only waits for the next pass).
func (s *Store) RequestHeal(ctx context.Context, voucherID int64) {
	now := time.Now()
	s.asks.mu.Lock()
	if s.asks.last == nil {
		s.asks.last = map[int64]time.Time{}
	}
	if now.Sub(s.asks.last[voucherID]) < healAskEvery {
		s.asks.mu.Unlock()
		return
	}
	s.asks.last[voucherID] = now
	for id, at := range s.asks.last { // forget old entries: the map stays small
		if now.Sub(at) > time.Minute {
			delete(s.asks.last, id)
		}
	}
	s.asks.mu.Unlock()
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.LPush(ctx, healRequests, voucherID)
		p.LTrim(ctx, healRequests, 0, healRequestsMax-1)
		return nil
	})
}

// HealRequests waits up to wait for voucher ids asked for by RequestHeal and
// returns them (none when the wait ended empty). Several healers may wait:
// each request goes to one of them, and every healer also scans on its own.
func (s *Store) HealRequests(ctx context.Context, wait time.Duration) ([]int64, error) {
	got, err := s.rdb.BLPop(ctx, wait, healRequests).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("heal requests", err)
	}
	vals := []string{got[1]}
	more, err := s.rdb.LPopCount(ctx, healRequests, 100).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("heal requests", err)
	}
	vals = append(vals, more...)
	seen := map[int64]bool{}
	var ids []int64
	for _, v := range vals {
		if id, err := strconv.ParseInt(v, 10, 64); err == nil && id > 0 && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Missing returns the vouchers among ids that have no meta in Redis, in any
// of their buckets: not on sale there (lost with Redis's data, wiped,
// expired, or taken off sale by a repair). One pipelined round trip.
func (s *Store) Missing(ctx context.Context, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	counts, err := s.shardCounts(ctx, ids)
	if err != nil {
		return nil, err
	}
	cmds := make([][]*redis.IntCmd, len(ids))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			for b := range counts[id] {
				cmds[i] = append(cmds[i], p.Exists(ctx, BucketKeys(id, b).Meta))
			}
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("missing", err)
	}
	var out []int64
	for i, list := range cmds {
		for _, c := range list {
			if c.Val() == 0 {
				out = append(out, ids[i])
				break
			}
		}
	}
	return out, nil
}

// HealLock is one healer's lease on one voucher's heal: while it holds, no
// other healer rebuilds the voucher, and Rebuild with Truth.Fence set to its
// Token commits only while no later lease has written (fencing: a healer that
// paused past its lease cannot overwrite the work of the next one). Each
// lease carries a fencing number greater than every earlier lease's of the
// voucher (lua/heal_lock.lua), which Rebuild compares in every bucket's own
// slot. A dead healer's lease simply expires.
type HealLock struct {
	s     *Store
	key   string
	token string
	ttl   time.Duration
}

// healFenceKeep is how long the voucher's last fencing number is kept after
// a lease is taken. Losing it is harmless (lua/heal_lock.lua falls back on
// the server's clock); keeping it guards against a clock that repeats.
const healFenceKeep = 7 * 24 * time.Hour

// LockHeal takes the heal lease of voucherID for ttl. ok is false when
// another healer holds it.
func (s *Store) LockHeal(ctx context.Context, voucherID int64, ttl time.Duration) (_ *HealLock, ok bool, err error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	k := VoucherKeys(voucherID)
	tok, err := redis.NewScript(lua.HealLock).Run(ctx, s.rdb, []string{k.Heal, k.HealFence},
		hex.EncodeToString(b[:]), ttl.Milliseconds(), healFenceKeep.Milliseconds()).Text()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, unavailable("heal lock", err)
	}
	return &HealLock{s: s, key: k.Heal, token: tok, ttl: ttl}, true, nil
}

// Token is the lease's fencing token, for Truth.Fence: its fencing number,
// ':' and a random part.
func (l *HealLock) Token() string { return l.token }

// Renew extends the lease by its ttl if it is still ours; false when it was
// lost (expired and taken, or wiped with Redis's data).
func (l *HealLock) Renew(ctx context.Context) (bool, error) {
	n, err := redis.NewScript(lua.LeaseRenew).Run(ctx, l.s.rdb, []string{l.key}, l.token, l.ttl.Milliseconds()).Int64()
	if err != nil {
		return false, unavailable("heal lock renew", err)
	}
	return n == 1, nil
}

// Unlock gives the lease up if it is still ours (compare-and-delete).
func (l *HealLock) Unlock(ctx context.Context) error {
	if err := redis.NewScript(lua.LeaseRelease).Run(ctx, l.s.rdb, []string{l.key}, l.token).Err(); err != nil {
		return unavailable("heal unlock", err)
	}
	return nil
}

// errFenceLost is Rebuild's answer when Truth.Fence no longer holds the lease.
var errFenceLost = fmt.Errorf("%w: the heal lease was lost before the rebuild committed; another healer owns the voucher now", apperr.ErrConflict)

// fenceNumber is the fencing number of a HealLock's token ("" is unfenced:
// 0).
func fenceNumber(token string) (int64, error) {
	if token == "" {
		return 0, nil
	}
	num, _, _ := strings.Cut(token, ":")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: the fence %q is not a heal lease's token", apperr.ErrInvalidInput, token)
	}
	return n, nil
}
