package redisstock

// The promises of one bucket that meet in this process go to Redis
// together: one HDEL of all their undecided fields instead of one each, in
// the way batch.go sends reservations (a lone promise leaves at once; those
// that arrive while one is in flight leave together when it returns). A
// promise waits at most the HDEL in flight, while its order's replays wait
// for it anyway; it is answered only once its field is gone, so what
// Promise's caller sees is unchanged.

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// promisers are the promise queues of the buckets this process promised
// in, by their ledger key.
type promisers struct {
	m   sync.Map // string -> *promiser
	rdb redis.Cmdable
}

// promiser queues the undecided fields of one ledger to delete.
type promiser struct {
	ledger string
	of     *promisers

	mu      sync.Mutex
	queue   []*queuedPromise
	running bool
}

// queuedPromise is one field waiting for its HDEL.
type queuedPromise struct {
	ctx   context.Context
	field string
	err   error
	done  chan struct{}
}

// promise deletes field of ledger in the next HDEL of that ledger, and
// returns its error. A caller whose ctx ends stops waiting; its field
// still goes with the others (deleting it twice is harmless).
func (p *promisers) promise(ctx context.Context, ledger, field string) error {
	v, ok := p.m.Load(ledger)
	if !ok {
		v, _ = p.m.LoadOrStore(ledger, &promiser{ledger: ledger, of: p})
	}
	q := v.(*promiser)
	item := &queuedPromise{ctx: ctx, field: field, done: make(chan struct{})}
	q.mu.Lock()
	q.queue = append(q.queue, item)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.send()
	}
	select {
	case <-item.done:
		return item.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send deletes the queued fields, a bounded batch per HDEL, until none is
// left.
func (q *promiser) send() {
	for {
		q.mu.Lock()
		n := min(len(q.queue), DefaultReserveBatch)
		if n == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		batch := q.queue[:n:n]
		q.queue = q.queue[n:]
		if len(q.queue) == 0 {
			q.queue = nil
		}
		q.mu.Unlock()

		fields := make([]string, len(batch))
		for i, item := range batch {
			fields[i] = item.field
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), scriptWait)
		err := q.of.rdb.HDel(ctx, q.ledger, fields...).Err()
		cancel()
		for _, item := range batch {
			item.err = err
			close(item.done)
		}
	}
}
