package notify

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/orders"
)

// MaxMessageBytes is maxMessageBytes, for the tests of the bound.
const MaxMessageBytes = maxMessageBytes

// PublishEach is PublishBatch as it was before it grouped events by
// channel: one SPUBLISH per event, pipelined. It is kept for
// BenchmarkPublishBatch alone, which compares the two in the same run.
func (p *Publisher) PublishEach(ctx context.Context, events []orders.Event) error {
	_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, e := range events {
			msg, err := encodeEvent(ctx, e)
			if err != nil {
				return err
			}
			pipe.SPublish(ctx, ChannelOf(e.Order.UserID), msg)
		}
		return nil
	})
	return err
}
