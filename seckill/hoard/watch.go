package hoard

// A gateway's copy of who has strikes, so that the buy of a shopper with
// none (nearly every buy) is judged without reading Redis.
//
// Record publishes every strike on StruckChannel once it is written. A Watch
// subscribes, then reads every shopper's newest strike (SCAN of the strikes'
// keys), and from then on adds each published strike: a strike written
// before the subscription is in the read, one written after it is in a
// message. Check answers "no strikes" from memory only for a shopper absent
// from that copy while it is whole; any other shopper, and every shopper
// while the copy is not whole (before the first read, after a lost
// subscription until the read that follows it, or past MaxUsers), is
// judged by Store.Check, Redis's exact answer. A copy never says "struck"
// on its own, so a pardon (Clear) or a strike leaving the window needs no
// message. The copy is read again every Resync, which also bounds how long
// a strike whose message was lost (its writer died between the two) goes
// unseen.
//
// What is left: a strike reaches the other gateways one message delivery
// after Record returns. A shopper whose cancel is answered and whose next
// buy reaches another gateway before that delivery (well under a
// millisecond on one network) is judged without it, once.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill/pause"
)

// StruckChannel is the pub/sub channel of recorded strikes: each message is
// "userID:atMs" pairs, comma separated.
const StruckChannel = "seckill:hoard:struck"

// DefaultResync is WatchConfig.Resync's default.
const DefaultResync = time.Minute

// DefaultMaxUsers is WatchConfig.MaxUsers' default: a few dozen MiB at
// most, far more shoppers than strike within a window of a sale.
const DefaultMaxUsers = 1 << 20

// WatchConfig is what Store.Watch builds a Watch from.
type WatchConfig struct {
	// Resync is how often the whole copy is read again (DefaultResync).
	Resync time.Duration
	// MaxUsers bounds the copy; past it every buy is read from Redis until
	// a read finds fewer (DefaultMaxUsers).
	MaxUsers int
	// Log gets the failed reads (slog.Default() when nil).
	Log *slog.Logger
}

// Watch is a gateway's copy of the shoppers with strikes. Its Check is
// Store.Check's answer.
type Watch struct {
	store *Store
	cfg   WatchConfig
	ready chan struct{}

	mu     sync.RWMutex
	whole  bool
	struck map[int64]int64 // userID -> newest strike, Unix ms
}

// Watch returns a Watch over s, which s's own Record tells of its strikes
// at once; one per Store. It starts nothing: Run does.
func (s *Store) Watch(cfg WatchConfig) *Watch {
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.MaxUsers <= 0 {
		cfg.MaxUsers = DefaultMaxUsers
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	w := &Watch{store: s, cfg: cfg, ready: make(chan struct{})}
	s.watch.Store(w)
	return w
}

// Ready is closed once the copy is whole for the first time.
func (w *Watch) Ready() <-chan struct{} { return w.ready }

// Check refuses a new hold as Store.Check does; a shopper the whole copy
// knows no strike of costs no Redis read.
func (w *Watch) Check(ctx context.Context, userID int64) error {
	if w.store.limit <= 0 {
		return nil
	}
	w.mu.RLock()
	whole := w.whole
	at, struck := w.struck[userID]
	w.mu.RUnlock()
	if whole && (!struck || w.store.now().Add(-w.store.window).UnixMilli() > at) {
		return nil
	}
	return w.store.Check(ctx, userID)
}

// Run subscribes, reads the copy, and keeps it until ctx ends; then it
// returns nil. An error means Redis did not confirm the first subscription.
func (w *Watch) Run(ctx context.Context) error {
	sub := w.store.rdb.Subscribe(ctx, StruckChannel)
	defer sub.Close()
	// A receive waits on the connection, not on ctx: closing it ends the
	// wait.
	stop := context.AfterFunc(ctx, func() { _ = sub.Close() })
	defer stop()
	if _, err := sub.Receive(ctx); err != nil {
		return fmt.Errorf("hoard: subscribe to %s: %w", StruckChannel, err)
	}
	synced := w.resync(ctx)
	close(w.ready)
	for ctx.Err() == nil {
		msg, err := sub.ReceiveTimeout(ctx, time.Until(synced.Add(w.cfg.Resync)))
		switch m := msg.(type) {
		case *redis.Subscription:
			// Subscribed again after a lost connection: what was
			// published meanwhile is only in Redis.
			synced = w.resync(ctx)
		case *redis.Message:
			w.add(m.Payload)
		}
		var timeout interface{ Timeout() bool }
		switch {
		case err == nil:
		case errors.As(err, &timeout) && timeout.Timeout():
		default:
			// The connection is gone; messages are being lost.
			w.setWhole(false)
			_ = pause.For(ctx, 100*time.Millisecond)
		}
		if time.Since(synced) >= w.cfg.Resync {
			synced = w.resync(ctx)
		}
	}
	return nil
}

// resync reads every shopper's newest strike and makes it the copy; a read
// that fails leaves the copy not whole until the next.
func (w *Watch) resync(ctx context.Context) time.Time {
	start := time.Now()
	got, err := w.store.newestStrikes(ctx, w.cfg.MaxUsers)
	if err != nil {
		if ctx.Err() == nil {
			w.cfg.Log.Warn("hoard: reading the strikes failed; buys read them from Redis meanwhile", "err", err)
		}
		w.setWhole(false)
		return start
	}
	// Messages wait while the read runs (one goroutine does both), so a
	// strike it missed is added by its message after the swap.
	w.mu.Lock()
	w.struck, w.whole = got, true
	w.mu.Unlock()
	return start
}

func (w *Watch) setWhole(whole bool) {
	w.mu.Lock()
	w.whole = whole
	w.mu.Unlock()
}

// add takes one StruckChannel message into the copy.
func (w *Watch) add(payload string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.struck == nil {
		w.struck = map[int64]int64{}
	}
	for pair := range strings.SplitSeq(payload, ",") {
		u, at, ok := strings.Cut(pair, ":")
		user, uerr := strconv.ParseInt(u, 10, 64)
		ms, terr := strconv.ParseInt(at, 10, 64)
		if !ok || uerr != nil || terr != nil {
			// Not ours to read: judge every buy by Redis until the next read.
			w.whole = false
			continue
		}
		w.struck[user] = max(w.struck[user], ms)
	}
	if len(w.struck) > w.cfg.MaxUsers {
		w.whole = false
	}
}

// newestStrikes is every shopper's newest strike (Unix ms), read from every
// master; more than limit shoppers is an error.
func (s *Store) newestStrikes(ctx context.Context, limit int) (map[int64]int64, error) {
	var mu sync.Mutex
	out := map[int64]int64{}
	scan := func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, "seckill:hoard:{u*}", 1000).Iterator()
		var keys []string
		flush := func() error {
			if len(keys) == 0 {
				return nil
			}
			cmds := make([]*redis.ZSliceCmd, len(keys))
			_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, k := range keys {
					cmds[i] = p.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: k, Start: 0, Stop: 0, Rev: true})
				}
				return nil
			})
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for i, k := range keys {
				z := cmds[i].Val()
				id, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(k, "seckill:hoard:{u"), "}"), 10, 64)
				if len(z) == 0 || err != nil {
					continue
				}
				out[id] = max(out[id], int64(z[0].Score))
			}
			keys = keys[:0]
			if len(out) > limit {
				return fmt.Errorf("more than %d shoppers have strikes", limit)
			}
			return nil
		}
		for iter.Next(ctx) {
			if keys = append(keys, iter.Val()); len(keys) == 1000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		return flush()
	}
	var err error
	if c, ok := s.rdb.(*redis.ClusterClient); ok {
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, s.rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("hoard: read strikes: %w", err)
	}
	return out, nil
}
