package redisstock

// The promises of one bucket that meet in this process go to Redis
// together: one HDEL of all their undecided fields instead of one each,
// queued by seckill/gather as batch.go's reservations are (a lone promise
// leaves at once; those that arrive while one is in flight leave together,
// up to DefaultReserveBatch, when it returns). A
// promise waits at most the HDEL in flight, while its order's replays wait
// for it anyway; it is answered only once its field is gone, so what
// Promise's caller sees is unchanged.

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill/gather"
)

// promisers are the promise queues of the buckets this process promised
// in, by their ledger key.
type promisers struct {
	m sync.Map // string -> *gather.Queue[string]
	// rdb is the buy path's group commit (GroupCommit), so an HDEL that
	// meets a reservation batch in flight goes with the next one instead
	// of in a round trip of its own. The group commit holds a queued
	// command until its batch returns, whatever its context (on a link
	// gone silent, until the link returns): a promise's caller still
	// stops waiting at its own deadline (promise), and the fields queued
	// meanwhile go in the HDELs that follow.
	rdb redis.Cmdable
}

// promise deletes field of ledger in the next HDEL of that ledger, and
// returns its error. A caller whose ctx ends stops waiting; its field
// still goes with the others (deleting it twice is harmless).
func (p *promisers) promise(ctx context.Context, ledger, field string) error {
	v, ok := p.m.Load(ledger)
	if !ok {
		v, _ = p.m.LoadOrStore(ledger, gather.New(DefaultReserveBatch, func(ctx context.Context, fields []string) error {
			ctx, cancel := context.WithTimeout(ctx, scriptWait)
			defer cancel()
			return p.rdb.HDel(ctx, ledger, fields...).Err()
		}))
	}
	return v.(*gather.Queue[string]).Do(ctx, field)
}
