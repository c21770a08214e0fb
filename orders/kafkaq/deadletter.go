package kafkaq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"

	"github.com/flashsale/seckill/seckill/tracing"
)

// DeadLetterSuffix names a topic's dead-letter topic: seckill.orders has
// seckill.orders.dlq.
const DeadLetterSuffix = ".dlq"

// The headers a dead letter carries beside the original key and value.
const (
	HeaderDeadReason = "seckill-dead-reason" // why it could not be handled
	HeaderDeadSource = "seckill-dead-source" // topic/partition/offset it came from
	HeaderDeadAt     = "seckill-dead-at"     // when it was set aside, RFC 3339
	HeaderReplayOf   = "seckill-replay-of"   // on a replayed message: dlq-topic/partition/offset
)

// Dead-letter reasons, the metric's label values.
const (
	ReasonUndecodable = "undecodable" // not a reservation: nothing could ever handle it
	ReasonFailed      = "failed"      // the handler kept failing on it, alone, with a non-transient error
)

// DeadLetters writes messages that cannot be handled to the dead-letter topic,
// where operators list and replay them (ListDeadLetters, ReplayDeadLetter).
// A message goes there before its offset is committed, so none is lost: if
// the write fails, the message is not committed and comes back.
type DeadLetters struct {
	topic    string
	producer sarama.SyncProducer
}

// NewDeadLetters connects a producer for topic, creating the topic (one
// partition) when the cluster does not have it.
func NewDeadLetters(brokers []string, topic string) (*DeadLetters, error) {
	if err := EnsureTopic(brokers, topic, 1); err != nil {
		return nil, err
	}
	p, err := sarama.NewSyncProducer(brokers, ProducerConfig())
	if err != nil {
		return nil, fmt.Errorf("kafkaq: dead-letter producer: %w", err)
	}
	return &DeadLetters{topic: topic, producer: p}, nil
}

// Topic is the dead-letter topic.
func (d *DeadLetters) Topic() string { return d.topic }

// Close disconnects.
func (d *DeadLetters) Close() error { return d.producer.Close() }

// put writes msg to the dead-letter topic with its reason.
func (d *DeadLetters) put(msg *sarama.ConsumerMessage, reason string, cause error) error {
	// The original headers go along (a traceparent keeps the order in its
	// buy's trace), then the letter's own.
	headers := make([]sarama.RecordHeader, 0, len(msg.Headers)+3)
	for _, h := range msg.Headers {
		if h != nil && !deadHeader(string(h.Key)) {
			headers = append(headers, *h)
		}
	}
	headers = append(headers, []sarama.RecordHeader{
		{Key: []byte(HeaderDeadReason), Value: []byte(reason + ": " + cause.Error())},
		{Key: []byte(HeaderDeadSource), Value: []byte(msg.Topic + "/" + strconv.FormatInt(int64(msg.Partition), 10) + "/" + strconv.FormatInt(msg.Offset, 10))},
		{Key: []byte(HeaderDeadAt), Value: []byte(time.Now().UTC().Format(time.RFC3339Nano))},
	}...)
	_, _, err := d.producer.SendMessage(&sarama.ProducerMessage{
		Topic: d.topic, Key: sarama.ByteEncoder(msg.Key), Value: sarama.ByteEncoder(msg.Value), Headers: headers,
	})
	if err != nil {
		return fmt.Errorf("kafkaq: dead letter to %s: %w", d.topic, err)
	}
	return nil
}

// EnsureTopic creates topic with partitions when the cluster lacks it.
func EnsureTopic(brokers []string, topic string, partitions int32) error {
	admin, err := sarama.NewClusterAdmin(brokers, ConsumerGroupConfig())
	if err != nil {
		return fmt.Errorf("kafkaq: admin: %w", err)
	}
	defer admin.Close()
	err = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: -1}, false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		var te *sarama.TopicError
		if !errors.As(err, &te) || te.Err != sarama.ErrTopicAlreadyExists {
			return fmt.Errorf("kafkaq: create topic %s: %w", topic, err)
		}
	}
	return nil
}

// DeadLetter is one message in a dead-letter topic.
type DeadLetter struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Source    string    `json:"source"` // topic/partition/offset it came from
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	// Traceparent is the trace of the buy that made the message, when it
	// was traced: find it by its trace id.
	Traceparent string `json:"traceparent,omitempty"`
}

// ListDeadLetters reads every message of the dead-letter topic, oldest first
// per partition (Kafka keeps them for the topic's retention).
func ListDeadLetters(ctx context.Context, brokers []string, topic string) ([]DeadLetter, error) {
	var out []DeadLetter
	err := readTopic(ctx, brokers, topic, func(m *sarama.ConsumerMessage) bool {
		out = append(out, deadLetterOf(m))
		return true
	})
	return out, err
}

// ReplayDeadLetter sends the dead letter at partition/offset of the
// dead-letter topic dlq back to topic, with its original key and value and a
// header naming where it came from. The workers are idempotent on the order
// id, so a replay of a message that was handled after all changes nothing.
// It returns the letter replayed.
func ReplayDeadLetter(ctx context.Context, brokers []string, dlq, topic string, partition int32, offset int64) (DeadLetter, error) {
	var found *sarama.ConsumerMessage
	err := readTopic(ctx, brokers, dlq, func(m *sarama.ConsumerMessage) bool {
		if m.Partition == partition && m.Offset == offset {
			found = m
			return false
		}
		return true
	})
	if err != nil {
		return DeadLetter{}, err
	}
	if found == nil {
		return DeadLetter{}, fmt.Errorf("kafkaq: no dead letter at %s/%d/%d", dlq, partition, offset)
	}
	p, err := sarama.NewSyncProducer(brokers, ProducerConfig())
	if err != nil {
		return DeadLetter{}, fmt.Errorf("kafkaq: replay producer: %w", err)
	}
	defer p.Close()
	// The letter's own headers stay behind; the ones it came with (its
	// traceparent) go back with it.
	headers := []sarama.RecordHeader{{Key: []byte(HeaderReplayOf), Value: []byte(dlq + "/" + strconv.FormatInt(int64(partition), 10) + "/" + strconv.FormatInt(offset, 10))}}
	for _, h := range found.Headers {
		if h != nil && !deadHeader(string(h.Key)) {
			headers = append(headers, *h)
		}
	}
	_, _, err = p.SendMessage(&sarama.ProducerMessage{
		Topic: topic, Key: sarama.ByteEncoder(found.Key), Value: sarama.ByteEncoder(found.Value), Headers: headers,
	})
	if err != nil {
		return DeadLetter{}, fmt.Errorf("kafkaq: replay to %s: %w", topic, err)
	}
	return deadLetterOf(found), nil
}

// deadHeader reports whether key is one of the headers a dead letter or a
// replay sets itself.
func deadHeader(key string) bool {
	switch key {
	case HeaderDeadReason, HeaderDeadSource, HeaderDeadAt, HeaderReplayOf:
		return true
	}
	return false
}

func deadLetterOf(m *sarama.ConsumerMessage) DeadLetter {
	d := DeadLetter{Partition: m.Partition, Offset: m.Offset, Key: string(m.Key), Value: string(m.Value)}
	for _, h := range m.Headers {
		switch string(h.Key) {
		case HeaderDeadReason:
			d.Reason = string(h.Value)
		case HeaderDeadSource:
			d.Source = string(h.Value)
		case HeaderDeadAt:
			d.At, _ = time.Parse(time.RFC3339Nano, string(h.Value))
		case tracing.HeaderTraceparent:
			d.Traceparent = string(h.Value)
		}
	}
	return d
}

// readTopic calls each for every message of topic present when it starts,
// partition by partition, until each returns false.
func readTopic(ctx context.Context, brokers []string, topic string, each func(*sarama.ConsumerMessage) bool) error {
	client, err := sarama.NewClient(brokers, ConsumerGroupConfig())
	if err != nil {
		return fmt.Errorf("kafkaq: connect: %w", err)
	}
	defer client.Close()
	partitions, err := client.Partitions(topic)
	if err != nil {
		return fmt.Errorf("kafkaq: partitions of %s: %w", topic, err)
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return fmt.Errorf("kafkaq: consumer: %w", err)
	}
	defer consumer.Close()
	for _, p := range partitions {
		oldest, err := client.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			return fmt.Errorf("kafkaq: offsets of %s/%d: %w", topic, p, err)
		}
		newest, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return fmt.Errorf("kafkaq: offsets of %s/%d: %w", topic, p, err)
		}
		if newest <= oldest {
			continue
		}
		pc, err := consumer.ConsumePartition(topic, p, oldest)
		if err != nil {
			return fmt.Errorf("kafkaq: read %s/%d: %w", topic, p, err)
		}
		more, err := readPartition(ctx, pc, newest, each)
		pc.Close()
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func readPartition(ctx context.Context, pc sarama.PartitionConsumer, newest int64, each func(*sarama.ConsumerMessage) bool) (bool, error) {
	for {
		select {
		case m := <-pc.Messages():
			if !each(m) {
				return false, nil
			}
			if m.Offset+1 >= newest {
				return true, nil
			}
		case err := <-pc.Errors():
			return false, fmt.Errorf("kafkaq: read: %w", err)
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}
