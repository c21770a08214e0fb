package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/seckill/apperr"
)

// Why a subscription ended, from Subscription.Err. ErrHubFull and ErrStopped
// wrap apperr.ErrUnavailable, so the gateway's one error table maps them to
// 503 when they happen at the handshake.
var (
	// ErrSlowConsumer: the subscription's buffer filled, so its client was not
	// keeping up. It is dropped rather than allowed to hold anyone else back;
	// the client reconnects and gets a fresh snapshot.
	ErrSlowConsumer = errors.New("notify: subscriber too slow, buffer full")
	// ErrReplaced: the same user opened more than MaxPerUser subscriptions and
	// this, the oldest, made room for the newest.
	ErrReplaced = errors.New("notify: replaced by a newer subscription of the same user")
	// ErrHubFull: the hub already holds MaxSubscriptions.
	ErrHubFull = fmt.Errorf("notify: too many subscriptions: %w", apperr.ErrUnavailable)
	// ErrStopped: the hub was stopped (shutdown) before or while subscribed.
	ErrStopped = fmt.Errorf("notify: hub stopped: %w", apperr.ErrUnavailable)
)

// HubConfig is what NewHub builds a Hub from. Zero values take the
// defaults.
type HubConfig struct {
	// Redis carries the order event channels.
	Redis redis.UniversalClient
	// Log gets the hub's reconnections and drops (nil discards).
	Log *slog.Logger
	// BufferSize is how many frames a subscription holds before its client
	// counts as slow and is dropped. Default 64: a shopper has a handful of
	// orders and each changes state a few times, so a healthy client never
	// gets near it.
	BufferSize int
	// MaxPerUser caps one user's subscriptions (tabs, devices); opening one
	// more ends the oldest with ErrReplaced. Default 8.
	MaxPerUser int
	// MaxSubscriptions caps the hub; Subscribe beyond it returns an ended
	// subscription with ErrHubFull. Default 100000. With the two caps above,
	// the hub's memory is bounded by MaxSubscriptions*BufferSize frames.
	MaxSubscriptions int
	// HealthCheckInterval is how long a quiet connection may stay silent
	// before the hub pings Redis; a ping left unanswered for another interval
	// means a dead connection (a half-open TCP never errors by itself), and
	// the hub subscribes again. Default 15s.
	HealthCheckInterval time.Duration
	// SubscribeTimeout bounds each SSUBSCRIBE until Redis confirms it.
	// Default 5s.
	SubscribeTimeout time.Duration
	// Registerer receives the hub's Prometheus collectors; nil registers
	// nothing (the collectors still count).
	Registerer prometheus.Registerer
	// Tracer, when set, makes a span of each push of a traced event, in the
	// trace of the change it tells (trace.go). Nil: none.
	Tracer trace.Tracer
}

func (o HubConfig) withDefaults() HubConfig {
	if o.BufferSize <= 0 {
		o.BufferSize = 64
	}
	if o.MaxPerUser <= 0 {
		o.MaxPerUser = 8
	}
	if o.MaxSubscriptions <= 0 {
		o.MaxSubscriptions = 100_000
	}
	if o.HealthCheckInterval <= 0 {
		o.HealthCheckInterval = 15 * time.Second
	}
	if o.SubscribeTimeout <= 0 {
		o.SubscribeTimeout = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Backoff between attempts to subscribe again after Redis went away.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

type hubState int

const (
	hubNew hubState = iota
	hubRunning
	hubStopped
)

// Hub fans the fleet's order events out to the subscriptions of the buyers
// connected to this instance. One per gateway process.
type Hub struct {
	rdb   redis.UniversalClient
	log   *slog.Logger
	opts  HubConfig
	m     *metrics
	ready chan struct{}

	mu    sync.Mutex
	state hubState
	subs  map[int64][]*Subscription // by user, oldest first
	total int
	// ps holds the live PubSub of each shard channel (index as in
	// Channels), so the watcher can close them. On a Redis Cluster each is
	// a connection to the master of its channel's slot: a shard channel's
	// SSUBSCRIBE cannot share a connection with another slot's.
	ps []*redis.PubSub
}

// NewHub returns a hub reading the order event channels through
// cfg.Redis. It starts nothing: Run does. Subscriptions taken before Run
// get the events from when Run is Ready. It fails only if cfg.Registerer
// refuses the collectors (for example, a second hub on the same registry).
func NewHub(cfg HubConfig) (*Hub, error) {
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Hub{
		rdb:   cfg.Redis,
		log:   cfg.Log.With("component", "notify"),
		opts:  cfg,
		m:     m,
		ready: make(chan struct{}),
		subs:  make(map[int64][]*Subscription),
		ps:    make([]*redis.PubSub, ChannelCount),
	}, nil
}

// Ready is closed once Redis has confirmed Run's subscription to every
// shard channel (Channels): every event published from then on reaches
// this hub.
func (h *Hub) Ready() <-chan struct{} { return h.ready }

// Run subscribes to every shard channel, closes Ready once Redis has
// confirmed each, and fans the events out until ctx ends, subscribing again
// by itself when a connection drops or a channel's slot moves to another
// master, and telling the subscribers of that channel's buyers to resync,
// since pub/sub loses what was published in the gap. When Run returns the
// hub is stopped: every subscription ends with ErrStopped (the gateway
// closes the sockets cleanly) and later ones are refused with it. It
// returns nil when ctx ends, an error when Redis did not confirm a first
// subscription. Call it once.
func (h *Hub) Run(ctx context.Context) error {
	h.mu.Lock()
	if h.state != hubNew {
		h.mu.Unlock()
		return fmt.Errorf("notify: the hub's Run was called twice: %w", apperr.ErrConflict)
	}
	h.state = hubRunning
	h.mu.Unlock()
	defer h.stop()

	channels := Channels()
	first := make([]*redis.PubSub, len(channels))
	errs := make([]error, len(channels))
	var wg sync.WaitGroup
	for i, ch := range channels {
		wg.Go(func() { first[i], errs[i] = h.subscribe(ctx, ch) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(first)
		return err
	}
	h.mu.Lock()
	copy(h.ps, first)
	h.mu.Unlock()

	wg.Go(func() {
		// A blocked read does not watch the context; closing the PubSubs
		// is what wakes them.
		<-ctx.Done()
		h.mu.Lock()
		closeAll(h.ps)
		clear(h.ps)
		h.mu.Unlock()
	})
	for i, ch := range channels {
		wg.Go(func() { h.run(ctx, i, ch, first[i]) })
	}
	close(h.ready)
	h.log.Info("notify hub started", "channels", len(channels), "first", channels[0])
	wg.Wait()
	return nil
}

// stop ends every subscription with ErrStopped and refuses new ones.
func (h *Hub) stop() {
	h.mu.Lock()
	h.state = hubStopped
	h.mu.Unlock()
	h.closeAll(ErrStopped)
}

func closeAll(list []*redis.PubSub) {
	for _, ps := range list {
		if ps != nil {
			_ = ps.Close()
		}
	}
}

// subscribe opens a PubSub on the shard channel ch and waits for Redis's
// confirmation.
func (h *Hub) subscribe(ctx context.Context, ch string) (*redis.PubSub, error) {
	ps := h.rdb.SSubscribe(ctx, ch)
	msg, err := ps.ReceiveTimeout(ctx, h.opts.SubscribeTimeout)
	if err == nil {
		if s, ok := msg.(*redis.Subscription); ok && s.Kind == "ssubscribe" {
			return ps, nil
		}
		err = fmt.Errorf("unexpected first message %T", msg)
	}
	_ = ps.Close()
	return nil, fmt.Errorf("notify: subscribe %s: %w: %w", ch, apperr.ErrUnavailable, err)
}

// run reads shard i's events until ctx ends, replacing its PubSub whenever
// it dies.
func (h *Hub) run(ctx context.Context, i int, ch string, ps *redis.PubSub) {
	for {
		err := h.receive(ctx, i, ps)
		_ = ps.Close()
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("notify: lost the Redis subscription; subscribing again", "channel", ch, "err", err)
		if ps = h.resubscribe(ctx, i, ch); ps == nil {
			return
		}
	}
}

// Ways a subscription ends without a connection error.
var (
	// errNoPong marks a connection that did not answer a ping in time.
	errNoPong = errors.New("no pong from Redis within the health check interval")
	// errUnsubscribed: the server dropped the channel, as a Redis Cluster
	// master does when the channel's slot moves to another master.
	errUnsubscribed = errors.New("the server unsubscribed the channel (its slot moved)")
)

// receive dispatches messages of shard i from ps until it fails.
func (h *Hub) receive(ctx context.Context, i int, ps *redis.PubSub) error {
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, h.opts.HealthCheckInterval)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return err
			}
			if pinged {
				return errNoPong
			}
			if err := ps.Ping(ctx); err != nil {
				return err
			}
			pinged = true
			continue
		}
		pinged = false // any traffic proves the connection alive
		switch m := msg.(type) {
		case *redis.Message:
			h.dispatch(m.Payload)
		case *redis.Subscription:
			switch m.Kind {
			case "ssubscribe":
				// go-redis re-subscribed on a new connection by itself.
				h.resynced(i)
			case "sunsubscribe":
				return errUnsubscribed
			}
		}
	}
}

// resubscribe retries with capped exponential backoff until a new PubSub on
// shard channel i is confirmed (returned) or ctx ends (nil).
func (h *Hub) resubscribe(ctx context.Context, i int, ch string) *redis.PubSub {
	backoff := minBackoff
	for {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		ps, err := h.subscribe(ctx, ch)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			h.log.Warn("notify: subscribe failed", "channel", ch, "err", err, "retry_in", backoff)
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		h.mu.Lock()
		if ctx.Err() != nil { // the watcher already ran and will not close this one
			h.mu.Unlock()
			_ = ps.Close()
			return nil
		}
		h.ps[i] = ps
		h.mu.Unlock()
		h.resynced(i)
		return ps
	}
}

// resynced tells every subscription of the buyers on shard channel i that
// events may have been lost while the hub was not subscribed to it.
func (h *Hub) resynced(i int) {
	h.m.reconnects.Inc()
	h.log.Info("notify: subscribed again; asking clients to resync", "channel", channel(i))
	h.mu.Lock()
	defer h.mu.Unlock()
	for userID, list := range h.subs {
		if shardOf(userID) != i {
			continue
		}
		for _, s := range list {
			select {
			case s.resync <- struct{}{}:
			default: // one pending signal is enough
			}
		}
	}
}

// dispatch hands each event of one message (decodeMessage) to every
// subscription of its buyer, in the message's order. A bad element is
// counted and logged, and the others still go.
func (h *Hub) dispatch(payload string) {
	events, errs := decodeMessage(payload)
	for _, err := range errs {
		h.m.events.WithLabelValues(eventBad).Inc()
		h.log.Warn("notify: ignoring a bad event", "err", err)
	}
	for i := range events {
		h.deliver(&events[i].ev, events[i].userID)
	}
}

// deliver hands one event to every subscription of its buyer, without ever
// blocking: a full buffer ends that subscription instead.
func (h *Hub) deliver(ev *wireEvent, userID int64) {
	h.mu.Lock()
	n := len(h.subs[userID])
	h.mu.Unlock()
	if n == 0 {
		// Most events are for buyers connected elsewhere: skip the encoding.
		h.m.events.WithLabelValues(eventNoSubscriber).Inc()
		return
	}
	frame, err := encodeOrderFrame(&ev.Order)
	if err != nil {
		h.m.events.WithLabelValues(eventBad).Inc()
		h.log.Warn("notify: cannot encode a frame", "err", err)
		return
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.subs[userID]
	if len(list) == 0 {
		h.m.events.WithLabelValues(eventNoSubscriber).Inc()
		return
	}
	h.m.events.WithLabelValues(eventDelivered).Inc()
	span := h.startPush(ev, userID)
	var slow []*Subscription
	for _, s := range list {
		select {
		case s.c <- frame:
			h.m.pushes.Inc()
			if !ev.At.IsZero() {
				h.m.delay.Observe(time.Since(ev.At).Seconds())
			}
		default:
			slow = append(slow, s)
		}
	}
	endPush(span, len(list)-len(slow), len(slow))
	for _, s := range slow {
		h.m.drops.WithLabelValues(dropSlow).Inc()
		h.log.Info("notify: dropping a slow subscriber", "user_id", userID, "buffer", h.opts.BufferSize)
		h.endLocked(s, ErrSlowConsumer)
	}
}
