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

// Watch calls on[channel] with the voucher id of every message published on
// the given channels (CatalogChannel, StockChannel), until ctx ends. go-redis subscribes again by
// itself after a lost connection; what was published meanwhile is lost,
// which the catalog's periodic refresh covers. It returns once Redis has
// confirmed the subscription.
func Watch(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger, on map[string]func(voucherID int64)) (<-chan struct{}, error) {
	channels := make([]string, 0, len(on))
	for ch := range on {
		channels = append(channels, ch)
	}
	sub := rdb.Subscribe(ctx, channels...)
	if _, err := sub.Receive(ctx); err != nil {
		_ = sub.Close()
		return nil, fmt.Errorf("redisstock: subscribe to %v: %w", channels, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer sub.Close()
		msgs := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-msgs:
				if !ok {
					return
				}
				id, err := strconv.ParseInt(m.Payload, 10, 64)
				if err != nil || id <= 0 {
					log.Debug("ignoring a catalog announcement that is not a voucher id", "channel", m.Channel, "payload", m.Payload)
					continue
				}
				if fn := on[m.Channel]; fn != nil {
					fn(id)
				}
			}
		}
	}()
	return done, nil
}
