package notify

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
)

var _ orders.BatchEvents = (*Publisher)(nil)

// PublishBatch sends every event in one round trip: a pipeline of PUBLISH,
// in order. The workers publish a whole batch's transitions at once, and one
// PUBLISH per order was most of a worker's time and Redis round trips.
// Errors are as for Publish.
func (p *Publisher) PublishBatch(ctx context.Context, events []orders.Event) error {
	if len(events) == 0 {
		return nil
	}
	msgs := make([][]byte, len(events))
	for i, e := range events {
		msg, err := encodeEvent(e)
		if err != nil {
			return err
		}
		msgs[i] = msg
	}
	_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, m := range msgs {
			pipe.Publish(ctx, Channel, m)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("notify: publish %d events: %w: %w", len(events), seckill.ErrUnavailable, err)
	}
	return nil
}
