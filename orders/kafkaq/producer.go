// Package kafkaq carries reservations over Kafka from the buying path to the
// orders workers.
//
// Its producer implements seckill.Queue. Its consumer group hands batches of
// reservations to the workers and commits their offsets only after the
// workers said they are persisted. It sits under orders because its
// consumer is the workers' input, though it imports only seckill.
//
// A write to a partition below min.insync.replicas is refused at once (see
// isr.go): before the hand-over when the producer's metadata already says so
// (not queued), else as soon as it does (unclear: an earlier attempt may
// have been appended). A frozen leader ends as an unclear outcome too; the
// buyer settles an unclear one (seckill.Buyer). A killed leader costs a
// write about 9 s of retries, not a failure. See Producer.
//
// Messages: key = voucher id (decimal), so the reservations of one voucher
// stay in one partition and in order; value = JSON of seckill.Reservation.
// A sale's crowd buys one voucher, so its records meet in one record batch
// of one partition per produce request: every partition a request touches
// costs the leader an append and each follower a fetch of its own, and
// against three Apache Kafka nodes a key per user (six partitions per
// request) cost the brokers about twice the CPU per buy
// (deploy/tools/bench/README.md, "The accepted path by broker"). The price:
// one voucher's orders are persisted by one worker at a time.
package kafkaq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/seckill"
)

// ErrClosed is returned by Publish after Close.
var ErrClosed = errors.New("kafkaq: producer closed")

// Producer publishes reservations. Many goroutines may call Publish at once:
// their messages are batched by one async producer, and each caller waits for
// its own message's acknowledgement by every in-sync replica.
//
// On a three-node Apache Kafka 4.4 (min.insync.replicas 2) the faults end
// so (faults_test.go):
//   - leader killed: connection refused until the controller moves the
//     leadership (about 9 s); sarama retries and the write succeeds, once.
//   - two nodes down: the partition is below min.insync.replicas. A write
//     in flight ends with NOT_ENOUGH_REPLICAS as soon as sarama's refreshed
//     metadata shows it (about 0.2 s, not the 27 s of retries). It is not
//     ErrNotQueued: an earlier attempt may have been appended. The writes
//     after it are refused before the hand-over, ErrNotQueued; a background
//     refresh, at most once a second, sees the partition heal.
//   - a connection broken mid-request (reset, the request or its answer
//     lost): sarama sends the batch again on a new connection with the same
//     producer id and sequence numbers, and the broker answers a batch it
//     already appended without appending it again: success, written once
//     (connection_test.go).
//   - leader frozen (or a connection that goes silent without a reset): no
//     answer; Publish ends with the caller's context, unclear likewise.
//     The batch stays in sarama's hands: the thawed node, fenced meanwhile,
//     answers NOT_LEADER (or sarama's 30 s read timeout ends the wait) and
//     it goes to the new leader with the same sequence number, so it is
//     written at most once. Closing the producer while it retries drops it
//     unwritten; the hold then ends by the reconciler.
//
// Only a refusal before any broker was asked (unknown topic, message too
// large, producer closed, context done before the hand-over, a partition
// known to be below min.insync.replicas) is ErrNotQueued, and the buyer
// gives the hold back at once.
type Producer struct {
	client   sarama.Client
	producer sarama.AsyncProducer
	isr      *isrGuard
	topic    string
	log      *slog.Logger
	metrics  *Metrics
	dialer   Dialer
	// tracer, when set, makes each publish's span (trace.go).
	tracer trace.Tracer

	// mu guards closed, so no Publish sends on Input after Close began
	// (sarama panics on that).
	mu     sync.RWMutex
	closed bool
	routed chan struct{}
}

// protocolVersion is the protocol level sarama speaks: its newest, 4.3.1,
// which Apache Kafka 4.4 (production's broker) and kfake both serve. Kafka 4
// removed the old request versions, so the level must not fall back to
// sarama's 2.8 default.
func protocolVersion() sarama.KafkaVersion { return sarama.V4_3_1_0 }

// ProducerConfig returns the sarama configuration the Producer uses:
// acknowledged by all in-sync replicas, idempotent (a retried write is not
// duplicated by the broker), results returned per message.
func ProducerConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = protocolVersion()
	cfg.ClientID = "seckill-producer"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1 // required by the idempotent producer
	// A killed leader keeps its partitions until the controller's session
	// with it expires (broker.session.timeout.ms, 9 s) and elects another:
	// meanwhile sarama meets "connection refused" and stale metadata. The
	// retries span about 27 s (100 ms doubling to 1 s, 30 times; the
	// failover took 9.5-13 s on a loaded machine), so such a write lands on
	// the new leader instead of failing after half a second (5 retries of
	// 100 ms did on Kafka 4.4). The caller's context bounds the wait.
	cfg.Producer.Retry.Max = 30
	cfg.Producer.Retry.BackoffFunc = func(retries, _ int) time.Duration {
		return min(100*time.Millisecond<<min(retries, 4), time.Second)
	}
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	// A 1 ms linger: while one request is in flight (MaxOpenRequests=1) the
	// next messages pile up and go out together anyway; the linger also
	// gathers the ones that arrive just after a send. Against three Apache
	// Kafka nodes it gave more acknowledgements a second than no linger in
	// every round measured, with a lower p99 wait and less broker CPU per
	// acknowledgement (deploy/tools/bench/README.md); a lone message waits 1 ms.
	cfg.Producer.Flush.Frequency = time.Millisecond
	cfg.Producer.Flush.MaxMessages = 0
	return cfg
}

// NewProducer connects to brokers and returns a Producer for topic.
func NewProducer(brokers []string, topic string, log *slog.Logger, opts ...ProducerOption) (*Producer, error) {
	if log == nil {
		log = slog.Default()
	}
	p := &Producer{topic: topic, log: log, routed: make(chan struct{})}
	for _, o := range opts {
		o(p)
	}
	cfg := ProducerConfig()
	if p.dialer != nil {
		cfg.Net.Proxy.Enable, cfg.Net.Proxy.Dialer = true, p.dialer
	}
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("kafkaq: producer: %w", err)
	}
	isr, err := newISRGuard(client, topic, log)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	ap, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("kafkaq: producer: %w", err)
	}
	p.client, p.producer, p.isr = client, ap, isr
	go p.route()
	return p, nil
}

// route hands every acknowledgement or failure to the caller waiting for it.
// It ends when the producer is closed and both channels are drained.
func (p *Producer) route() {
	defer close(p.routed)
	successes, failures := p.producer.Successes(), p.producer.Errors()
	for successes != nil || failures != nil {
		select {
		case m, ok := <-successes:
			if !ok {
				successes = nil
				continue
			}
			m.Metadata.(chan error) <- nil
		case f, ok := <-failures:
			if !ok {
				failures = nil
				continue
			}
			f.Msg.Metadata.(chan error) <- f.Err
		}
	}
}

// Publish writes r and returns once every in-sync replica has it. If ctx
// ends first it returns ctx's error; when that happens after the message was
// handed to the producer, the message may still be written later (the
// caller cannot know), which the reconciler and the workers tolerate.
func (p *Producer) Publish(ctx context.Context, r seckill.Reservation) (err error) {
	start := time.Now()
	size := 0
	defer func() { p.metrics.produced(start, size, err) }()
	value, err := Encode(r)
	if err != nil {
		return fmt.Errorf("kafkaq: publish order %d: %w", r.OrderID, err)
	}
	key := strconv.FormatInt(r.VoucherID, 10)
	size = len(key) + len(value)
	done := make(chan error, 1)
	msg := &sarama.ProducerMessage{
		Topic:    p.topic,
		Key:      sarama.StringEncoder(key),
		Value:    sarama.ByteEncoder(value),
		Metadata: done,
	}
	span := p.startPublish(ctx, msg, r)
	defer func() { endSpan(span, err) }()

	// A partition the cache already knows to be below min.insync.replicas
	// would refuse the write on every attempt: refuse it here, before the
	// hand-over, so nothing is written and the caller may give back at once.
	part := p.isr.partition(msg)
	if err := p.isr.refusal(part); err != nil {
		p.isr.refreshSoon()
		return fmt.Errorf("kafkaq: publish order %d: %w: %w", r.OrderID, seckill.ErrNotQueued, err)
	}

	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return fmt.Errorf("kafkaq: publish order %d: %w: %w", r.OrderID, seckill.ErrNotQueued, ErrClosed)
	}
	select {
	case p.producer.Input() <- msg:
		p.mu.RUnlock()
	case <-ctx.Done():
		p.mu.RUnlock()
		return fmt.Errorf("kafkaq: publish order %d: %w: %w", r.OrderID, seckill.ErrNotQueued, ctx.Err())
	}

	// While the write waits, its partition may fall below
	// min.insync.replicas (sarama refreshes the metadata on each retry):
	// then every further attempt is refused too, and waiting out the retry
	// budget, which is there for leader elections, only holds the buyer.
	tick := time.NewTicker(isrPollEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				if refusedBeforeWriting(err) {
					err = fmt.Errorf("%w: %w", seckill.ErrNotQueued, err)
				}
				return fmt.Errorf("kafkaq: publish order %d: %w", r.OrderID, err)
			}
			return nil
		case <-tick.C:
			if err := p.isr.refusal(part); err != nil {
				// Handed over, so an earlier attempt may still be written:
				// not ErrNotQueued. sarama keeps retrying it; the caller
				// settles the order's outcome.
				return fmt.Errorf("kafkaq: publish order %d: refused without waiting out the retries: %w", r.OrderID, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("kafkaq: publish order %d: no acknowledgement yet: %w", r.OrderID, ctx.Err())
		}
	}
}

// Close flushes what is buffered, waits for its results and disconnects.
// Publish calls after Close return ErrClosed.
func (p *Producer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.routed
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	// Not producer.Close: it drains the result channels itself, and the
	// callers still waiting would never hear of their messages.
	p.producer.AsyncClose()
	<-p.routed
	// The producer was built on this client, and so leaves it open.
	if err := p.client.Close(); err != nil {
		return fmt.Errorf("kafkaq: producer: close client: %w", err)
	}
	return nil
}

// refusedBeforeWriting reports whether sarama gave up on a message without
// any broker having been asked to write it: the topic or partition does not
// exist, or the message is too large to send. Any other failure (a timeout,
// a lost connection, an unclear answer) may have left it written; so may
// NOT_ENOUGH_REPLICAS, which sarama retries and reports for the last
// attempt only.
func refusedBeforeWriting(err error) bool {
	return errors.Is(err, sarama.ErrUnknownTopicOrPartition) ||
		errors.Is(err, sarama.ErrInvalidTopic) ||
		errors.Is(err, sarama.ErrMessageSizeTooLarge)
}
