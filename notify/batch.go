package notify

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/apperr"
)

var _ orders.BatchEvents = (*Publisher)(nil)

// PublishBatch sends every event in one round trip: a pipeline of SPUBLISH,
// in order (each buyer's events stay in order on its one channel). The workers publish a whole batch's transitions at once, and one
// PUBLISH per order was most of a worker's time and Redis round trips.
// Errors are as for Publish.
func (p *Publisher) PublishBatch(ctx context.Context, events []orders.Event) error {
	if len(events) == 0 {
		return nil
	}
	msgs := make([][]byte, len(events))
	for i, e := range events {
		msg, err := encodeEvent(ctx, e)
		if err != nil {
			return err
		}
		msgs[i] = msg
	}
	// On a Redis Cluster the pipeline is split by the channels' masters,
	// one round trip to each at once.
	_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, m := range msgs {
			pipe.SPublish(ctx, ChannelOf(events[i].Order.UserID), m)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("notify: publish %d events: %w: %w", len(events), apperr.ErrUnavailable, err)
	}
	return nil
}
