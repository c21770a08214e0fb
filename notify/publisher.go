package notify

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Publisher is what the order workers, the sweeper and pay/cancel publish
// through.
var _ orders.Events = (*Publisher)(nil)

// Publisher puts order status events on their buyer's shard channel
// (ChannelOf) for every instance's Hub.
// It implements the orders package's Events interface.
type Publisher struct {
	rdb redis.UniversalClient
}

// NewPublisher returns a Publisher over rdb.
func NewPublisher(rdb redis.UniversalClient) *Publisher {
	return &Publisher{rdb: rdb}
}

// Publish sends e to every hub of the fleet, as one message of its one
// JSON object. Pub/sub is fire and forget: a
// hub that is reconnecting misses it, which is why clients take a fresh
// snapshot when their socket (re)connects. A Redis failure is wrapped in
// apperr.ErrUnavailable; the caller's transition has already committed, so
// it logs and carries on rather than undoing anything.
func (p *Publisher) Publish(ctx context.Context, e orders.Event) error {
	msg, err := encodeEvent(ctx, e)
	if err != nil {
		return err
	}
	if err := p.rdb.SPublish(ctx, ChannelOf(e.Order.UserID), msg).Err(); err != nil {
		return fmt.Errorf("notify: publish order %d: %w: %w", e.Order.ID, apperr.ErrUnavailable, err)
	}
	return nil
}
