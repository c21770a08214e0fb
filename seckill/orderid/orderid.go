// Package orderid hands out unique, time-ordered 64-bit order ids without a
// Redis round trip per id.
//
// Layout (snowflake): 1 unused sign bit, 41 bits of milliseconds since
// 2025-01-01T00:00:00Z (enough until 2094), 10 bits of node id, 12 bits of
// sequence within the millisecond (4096 ids per ms per node).
//
// Why not the seeds' RedisIdWorker (INCR on a Redis key per id): it puts a
// network round trip and a single hot key on the path of every purchase, and
// the ids are only as available as that one key. Here each instance makes ids
// from its own clock and a node id, with no I/O (up to 4096 ids per ms). What
// must stay unique across instances is the node id, and that is the one thing
// we coordinate: LeaseNode claims seckill:node:<n> in Redis once at start-up
// and Lease.Run keeps it renewed, so two running instances never share a node
// id and their ids can never collide.
package orderid

import (
	"fmt"
	"sync/atomic"
	"time"
)

const (
	// EpochMs is the custom epoch, 2025-01-01T00:00:00Z, in unix milliseconds.
	EpochMs = 1735689600000
	// NodeBits is the width of the node id.
	NodeBits = 10
	// SeqBits is the width of the per-millisecond sequence.
	SeqBits = 12
	// MaxNode is the largest node id.
	MaxNode = 1<<NodeBits - 1

	seqMask = 1<<SeqBits - 1
)

// Generator makes ids for one node. It is safe for concurrent use and takes
// no lock: one compare-and-swap per id.
type Generator struct {
	node int64
	// last is the last issued (ms << SeqBits | seq). It only grows, so ids
	// never repeat or go backwards, even when the wall clock does.
	last atomic.Int64
	// now returns milliseconds since the epoch; tests replace it.
	now func() int64
}

// New returns a generator for node (0..MaxNode). The node must be unique
// among running instances: take it from LeaseNode.
func New(node int64) (*Generator, error) {
	return newWithClock(node, func() int64 { return time.Now().UnixMilli() - EpochMs })
}

func newWithClock(node int64, now func() int64) (*Generator, error) {
	if node < 0 || node > MaxNode {
		return nil, fmt.Errorf("orderid: node %d is outside 0..%d", node, MaxNode)
	}
	return &Generator{node: node, now: now}, nil
}

// Node is the generator's node id.
func (g *Generator) Node() int64 { return g.node }

// Next returns a new id, greater than every id this generator returned before.
//
// When the sequence of the current millisecond is used up, Next waits for the
// clock's next millisecond. When the wall clock has stepped back, Next keeps
// counting from the last millisecond it used; should that millisecond's
// sequence run out while the clock is still behind, it moves on to the next
// millisecond instead of waiting, because the wait could last as long as the
// clock's step back. The id's time part may then run ahead of the clock until
// the clock catches up; it never runs backwards.
func (g *Generator) Next() int64 {
	for {
		last := g.last.Load()
		lastMs := last >> SeqBits
		now := g.now()
		var next int64
		switch {
		case now > lastMs:
			next = now << SeqBits
		case last&seqMask < seqMask:
			next = last + 1
		case now == lastMs:
			time.Sleep(50 * time.Microsecond)
			continue
		default:
			next = (lastMs + 1) << SeqBits
		}
		if g.last.CompareAndSwap(last, next) {
			ms, seq := next>>SeqBits, next&seqMask
			return ms<<(NodeBits+SeqBits) | g.node<<SeqBits | seq
		}
	}
}

// Parts splits an id into its time, node and sequence.
func Parts(id int64) (at time.Time, node, seq int64) {
	ms := id >> (NodeBits + SeqBits)
	return time.UnixMilli(ms + EpochMs).UTC(), id >> SeqBits & MaxNode, id & seqMask
}
