package notify

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/apperr"
)

var _ orders.BatchEvents = (*Publisher)(nil)

// maxMessageBytes bounds one message of a shard channel: a channel's share
// of a batch that would be larger goes out as several messages, in order.
// A hub reads and parses a message whole before it hands out its first
// event, and a message that arrives damaged loses all its events, so the
// bound caps both the memory and delay one message costs every hub and
// what one bad message can lose. The workers' batches never reach it: an
// event is 300 to 450 bytes (more with a payment or a trace), so at
// SECKILL_WORKER_BATCH's default of 100 orders a channel carries about 6
// events (under 3 KB), and at its most, 1000, about 63 (under 30 KB). A
// lone event larger than the bound still goes, alone.
const maxMessageBytes = 64 << 10

// PublishBatch sends every event in one round trip: the events are grouped
// by their buyer's shard channel, and each channel gets one SPUBLISH of a
// JSON array of its events, in the batch's order (a channel with one event
// gets the event's object alone, as Publish sends it). So a batch costs
// Redis one command per channel it touches, at most ChannelCount, where it
// cost one per event, and each buyer's events stay in order on its one
// channel. Every hub reads every channel, so grouping changes no one's
// traffic but the command count. Errors are as for Publish.
func (p *Publisher) PublishBatch(ctx context.Context, events []orders.Event) error {
	if len(events) == 0 {
		return nil
	}
	msgs, err := pack(ctx, events, maxMessageBytes)
	if err != nil {
		return err
	}
	// On a Redis Cluster the pipeline is split by the channels' masters,
	// one round trip to each at once; a channel's messages keep their
	// order on its master's connection.
	_, err = p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, m := range msgs {
			pipe.SPublish(ctx, m.channel, m.payload)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("notify: publish %d events in %d messages: %w: %w", len(events), len(msgs), apperr.ErrUnavailable, err)
	}
	return nil
}

// message is one SPUBLISH of a batch.
type message struct {
	channel string
	payload []byte
}

// pack encodes events and groups them into the messages of their shard
// channels: one per channel, unless a channel's events pass limit bytes,
// then as many as it takes. Messages come in the order of their first
// event, and one channel's in the order of its events. A message of one
// event is the event's object; of more, a JSON array of the objects.
func pack(ctx context.Context, events []orders.Event, limit int) ([]message, error) {
	type group struct {
		channel string
		parts   [][]byte
		size    int // the array's bytes: brackets, commas and parts
	}
	var groups []*group
	var open [ChannelCount]*group // the channel's last group, still taking events
	for _, e := range events {
		b, err := encodeEvent(ctx, e)
		if err != nil {
			return nil, err
		}
		shard := shardOf(e.Order.UserID)
		g := open[shard]
		if g == nil || g.size+1+len(b) > limit {
			g = &group{channel: channel(shard), size: 1}
			groups = append(groups, g)
			open[shard] = g
		}
		g.parts = append(g.parts, b)
		g.size += len(b) + 1
	}
	msgs := make([]message, len(groups))
	for i, g := range groups {
		payload := g.parts[0]
		if len(g.parts) > 1 {
			payload = make([]byte, 0, g.size)
			sep := byte('[')
			for _, part := range g.parts {
				payload = append(append(payload, sep), part...)
				sep = ','
			}
			payload = append(payload, ']')
		}
		msgs[i] = message{channel: g.channel, payload: payload}
	}
	return msgs, nil
}
