package redisstock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// CatalogChannel is the Redis pub/sub channel on which an instance announces
// that a voucher's record changed (created, paused, resumed): the message is
// the voucher id in decimal. Every instance's catalog then reads the record
// again at once instead of at its next periodic refresh.
const CatalogChannel = "seckill:catalog"

// StockChannel is the Redis pub/sub channel on which a voucher id (decimal)
// is published when stock of it came back (a release): every gateway then
// drops its in-memory sold-out flag for that voucher at once instead of at
// its next re-check. Store.Release publishes on it itself.
const StockChannel = "seckill:stock"

// Announcer publishes voucher changes on CatalogChannel
// (seckill.Announcer).
type Announcer struct {
	rdb redis.UniversalClient
}

// NewAnnouncer returns an Announcer over rdb.
func NewAnnouncer(rdb redis.UniversalClient) *Announcer { return &Announcer{rdb: rdb} }

// AnnounceVoucher tells every instance that voucher id's record changed.
func (a *Announcer) AnnounceVoucher(ctx context.Context, id int64) error {
	if err := a.rdb.Publish(ctx, CatalogChannel, strconv.FormatInt(id, 10)).Err(); err != nil {
		return unavailable("announce voucher", err)
	}
	return nil
}

// AnnounceStock tells every instance that stock of voucher id came back.
// Store.Release does it after every release; this is for tests and tools.
func (a *Announcer) AnnounceStock(ctx context.Context, id int64) error {
	if err := a.rdb.Publish(ctx, StockChannel, strconv.FormatInt(id, 10)).Err(); err != nil {
		return unavailable("announce stock", err)
	}
	return nil
}

// WatcherConfig is what NewWatcher builds a Watcher from.
type WatcherConfig struct {
	// Redis is where the announcements are published.
	Redis redis.UniversalClient
	// On maps each channel to follow (CatalogChannel, StockChannel) to
	// what to call with the voucher id of each of its messages.
	On map[string]func(voucherID int64)
	// Log gets the messages that are not a voucher id (slog.Default() when
	// nil).
	Log *slog.Logger
}

// Watcher follows the announcements of the fleet: it calls On[channel] with
// the voucher id of every message published on the given channels.
type Watcher struct {
	cfg   WatcherConfig
	ready chan struct{}
}

// NewWatcher returns a Watcher of cfg.On's channels. It starts nothing: Run
// does.
func NewWatcher(cfg WatcherConfig) *Watcher {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Watcher{cfg: cfg, ready: make(chan struct{})}
}

// Ready is closed once Redis has confirmed the subscription: every message
// published after that reaches the watcher.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Run subscribes, closes Ready, and calls On for every message until ctx
// ends; then it returns nil. An error means Redis did not confirm the
// subscription. go-redis subscribes again by itself after a lost
// connection; what was published meanwhile is lost, which the catalog's
// periodic refresh and the sold-out flag's re-check cover. Call it once.
func (w *Watcher) Run(ctx context.Context) error {
	channels := make([]string, 0, len(w.cfg.On))
	for ch := range w.cfg.On {
		channels = append(channels, ch)
	}
	sub := w.cfg.Redis.Subscribe(ctx, channels...)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		return fmt.Errorf("redisstock: subscribe to %v: %w", channels, err)
	}
	close(w.ready)
	msgs := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-msgs:
			if !ok {
				return nil
			}
			id, err := strconv.ParseInt(m.Payload, 10, 64)
			if err != nil || id <= 0 {
				w.cfg.Log.Debug("ignoring an announcement that is not a voucher id", "channel", m.Channel, "payload", m.Payload)
				continue
			}
			if fn := w.cfg.On[m.Channel]; fn != nil {
				fn(id)
			}
		}
	}
}
