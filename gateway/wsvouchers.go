package gateway

// The public half of GET /api/v1/ws: every open socket, signed in or not,
// gets {"type":"voucher","voucher":{...}} for every voucher not yet ended when
// it opens, then whenever a voucher's stock_left or state changes, at most
// four times a second per voucher.
//
// The work of one change does not grow with the sockets: the catalog cache
// encodes the changed voucher once (catalog.go), and the feed hands the same
// bytes to every socket's queue, a non-blocking channel send each. A socket's
// queue is bounded (Live.VoucherQueue frames, pointers to shared bytes): when
// a slow reader lets it fill, the socket is marked for a resync instead of
// growing, and its writer drops what is queued and sends the current frame of
// every voucher (the latest state is all a page needs), so memory per socket
// stays bounded and a slow page catches up rather than being cut off.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/pause"
)

// Defaults of the public feed.
const (
	// DefaultVoucherQueue is how many voucher frames wait for one socket's
	// writer before it resyncs instead.
	DefaultVoucherQueue = 16
	// DefaultMaxPublicSockets caps the sockets of one instance that get
	// voucher frames (each costs two goroutines, a small queue and a file
	// descriptor: DescriptorCaps sizes the cap below the open-file limit).
	DefaultMaxPublicSockets = 100_000
	// DefaultMaxSocketsPerAddr caps the open sockets of one client address
	// (an IPv6 /56 is one): a household's or an office's tabs.
	DefaultMaxSocketsPerAddr = 32
	// voucherPushGap is the least time between two pushes of one voucher:
	// a sale selling a thousand items a second is shown four times a
	// second, not a thousand.
	voucherPushGap = 250 * time.Millisecond
)

// publicSub is one socket's place in the voucher feed.
type publicSub struct {
	c      chan []byte   // frames to write, shared bytes
	wake   chan struct{} // the queue overflowed: resync
	resync atomic.Bool
	at     addrSocks // the client's address (clientKey), and whether signed in
}

// voucherFeed fans catalog changes out to every socket of this instance.
// Every socket has a place in it, so it also holds the socket caps: max in
// all, of which reserve only signed-in sockets may take, and perAddr per
// client address for the sockets without a token and as many again for the
// signed-in ones: sockets without a token, which anyone can open, cannot
// lock shoppers out of their order pushes, in all or at one address.
type voucherFeed struct {
	srv     *Server
	queue   int
	max     int
	reserve int
	perAddr int // 0: no cap

	start  sync.Once
	mu     sync.RWMutex
	subs   map[*publicSub]struct{}
	anon   int               // subs without a token
	byAddr map[addrSocks]int // subs by client address and sign-in

	// pushes counts voucher changes broadcast; frames counts the frames
	// handed to socket queues (pushes × sockets); resyncs counts queues
	// that overflowed.
	pushes, frames, resyncs atomic.Int64
}

func newVoucherFeed(s *Server, live Live) *voucherFeed {
	return &voucherFeed{srv: s, queue: live.VoucherQueue, max: live.MaxPublicSockets, reserve: live.SignedInReserve,
		perAddr: max(live.MaxSocketsPerAddr, 0), subs: make(map[*publicSub]struct{}), byAddr: make(map[addrSocks]int)}
}

// addrSocks counts the sockets of one client address, signed in or not.
type addrSocks struct {
	key      string
	signedIn bool
}

// Refusals of subscribe.
var (
	errSocketsFull = apperr.Public(apperr.ErrUnavailable,
		"this server has too many live connections; try again shortly")
	errAnonymousFull = apperr.Public(apperr.ErrUnavailable,
		"this server has too many live connections without a sign-in; sign in, or try again shortly")
	errAddrSockets = apperr.Public(apperr.ErrRateLimited,
		"too many live connections from your address; close some of this shop's tabs, or try again shortly")
)

// subscribe adds the socket of a client at address key, or says which cap
// it is over. The feed's loop starts with the first socket and ends at
// Shutdown.
func (f *voucherFeed) subscribe(ctx context.Context, key string, signedIn bool) (*publicSub, error) {
	f.start.Do(func() { go f.run(ctx) })
	p := &publicSub{c: make(chan []byte, f.queue), wake: make(chan struct{}, 1), at: addrSocks{key, signedIn}}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case len(f.subs) >= f.max:
		return nil, errSocketsFull
	case !signedIn && f.anon >= f.max-f.reserve:
		return nil, errAnonymousFull
	case f.perAddr > 0 && f.byAddr[p.at] >= f.perAddr:
		return nil, errAddrSockets
	}
	f.subs[p] = struct{}{}
	f.byAddr[p.at]++
	if !signedIn {
		f.anon++
	}
	return p, nil
}

func (f *voucherFeed) unsubscribe(p *publicSub) {
	if p == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.subs[p]; !ok {
		return
	}
	delete(f.subs, p)
	if f.byAddr[p.at]--; f.byAddr[p.at] <= 0 {
		delete(f.byAddr, p.at)
	}
	if !p.at.signedIn {
		f.anon--
	}
}

// broadcast hands frame to every socket's queue without waiting for any.
func (f *voucherFeed) broadcast(frame []byte) {
	f.pushes.Add(1)
	f.mu.RLock()
	defer f.mu.RUnlock()
	for p := range f.subs {
		select {
		case p.c <- frame:
		default:
			f.resyncs.Add(1)
			p.resync.Store(true)
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
	}
	f.frames.Add(int64(len(f.subs)))
}

// frames is what a socket is sent when it opens or resyncs: the current
// frame of every voucher not yet ended, oldest first.
func (f *voucherFeed) current(ctx context.Context) [][]byte {
	e, err := f.srv.catalog(ctx)
	if err != nil {
		// The page read the catalog over HTTP anyway; changes still come.
		f.srv.log.Debug("websocket: no catalog to send on open", "err", err)
		return nil
	}
	out := make([][]byte, 0, len(e.all))
	for i := len(e.all) - 1; i >= 0; i-- {
		if ev := e.all[i]; ev.v.State != seckill.StateEnded {
			out = append(out, ev.frame)
		}
	}
	return out
}

// run waits for each new catalog snapshot and broadcasts the vouchers whose
// encoding changed, each at most once per voucherPushGap (a voucher held
// back is sent when its gap is over, with its state then).
func (f *voucherFeed) run(ctx context.Context) {
	sent := map[int64]*encodedVoucher{}
	at := map[int64]time.Time{}
	first := true
	for {
		snap, err := f.srv.deps.Catalog.Snapshot(ctx)
		if err != nil {
			if pause.For(ctx, time.Second) != nil {
				return
			}
			continue
		}
		e, err := f.srv.catalogCache.encoded(snap)
		if err != nil {
			f.srv.log.Error("websocket: catalog not encoded", "err", err)
			if pause.For(ctx, time.Second) != nil {
				return
			}
			continue
		}
		now := time.Now()
		var held time.Duration
		for _, ev := range e.all {
			id := ev.v.ID
			if sent[id] == ev {
				continue
			}
			if first {
				sent[id] = ev // what every socket opening now is sent
				continue
			}
			if wait := voucherPushGap - now.Sub(at[id]); wait > 0 {
				if held == 0 || wait < held {
					held = wait
				}
				continue
			}
			f.broadcast(ev.frame)
			sent[id], at[id] = ev, now
		}
		first = false
		var retry <-chan time.Time
		if held > 0 {
			retry = time.After(held)
		}
		select {
		case <-ctx.Done():
			return
		case <-snap.Superseded():
		case <-retry:
		}
	}
}
