package kafkaq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/pause"
)

// DefaultGroup is the consumer group of the order workers.
const DefaultGroup = "seckill-workers"

// DefaultTopic is the topic reservations travel on.
const DefaultTopic = "seckill.orders"

// Handler persists one batch of reservations (all from one partition, in
// offset order). Returning nil means every reservation of the batch is
// durably dealt with; its offsets are committed only then. An error makes the
// consumer retry the same batch with backoff, so the handler must be
// idempotent (orders.Worker.Handle is).
type Handler func(ctx context.Context, batch []seckill.Reservation) error

// ConsumerConfig configures a Consumer. Zero fields take the defaults.
type ConsumerConfig struct {
	Brokers []string
	Topic   string
	// Group defaults to DefaultGroup.
	Group string
	// MaxBatch is the most reservations per handler call (default 100).
	MaxBatch int
	// Linger is how long a batch waits for more messages after its first one
	// (default 5 ms): the price of one PostgreSQL transaction per many orders.
	Linger time.Duration
	// RetryBackoff is the first wait before a failed batch is retried
	// (default 100 ms); it doubles up to MaxRetryBackoff (default 5 s).
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// ShutdownGrace is how long a handler call already running may go on
	// after the session ends (shutdown or rebalance), so the batch it is
	// persisting gets committed instead of redelivered (default 5 s; keep it
	// well below the group's rebalance timeout, 60 s).
	ShutdownGrace time.Duration
	Log           *slog.Logger
	// Metrics, when set, records batch sizes and lag (see NewMetrics).
	Metrics *Metrics
	// DeadLetters, when set, takes the messages that cannot be handled: a
	// message that is not a reservation at once, and one the handler still
	// fails alone after DeadLetterAfter attempts of its batch with an error
	// that is not apperr.ErrUnavailable. Without it a message that is not a
	// reservation is logged and skipped, and a failing batch is retried
	// for ever.
	DeadLetters *DeadLetters
	// Tracer, when set, makes a span of each message in its buy's trace
	// (its traceparent header), and one of each batch's handling, linked to
	// them, in whose context the handler runs (trace.go).
	Tracer trace.Tracer
	// DeadLetterAfter is how many attempts a batch gets before its messages
	// are tried one by one and the failing ones dead-lettered (default 5).
	// A dependency outage (apperr.ErrUnavailable) never dead-letters
	// anything: the batch waits for it.
	DeadLetterAfter int
}

func (c *ConsumerConfig) defaults() {
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 100
	}
	if c.Linger <= 0 {
		c.Linger = 5 * time.Millisecond
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.MaxRetryBackoff <= 0 {
		c.MaxRetryBackoff = 5 * time.Second
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.DeadLetterAfter <= 0 {
		c.DeadLetterAfter = 5
	}
}

// Consumer reads reservations as a member of a consumer group.
type Consumer struct {
	cfg   ConsumerConfig
	group sarama.ConsumerGroup

	mu  sync.Mutex
	lag map[int32]int64

	errorsDone chan struct{}
}

// ConsumerGroupConfig returns the sarama configuration the Consumer uses: a
// new group starts at the oldest message (nothing produced before the first
// worker joined is lost), and offsets are committed only explicitly, after
// the handler persisted the batch.
func ConsumerGroupConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = protocolVersion()
	cfg.ClientID = "seckill-worker"
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	// Only OffsetCommit v2-v4 carry a retention, and with a zero one sarama
	// sends v1, which Kafka 4 refuses: keep it set should the version level
	// ever be lowered (v5+ leave retention to the broker).
	cfg.Consumer.Offsets.Retention = 7 * 24 * time.Hour
	cfg.Consumer.Return.Errors = true
	// The broker answers one request per connection at a time, so an offset
	// commit waits behind the fetch long-poll on the same connection: with
	// sarama's default 500 ms each commit, and so each batch on a quiet
	// partition, would take half a second.
	cfg.Consumer.MaxWaitTime = 50 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	return cfg
}

// NewConsumer joins nothing yet; Run does.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	cfg.defaults()
	if len(cfg.Brokers) == 0 || cfg.Topic == "" {
		return nil, fmt.Errorf("kafkaq: consumer: %w: brokers and topic are required", apperr.ErrInvalidInput)
	}
	group, err := sarama.NewConsumerGroup(cfg.Brokers, cfg.Group, ConsumerGroupConfig())
	if err != nil {
		return nil, fmt.Errorf("kafkaq: consumer group %s: %w", cfg.Group, err)
	}
	c := &Consumer{cfg: cfg, group: group, lag: map[int32]int64{}, errorsDone: make(chan struct{})}
	go func() {
		defer close(c.errorsDone)
		for err := range group.Errors() {
			c.cfg.Log.Warn("kafka consumer error", "group", cfg.Group, "topic", cfg.Topic, "err", err)
		}
	}()
	return c, nil
}

// Run consumes until ctx ends, calling handler with batches, and returns nil
// then. It rejoins the group after every rebalance and backs off on errors.
// It returns an error only when the group was closed under it.
func (c *Consumer) Run(ctx context.Context, handler Handler) error {
	h := &claimHandler{c: c, handle: handler}
	backoff := c.cfg.RetryBackoff
	for {
		err := c.group.Consume(ctx, []string{c.cfg.Topic}, h)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, sarama.ErrClosedConsumerGroup) {
			return fmt.Errorf("kafkaq: consume: %w", err)
		}
		if err == nil {
			backoff = c.cfg.RetryBackoff
			continue // a rebalance ended the session; join the next one
		}
		c.cfg.Log.Warn("kafka consume failed; rejoining", "group", c.cfg.Group, "err", err, "backoff", backoff)
		if pause.For(ctx, backoff) != nil {
			return nil
		}
		backoff = min(2*backoff, c.cfg.MaxRetryBackoff)
	}
}

// Close leaves the group and disconnects. Offsets of batches whose handler
// has not returned nil are not committed: those messages are delivered again
// to whoever takes the partition.
func (c *Consumer) Close() error {
	err := c.group.Close()
	<-c.errorsDone
	if err != nil {
		return fmt.Errorf("kafkaq: close consumer: %w", err)
	}
	return nil
}

// Lag returns, per partition this consumer holds, how many messages are
// in the partition beyond the last committed offset (as of the last batch).
func (c *Consumer) Lag() map[int32]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.lag)
}

func (c *Consumer) setLag(partition int32, lag int64) {
	c.cfg.Metrics.setLag(partition, lag)
	c.mu.Lock()
	defer c.mu.Unlock()
	if lag < 0 {
		delete(c.lag, partition)
		return
	}
	c.lag[partition] = lag
}

// claimHandler implements sarama.ConsumerGroupHandler.
type claimHandler struct {
	c      *Consumer
	handle Handler
}

// Setup and Cleanup have nothing to do: all state lives in ConsumeClaim, one
// partition at a time, and every commit is made there.
func (h *claimHandler) Setup(sarama.ConsumerGroupSession) error { return nil }

// Cleanup: see Setup.
func (h *claimHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim collects a batch (up to MaxBatch messages, or what arrived
// within Linger of its first message), hands it to the handler until the
// handler succeeds, then marks and commits the batch's last offset. It
// returns as soon as the session ends or the claim is revoked; a batch not
// yet handled is then simply not committed.
func (h *claimHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	ctx := sess.Context()
	cfg := h.c.cfg
	partition := claim.Partition()
	defer h.c.setLag(partition, -1)

	// The handler's context outlives the session by ShutdownGrace: a
	// transaction in flight when the worker is told to stop finishes and is
	// committed, rather than rolled back and redone by the next owner.
	handlerCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(cfg.ShutdownGrace, cancel) })
	defer stopGrace()

	batch := make([]seckill.Reservation, 0, cfg.MaxBatch)
	msgs := make([]*sarama.ConsumerMessage, 0, cfg.MaxBatch) // batch[i] came in msgs[i]
	var last *sarama.ConsumerMessage                         // the batch's last message, poison included
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var linger <-chan time.Time
	spans := batchSpans{t: cfg.Tracer, topic: cfg.Topic}
	defer func() { spans.done(nil) }()

	flush := func() bool {
		linger = nil
		cfg.Metrics.batch(len(batch))
		if len(batch) > 0 {
			hctx, span := spans.handling(handlerCtx, partition)
			ok := h.handleUntilDone(ctx, hctx, partition, last.Offset, batch, msgs)
			endSpan(span, nil)
			spans.done(nil)
			if !ok {
				return false
			}
		}
		sess.MarkMessage(last, "")
		sess.Commit()
		h.c.setLag(partition, max(0, claim.HighWaterMarkOffset()-last.Offset-1))
		// A fresh slice: the handler may have kept the old one.
		batch = make([]seckill.Reservation, 0, cfg.MaxBatch)
		msgs = make([]*sarama.ConsumerMessage, 0, cfg.MaxBatch)
		last = nil
		return true
	}

	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			r, err := Decode(msg.Value)
			if err != nil {
				// It can never succeed: setting it aside is the only way
				// the partition moves on. Its offset is committed with the
				// batch, after it is in the dead-letter topic. The hold it
				// may stand for ends by the reconciler, once the group is
				// committed past it.
				if !h.deadLetter(ctx, msg, ReasonUndecodable, err) {
					return nil
				}
			} else {
				batch = append(batch, r)
				msgs = append(msgs, msg)
				spans.received(msg, r)
			}
			last = msg
			if len(batch) >= cfg.MaxBatch {
				if !flush() {
					return nil
				}
				continue
			}
			if linger == nil {
				timer.Reset(cfg.Linger)
				linger = timer.C
			}
		case <-linger:
			if !flush() {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// handleUntilDone calls the handler until it succeeds, backing off between
// attempts. It reports false if the session (ctx) ended first; the attempt
// running at that moment may still finish under handlerCtx. After
// DeadLetterAfter attempts that failed for another reason than a dependency
// outage, the batch is handled one message at a time and the messages that
// still fail go to the dead-letter topic, so one poison message never holds
// its partition.
func (h *claimHandler) handleUntilDone(ctx, handlerCtx context.Context, partition int32, lastOffset int64, batch []seckill.Reservation, msgs []*sarama.ConsumerMessage) bool {
	cfg := h.c.cfg
	backoff := cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		err := h.handle(handlerCtx, batch)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if cfg.DeadLetters != nil && attempt >= cfg.DeadLetterAfter && !transient(err) {
			return h.handleOneByOne(ctx, handlerCtx, batch, msgs)
		}
		cfg.Log.WarnContext(handlerCtx, "batch not persisted; retrying", "topic", cfg.Topic, "partition", partition,
			"last_offset", lastOffset, "size", len(batch), "attempt", attempt, "backoff", backoff, "err", err)
		if pause.For(ctx, backoff) != nil {
			return false
		}
		backoff = min(2*backoff, cfg.MaxRetryBackoff)
	}
}

// handleOneByOne hands each message of a failing batch to the handler alone:
// those that succeed are done, those that fail for another reason than a
// dependency outage are dead-lettered, and an outage is waited out.
func (h *claimHandler) handleOneByOne(ctx, handlerCtx context.Context, batch []seckill.Reservation, msgs []*sarama.ConsumerMessage) bool {
	cfg := h.c.cfg
	for i, r := range batch {
		backoff := cfg.RetryBackoff
		for {
			err := h.handle(handlerCtx, batch[i:i+1])
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return false
			}
			if !transient(err) {
				cfg.Log.ErrorContext(messageContext(handlerCtx, msgs[i]), "reservation cannot be handled; dead-lettered, the reconciler ends its hold",
					"order_id", r.OrderID, "voucher_id", r.VoucherID, "partition", msgs[i].Partition, "offset", msgs[i].Offset, "err", err)
				if !h.deadLetter(ctx, msgs[i], ReasonFailed, err) {
					return false
				}
				break
			}
			if pause.For(ctx, backoff) != nil {
				return false
			}
			backoff = min(2*backoff, cfg.MaxRetryBackoff)
		}
	}
	return true
}

// deadLetter puts msg in the dead-letter topic, retrying until it is there;
// false if the session ended first (the message is then not committed, and
// comes back). Without a dead-letter topic it is only logged.
func (h *claimHandler) deadLetter(ctx context.Context, msg *sarama.ConsumerMessage, reason string, cause error) bool {
	cfg := h.c.cfg
	lctx := messageContext(ctx, msg)
	if cfg.DeadLetters == nil {
		cfg.Log.ErrorContext(lctx, "poison message skipped (no dead-letter topic)", "topic", msg.Topic, "partition", msg.Partition,
			"offset", msg.Offset, "key", string(msg.Key), "err", cause)
		cfg.Metrics.deadLettered(reason)
		return true
	}
	backoff := cfg.RetryBackoff
	for {
		err := cfg.DeadLetters.put(msg, reason, cause)
		if err == nil {
			cfg.Log.ErrorContext(lctx, "message dead-lettered; list and replay it with `seckill deadletters`", "topic", msg.Topic,
				"partition", msg.Partition, "offset", msg.Offset, "dead_letter_topic", cfg.DeadLetters.Topic(), "reason", reason, "err", cause)
			cfg.Metrics.deadLettered(reason)
			return true
		}
		cfg.Log.WarnContext(lctx, "dead-letter write failed; retrying before the partition moves on", "err", err, "backoff", backoff)
		if pause.For(ctx, backoff) != nil {
			return false
		}
		backoff = min(2*backoff, cfg.MaxRetryBackoff)
	}
}

// transient reports whether err is a dependency outage (or a deadline): worth
// waiting for, never a reason to set a message aside.
func transient(err error) bool {
	return errors.Is(err, apperr.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// Decode parses one message value. A message without usable ids is an error:
// nothing could be persisted or released for it.
func Decode(value []byte) (seckill.Reservation, error) {
	var r seckill.Reservation
	if err := json.Unmarshal(value, &r); err != nil {
		return seckill.Reservation{}, fmt.Errorf("kafkaq: decode: %w", err)
	}
	if r.OrderID <= 0 || r.VoucherID <= 0 || r.UserID <= 0 {
		return seckill.Reservation{}, fmt.Errorf("kafkaq: decode: %w: order, voucher and user ids are required", apperr.ErrInvalidInput)
	}
	return r, nil
}
