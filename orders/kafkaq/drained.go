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
	parts, committed, err := d.committed()
	if err != nil {
		return false, err
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
		at, err := d.at(committed, p)
		if err != nil {
			return false, err
		}
		if at < target {
			return false, nil
		}
	}
	return true, nil
}

// Lag is how many messages of the topic the group has not committed yet,
// over every partition: what the workers still have to persist. Read from
// the brokers, not from the workers, it keeps growing while they are
// stalled or gone.
func (d *Drain) Lag(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	parts, committed, err := d.committed()
	if err != nil {
		return 0, err
	}
	var lag int64
	for _, p := range parts {
		end, err := d.client.GetOffset(d.topic, p, sarama.OffsetNewest)
		if err != nil {
			return 0, fmt.Errorf("kafkaq: drain: newest offset on %d: %w", p, err)
		}
		at, err := d.at(committed, p)
		if err != nil {
			return 0, err
		}
		lag += max(0, end-at)
	}
	return lag, nil
}

// committed is the topic's partitions and the group's committed offsets.
func (d *Drain) committed() ([]int32, *sarama.OffsetFetchResponse, error) {
	if err := d.client.RefreshMetadata(d.topic); err != nil {
		return nil, nil, fmt.Errorf("kafkaq: drain: metadata: %w", err)
	}
	parts, err := d.client.Partitions(d.topic)
	if err != nil {
		return nil, nil, fmt.Errorf("kafkaq: drain: partitions: %w", err)
	}
	committed, err := d.admin.ListConsumerGroupOffsets(d.group, map[string][]int32{d.topic: parts})
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		// No worker ever joined: nothing is committed anywhere.
		committed, err = &sarama.OffsetFetchResponse{}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kafkaq: drain: group offsets: %w", err)
	}
	return parts, committed, nil
}

// at is where the group stands on partition p: its committed offset, or
// the oldest message when it committed nothing there.
func (d *Drain) at(committed *sarama.OffsetFetchResponse, p int32) (int64, error) {
	if b := committed.GetBlock(d.topic, p); b != nil && b.Err == sarama.ErrNoError && b.Offset >= 0 {
		return b.Offset, nil
	}
	at, err := d.client.GetOffset(d.topic, p, sarama.OffsetOldest)
	if err != nil {
		return 0, fmt.Errorf("kafkaq: drain: oldest offset on %d: %w", p, err)
	}
	return at, nil
}
