// Package hoard counts the holds a shopper let expire unpaid or cancelled
// (strikes) and refuses new holds to one with too many of them recently. It
// is the only package that knows the strikes' Redis keys.
//
// A shopper's strikes are one sorted set, seckill:hoard:{u<ID>}: the order
// id of each strike, scored by when it happened (Unix milliseconds). Every
// write trims the strikes older than the window and sets the key to expire a
// window after it, so a shopper who stops hoarding leaves nothing behind and
// the set never holds more than the window's strikes. A strike is counted
// once per order however often it is recorded (the sweeper and a cancel may
// both report a race's loser; a retried write changes nothing).
//
// Times are the caller's clock, not Redis's: the window is a day by default
// and the fleet's clocks agree far better than that.
package hoard

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// DefaultWindow is Config.Window's default.
const DefaultWindow = 24 * time.Hour

// CheckTimeout bounds Check's read, as gateway/edge bounds a rate limit's
// check: on a Redis link gone silent the read ends and the buy goes on to
// the breaker, instead of waiting out the request's deadline. It is set
// around the read itself, so a Watch that judges a shopper from memory
// costs the buy no timer.
const CheckTimeout = 500 * time.Millisecond

// Config is what New builds a Store from.
type Config struct {
	// Redis holds the strikes.
	Redis redis.UniversalClient
	// Hot is the face of Redis that Check reads through, on the buy path
	// (redisstock.GroupCommit of Redis, so the read shares the round trips
	// of concurrent buys); nil: Redis.
	Hot redis.Cmdable
	// Limit is how many strikes within Window refuse new holds (0 or
	// less: nobody is refused; strikes are still counted).
	Limit int
	// Window is how long a strike counts (DefaultWindow when 0).
	Window time.Duration
}

// Store records strikes and judges buys by them.
type Store struct {
	rdb    redis.UniversalClient
	hot    redis.Cmdable
	limit  int
	window time.Duration
	now    func() time.Time
	// watch is this Store's Watch, told of its own strikes at once.
	watch atomic.Pointer[Watch]
}

// New returns a Store.
func New(cfg Config) *Store {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	hot := cfg.Hot
	if hot == nil {
		hot = cfg.Redis
	}
	return &Store{rdb: cfg.Redis, hot: hot, limit: cfg.Limit, window: cfg.Window, now: time.Now}
}

// Strike is one hold the shopper let expire unpaid or cancelled.
type Strike struct {
	UserID  int64
	OrderID int64
	At      time.Time
}

// key is the sorted set of one shopper's strikes. The hash tag is the user,
// so the trims and writes of one shopper are one slot's.
func key(userID int64) string {
	return "seckill:hoard:{u" + strconv.FormatInt(userID, 10) + "}"
}

// Record counts the strikes, in one round trip however many shoppers they
// are of (a sweep cancels a batch at once).
func (s *Store) Record(ctx context.Context, strikes ...Strike) error {
	if len(strikes) == 0 {
		return nil
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, st := range strikes {
			k := key(st.UserID)
			// NX: a strike reported twice keeps its first time.
			p.ZAddNX(ctx, k, redis.Z{Score: float64(st.At.UnixMilli()), Member: strconv.FormatInt(st.OrderID, 10)})
			p.ZRemRangeByScore(ctx, k, "-inf", "("+strconv.FormatInt(st.At.Add(-s.window).UnixMilli(), 10))
			p.PExpire(ctx, k, s.window)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("hoard: record %d strikes: %w", len(strikes), err)
	}
	// After the writes, so that a Watch that reads the strikes after
	// subscribing misses none (watch.go).
	pairs := make([]string, len(strikes))
	for i, st := range strikes {
		pairs[i] = strconv.FormatInt(st.UserID, 10) + ":" + strconv.FormatInt(st.At.UnixMilli(), 10)
	}
	payload := strings.Join(pairs, ",")
	if w := s.watch.Load(); w != nil {
		// This process's own copy knows at once: a shopper refused right
		// after their cancel, on the gateway that answered it.
		w.add(payload)
	}
	if err := s.rdb.Publish(ctx, StruckChannel, payload).Err(); err != nil {
		return fmt.Errorf("hoard: announce %d strikes: %w", len(strikes), err)
	}
	return nil
}

// Check refuses a new hold of a shopper with Limit strikes in the window:
// seckill.ErrUnpaidLimit, whose message says when they may buy again (when
// the oldest of the Limit newest strikes leaves the window). It is one read
// of at most Limit entries.
func (s *Store) Check(ctx context.Context, userID int64) error {
	if s.limit <= 0 {
		return nil
	}
	now := s.now()
	rctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	newest, err := s.hot.ZRangeArgsWithScores(rctx, redis.ZRangeArgs{
		Key: key(userID), ByScore: true, Rev: true,
		Start: "+inf", Stop: "(" + strconv.FormatInt(now.Add(-s.window).UnixMilli(), 10),
		Count: int64(s.limit),
	}).Result()
	cancel()
	if err != nil {
		return fmt.Errorf("hoard: check user %d: %w", userID, err)
	}
	if len(newest) < s.limit {
		return nil
	}
	until := time.UnixMilli(int64(newest[len(newest)-1].Score)).Add(s.window).UTC()
	return apperr.WithRetryAt(apperr.Publicf(seckill.ErrUnpaidLimit,
		"%d of your holds expired unpaid or were cancelled recently; you may buy again at %s",
		len(newest), until.Format(time.RFC3339)), until.Truncate(time.Second)) // the message's moment
}

// Count is a shopper's strikes within the window, for operators.
type Count struct {
	UserID  int64
	Strikes []Strike // oldest first
	// Refused says new holds are refused now; Until is when that ends.
	Refused bool
	Until   time.Time
}

// Show reads a shopper's strikes within the window.
func (s *Store) Show(ctx context.Context, userID int64) (Count, error) {
	now := s.now()
	zs, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
		Key: key(userID), ByScore: true,
		Start: "(" + strconv.FormatInt(now.Add(-s.window).UnixMilli(), 10), Stop: "+inf",
	}).Result()
	if err != nil {
		return Count{}, fmt.Errorf("hoard: show user %d: %w", userID, err)
	}
	c := Count{UserID: userID}
	for _, z := range zs {
		m, _ := z.Member.(string)
		id, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			return Count{}, fmt.Errorf("hoard: show user %d: strike %q: %w", userID, m, err)
		}
		c.Strikes = append(c.Strikes, Strike{UserID: userID, OrderID: id, At: time.UnixMilli(int64(z.Score)).UTC()})
	}
	if s.limit > 0 && len(c.Strikes) >= s.limit {
		c.Refused = true
		c.Until = c.Strikes[len(c.Strikes)-s.limit].At.Add(s.window)
	}
	return c, nil
}

// Clear forgets a shopper's strikes (an operator's pardon) and reports how
// many there were.
func (s *Store) Clear(ctx context.Context, userID int64) (int, error) {
	c, err := s.Show(ctx, userID)
	if err != nil {
		return 0, err
	}
	if err := s.rdb.Del(ctx, key(userID)).Err(); err != nil {
		return 0, fmt.Errorf("hoard: clear user %d: %w", userID, err)
	}
	return len(c.Strikes), nil
}
