// Package gather has one job: the items that meet while a send is in flight
// leave together. Many goroutines hand it items; one goroutine at a time
// sends them, in bounded batches, and never holds an item back to fill one.
// It knows nothing of what a send does (a Redis script, an HDEL, a write to
// a Kafka partition): its user gives the send function and keeps one queue
// per place the items go (a bucket, a partition).
package gather

import (
	"context"
	"sync"
)

// Queue sends the items given to Do through its send function, a batch per
// call. An item that finds the queue idle leaves at once, alone; the items
// that arrive while a send is in flight wait and leave together, in the
// order they arrived, at most the queue's bound per send, the moment it
// returns. So a lone item pays one send, and a crowd one send per batch,
// waiting at most the send in flight (and those of the batches ahead of
// it). One goroutine sends a queue's batches at a time, started by the item
// that finds the queue idle and gone once it is empty: an idle queue costs
// a few words and no goroutine.
type Queue[T any] struct {
	bound int
	send  func(ctx context.Context, batch []T) error

	mu      sync.Mutex
	waiting []*batch[T] // oldest first; only the last may still have room
	running bool        // a goroutine is sending this queue's batches
}

// keptSlots is how many slots of its waiting list an emptied queue keeps:
// a crowd of up to that many bounds of items reuses them; a larger burst's
// list goes, so a queue's memory stays a few words between sales.
const keptSlots = 4

// batch is one send's items and its outcome.
type batch[T any] struct {
	ctx   context.Context // its first item's: the send runs on it
	items []T
	done  chan struct{} // closed once the send returned
	err   error         // the send's, written before done is closed
}

// New returns a Queue that calls send with each batch, at most bound items
// per batch (a bound below 1 counts as 1: each item alone). send runs on
// the context of its batch's first item without its cancellation (the
// others must still be sent when that caller gives up), so it bounds its
// own work, for instance with a timeout; the error it returns is every
// item's of that batch. send must not call Do on the same queue: the queue
// waits for send to return before it sends again.
func New[T any](bound int, send func(ctx context.Context, batch []T) error) *Queue[T] {
	return &Queue[T]{bound: max(bound, 1), send: send}
}

// Do queues item for the next batch and waits until that batch was sent,
// then returns the send's error. When ctx ends first Do returns ctx.Err()
// at once, and item is sent all the same, with its batch: the caller must
// then not read what send writes into it (the send may still run).
func (q *Queue[T]) Do(ctx context.Context, item T) error {
	q.mu.Lock()
	var b *batch[T]
	if n := len(q.waiting); n > 0 && len(q.waiting[n-1].items) < q.bound {
		b = q.waiting[n-1]
	} else {
		b = &batch[T]{ctx: ctx, done: make(chan struct{})}
		q.waiting = append(q.waiting, b)
	}
	b.items = append(b.items, item)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.run()
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run sends the waiting batches, oldest first, until none is left. Only one
// run goes on per queue, so the items leave in the order they queued.
func (q *Queue[T]) run() {
	for {
		q.mu.Lock()
		if len(q.waiting) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		b := q.waiting[0]
		// Shift rather than reslice, so the few slots a queue needs are
		// reused instead of allocated again for every batch; a burst's
		// longer list goes once the queue is empty.
		n := copy(q.waiting, q.waiting[1:])
		q.waiting[n] = nil
		q.waiting = q.waiting[:n]
		if n == 0 && cap(q.waiting) > keptSlots {
			q.waiting = nil
		}
		q.mu.Unlock()
		b.err = q.send(context.WithoutCancel(b.ctx), b.items)
		close(b.done)
	}
}
