package kafkaq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// Drain tells whether a consumer group has committed past every message
// produced before a given time: the reconciler's honest test of "no message
// in flight" for a reservation.
type Drain struct {
	client sarama.Client
	admin  sarama.ClusterAdmin
	topic  string
	group  string
}

// NewDrain connects to brokers for topic and group (DefaultGroup when empty).
func NewDrain(brokers []string, topic, group string) (*Drain, error) {
	if group == "" {
		group = DefaultGroup
	}
	client, err := sarama.NewClient(brokers, ConsumerGroupConfig())
	if err != nil {
		return nil, fmt.Errorf("kafkaq: drain: %w", err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("kafkaq: drain: %w", err)
	}
	return &Drain{client: client, admin: admin, topic: topic, group: group}, nil
}

// Close disconnects.
func (d *Drain) Close() error { return d.admin.Close() }

// DrainedBefore reports whether, on every partition, the group's committed
// offset has passed the first message whose timestamp is at or after t (or
// the end of the partition when there is none). When it is true, every
// message produced before t has been consumed and its batch persisted
// (offsets are committed only after the PostgreSQL commit). A lagging but
// alive consumer makes it false, so nothing it is about to persist is
// released under it. t must be in the past by more than the producers'
// timeout, or a message still being retried could land before t later.
func (d *Drain) DrainedBefore(ctx context.Context, t time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := d.client.RefreshMetadata(d.topic); err != nil {
		return false, fmt.Errorf("kafkaq: drain: metadata: %w", err)
	}
	parts, err := d.client.Partitions(d.topic)
	if err != nil {
		return false, fmt.Errorf("kafkaq: drain: partitions: %w", err)
	}
	committed, err := d.admin.ListConsumerGroupOffsets(d.group, map[string][]int32{d.topic: parts})
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		// No worker ever joined: nothing is committed anywhere.
		committed, err = &sarama.OffsetFetchResponse{}, nil
	}
	if err != nil {
		return false, fmt.Errorf("kafkaq: drain: group offsets: %w", err)
	}
	for _, p := range parts {
		target, err := d.client.GetOffset(d.topic, p, t.UnixMilli())
		if err != nil {
			return false, fmt.Errorf("kafkaq: drain: offset for time on %d: %w", p, err)
		}
		if target < 0 { // no message at or after t: all of the partition is before t
			if target, err = d.client.GetOffset(d.topic, p, sarama.OffsetNewest); err != nil {
				return false, fmt.Errorf("kafkaq: drain: newest offset on %d: %w", p, err)
			}
		}
		at := int64(-1)
		if b := committed.GetBlock(d.topic, p); b != nil && b.Err == sarama.ErrNoError {
			at = b.Offset
		}
		if at < 0 {
			// Nothing committed: the group starts at the oldest message.
			if at, err = d.client.GetOffset(d.topic, p, sarama.OffsetOldest); err != nil {
				return false, fmt.Errorf("kafkaq: drain: oldest offset on %d: %w", p, err)
			}
		}
		if at < target {
			return false, nil
		}
	}
	return true, nil
}
