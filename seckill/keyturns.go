package seckill

import (
	"context"
	"fmt"
	"sync"

	"github.com/flashsale/seckill/seckill/apperr"
)

// KeyTurns lets one request at a time go on with a key in this process: a
// retry that arrives while the first request with its Idempotency-Key is
// still being decided waits for that one, so it is answered by what the
// first did (replayed, or begun anew) and never races it. The buy (Buyer)
// and the operators' changes (the gateway) take their turns by it. Its
// zero value is ready to use.
type KeyTurns[K comparable] struct {
	mu   sync.Mutex
	busy map[K]chan struct{}
}

// Take waits until no other request holds k, then holds it; done hands it
// on. A context that ends first is apperr.ErrUnavailable: the first request
// is still in progress.
func (t *KeyTurns[K]) Take(ctx context.Context, k K) (done func(), err error) {
	for {
		t.mu.Lock()
		busy, ok := t.busy[k]
		if !ok {
			if t.busy == nil {
				t.busy = make(map[K]chan struct{})
			}
			ch := make(chan struct{})
			t.busy[k] = ch
			t.mu.Unlock()
			return func() {
				t.mu.Lock()
				delete(t.busy, k)
				t.mu.Unlock()
				close(ch)
			}, nil
		}
		t.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: a request with the same Idempotency-Key is still in progress: %w", apperr.ErrUnavailable, ctx.Err())
		}
	}
}
