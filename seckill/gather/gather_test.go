package gather

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hang is how long a test waits for what must happen before it calls the
// queue stuck: a guard against a deadlock, never a measure of speed.
const hang = 10 * time.Second

// recorder is a send that records its batches and, while gate is set,
// waits for the gate before returning from its first call.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	ctxs    []context.Context
	entered chan struct{} // closed once the first send began
	gate    chan struct{} // the first send returns once it is closed
	once    sync.Once
}

func newRecorder() *recorder {
	return &recorder{entered: make(chan struct{}), gate: make(chan struct{})}
}

// send records batch and answers an error that names it.
func (r *recorder) send(ctx context.Context, batch []int) error {
	r.mu.Lock()
	r.batches = append(r.batches, slices.Clone(batch))
	r.ctxs = append(r.ctxs, ctx)
	r.mu.Unlock()
	first := false
	r.once.Do(func() { first = true; close(r.entered) })
	if first {
		<-r.gate
	}
	return batchErr(batch)
}

func batchErr(batch []int) error { return fmt.Errorf("batch %v", batch) }

func (r *recorder) got() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// queued is how many items wait in q for a send.
func (q *Queue[T]) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, b := range q.waiting {
		n += len(b.items)
	}
	return n
}

// idle reports whether no goroutine sends q's batches.
func (q *Queue[T]) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.running
}

// doAsync runs q.Do in a goroutine and returns where its error comes.
func doAsync[T any](ctx context.Context, q *Queue[T], item T) <-chan error {
	out := make(chan error, 1)
	go func() { out <- q.Do(ctx, item) }()
	return out
}

// enqueue has q take item on ctx and waits until it is queued, the nth
// item waiting, so the items of a test queue in the order it gives them.
func enqueue[T any](t *testing.T, ctx context.Context, q *Queue[T], item T, n int) <-chan error {
	t.Helper()
	c := doAsync(ctx, q, item)
	require.Eventually(t, func() bool { return q.queued() == n }, hang, 100*time.Microsecond, "%d items queued", n)
	return c
}

// inFlight has q send item 0 and waits until r's first send holds it.
func inFlight(q *Queue[int], r *recorder) <-chan error {
	c := doAsync(context.Background(), q, 0)
	<-r.entered
	return c
}

func result(t *testing.T, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(hang):
		t.Fatal("Do never returned")
		return nil
	}
}

// A lone item leaves at once and alone: it waits for no crowd, and once
// it is sent the queue's goroutine is gone.
func TestLoneItemLeavesAlone(t *testing.T) {
	r := newRecorder()
	close(r.gate)
	q := New(8, r.send)
	require.EqualError(t, q.Do(context.Background(), 1), "batch [1]")
	require.Equal(t, [][]int{{1}}, r.got())
	require.Eventually(t, q.idle, hang, 100*time.Microsecond, "the sender ends with the queue empty")
	require.EqualError(t, q.Do(context.Background(), 2), "batch [2]")
	require.Equal(t, [][]int{{1}, {2}}, r.got(), "a second lone item leaves alone too")
}

// The items that arrive while a send is in flight leave together when it
// returns, in the order they arrived, never more than the bound per send;
// each gets its own batch's error.
func TestInFlightItemsLeaveTogether(t *testing.T) {
	r := newRecorder()
	q := New(3, r.send)
	results := []<-chan error{inFlight(q, r)}
	for i := 1; i <= 7; i++ {
		results = append(results, enqueue(t, context.Background(), q, i, i))
	}
	require.Equal(t, [][]int{{0}}, r.got(), "nothing leaves while a send is in flight")
	close(r.gate)
	want := [][]int{{0}, {1, 2, 3}, {4, 5, 6}, {7}}
	for i, c := range results {
		var of []int
		for _, b := range want {
			if slices.Contains(b, i) {
				of = b
			}
		}
		require.Equal(t, batchErr(of), result(t, c), "item %d answered its own batch's error", i)
	}
	require.Equal(t, want, r.got())
}

// A send whose batch fails fails only that batch's items: the next batch
// is sent anyway, and its items get its own answer.
func TestFailedSendFailsItsBatchOnly(t *testing.T) {
	failed := errors.New("refused")
	var (
		mu    sync.Mutex
		sends int
	)
	entered, gate := make(chan struct{}), make(chan struct{})
	q := New(4, func(ctx context.Context, batch []string) error {
		mu.Lock()
		sends++
		n := sends
		mu.Unlock()
		if n == 1 {
			close(entered)
			<-gate
			return fmt.Errorf("the first: %w", failed)
		}
		return nil
	})
	ctx := context.Background()
	first := doAsync(ctx, q, "a")
	<-entered
	second := enqueue(t, ctx, q, "b", 1)
	close(gate)
	require.ErrorIs(t, result(t, first), failed)
	require.NoError(t, result(t, second))
}

// Many goroutines on one queue: no item is lost or sent twice, no batch
// passes the bound, one send at a time, and Do returns only once its item
// was sent. Batches do form: fewer sends than items. Run it with -race.
func TestCrowdSendsEachItemOnce(t *testing.T) {
	const (
		bound      = 5
		goroutines = 32
		each       = 100
	)
	var (
		inFlight, most atomic.Int32
		mu             sync.Mutex
		sent           = map[int]int{}
		sends          int
	)
	q := New(bound, func(ctx context.Context, batch []int) error {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		assert.LessOrEqual(t, len(batch), bound)
		time.Sleep(20 * time.Microsecond) // a round trip, for others to queue behind
		mu.Lock()
		defer mu.Unlock()
		sends++
		for _, item := range batch {
			sent[item]++
		}
		return nil
	})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				item := g*each + i
				if err := q.Do(context.Background(), item); err != nil {
					t.Errorf("item %d: %v", item, err)
				}
				mu.Lock()
				n := sent[item]
				mu.Unlock()
				if n != 1 {
					t.Errorf("item %d: Do returned with the item sent %d times", item, n)
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, sent, goroutines*each, "no item lost")
	for item, n := range sent {
		require.Equal(t, 1, n, "item %d sent once", item)
	}
	require.Equal(t, int32(1), most.Load(), "one send at a time")
	require.Less(t, sends, goroutines*each, "items that met left together")
	require.Eventually(t, q.idle, hang, 100*time.Microsecond)
}

// Each queue has its own sender: a send in flight on one queue holds back
// no item of another.
func TestQueuesSendApart(t *testing.T) {
	slow, fast := newRecorder(), newRecorder()
	close(fast.gate)
	a, b := New(4, slow.send), New(4, fast.send)
	ctx := context.Background()
	held := doAsync(ctx, a, 1)
	<-slow.entered
	require.EqualError(t, b.Do(ctx, 2), "batch [2]", "b's item leaves while a's send is in flight")
	close(slow.gate)
	require.EqualError(t, result(t, held), "batch [1]")
}

type ctxKey struct{}

// A caller whose context ends stops waiting at once with the context's
// error, also when it had ended before Do; its item still leaves with its
// batch, whose other items are answered as usual. The send runs on its
// batch's first item's context, values kept, cancellation not.
func TestCancelledCallerStopsWaitingItemStillSent(t *testing.T) {
	r := newRecorder()
	q := New(4, r.send)
	sending := inFlight(q, r)
	bg := context.Background()
	first, cancel := context.WithCancel(context.WithValue(bg, ctxKey{}, "first"))
	gaveUp := enqueue(t, first, q, 1, 1)
	stays := enqueue(t, bg, q, 2, 2)
	ended, cancelEnded := context.WithCancel(bg)
	cancelEnded()
	require.ErrorIs(t, q.Do(ended, 3), context.Canceled, "a caller whose context had ended does not wait")
	cancel()
	require.ErrorIs(t, result(t, gaveUp), context.Canceled, "answered while the send is still in flight")
	require.Equal(t, [][]int{{0}}, r.got())

	close(r.gate)
	require.EqualError(t, result(t, sending), "batch [0]")
	require.EqualError(t, result(t, stays), "batch [1 2 3]")
	require.Equal(t, [][]int{{0}, {1, 2, 3}}, r.got(), "the items of callers gone still leave")
	r.mu.Lock()
	sendCtx := r.ctxs[1]
	r.mu.Unlock()
	require.NoError(t, sendCtx.Err(), "the send is not cancelled with its first caller")
	require.Equal(t, "first", sendCtx.Value(ctxKey{}), "the send runs on its first item's context")
}

// A bound below 1 sends each item alone.
func TestBoundBelowOne(t *testing.T) {
	r := newRecorder()
	q := New(0, r.send)
	sending := inFlight(q, r)
	second := enqueue(t, context.Background(), q, 1, 1)
	third := enqueue(t, context.Background(), q, 2, 2)
	close(r.gate)
	for _, c := range []<-chan error{sending, second, third} {
		require.Error(t, result(t, c))
	}
	require.Equal(t, [][]int{{0}, {1}, {2}}, r.got())
}
