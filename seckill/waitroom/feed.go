package waitroom

// The live place in line. With 100,000 shoppers waiting, every admission
// step moves every one of them; a message per shopper per step would be
// 100,000 messages a tick. Instead nothing per shopper crosses Redis when a
// line moves:
//
//   - The instance whose step moved a line publishes one compact message on
//     Channel: "voucher 42: head is now H; ranks F..H-1 were admitted with
//     passes expiring at X" (announceStep). Whichever instance admits, every
//     gateway hears it.
//   - A join or a read of a place publishes one message too, "user 7 is at
//     rank K in voucher 42" (announce), so the gateway holding that user's
//     socket learns the rank, whichever instance took the request.
//   - Each gateway's Feed keeps the ranks of its own connected shoppers only.
//     Places never move once admission began, so a shopper's position is
//     rank - head + 1, computed here from the one number H; an admitted
//     shopper's pass is signed here from X. The feed then writes at most one
//     frame a second to each of its own sockets whose place changed.
//
// So one step costs one Redis message however long the line, and each
// socket at most one frame a second; the only Redis reads are for the few
// shoppers whose state cannot be told from the messages (a pass that
// expired: used or not?), and once, at begin_at, the final ranks of the
// pre-queue (drawn at random, they moved while others joined).
//
// The Feed's state, its handling of the messages and its frames stay in
// this one file: they share one lock and the invariants above (ranks, head,
// at most one frame a second), which a reader needs in view together.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill/apperr"
)

// Channel is the Redis pub/sub channel of the rooms' announcements: line
// moves and places read. It carries no key of a script, so it is not
// voucher-tagged.
const Channel = "waitroom:moves"

// wire is one message of Channel, compact on purpose: a move is published
// at each step of each instance.
type wire struct {
	// T is "m" for a move, "w" for a watch (a place read or joined).
	T string `json:"t"`
	// The line: voucher, begin and end (ms), rate, pre-queue seconds.
	V int64 `json:"v"`
	B int64 `json:"b"`
	E int64 `json:"e"`
	R int64 `json:"r"`
	P int64 `json:"p,omitempty"`
	// D is true for a draw's line (Line.Draw).
	D bool `json:"d,omitempty"`
	// A is Redis's time (ms); H the head.
	A int64 `json:"a"`
	H int64 `json:"h"`
	// Move: F is the first rank this step admitted (ranks F..H-1), X their
	// passes' expiry (ms), N how many passes expired, C the room closed, O
	// the room sold out (no stock left to admit to) after the step.
	F int64 `json:"f,omitempty"`
	X int64 `json:"x,omitempty"`
	N int64 `json:"n,omitempty"`
	C bool  `json:"c,omitempty"`
	O bool  `json:"o,omitempty"`
	// Watch: U the user, K the rank, S the state, X the pass's expiry (or
	// the end of a hold, state held).
	U int64 `json:"u,omitempty"`
	K int64 `json:"k,omitempty"`
	S State `json:"s,omitempty"`
	// Turn (turn.go): U the user, W the kind, X the pass's expiry.
	W string `json:"w,omitempty"`
}

func (m *wire) setLine(l Line) {
	m.V, m.B, m.E, m.R, m.P, m.D = l.VoucherID, l.BeginAt.UnixMilli(), l.EndAt.UnixMilli(), l.AdmitPerSecond, l.PrequeueSeconds, l.Draw
}

func (m *wire) line() Line {
	return Line{VoucherID: m.V, BeginAt: time.UnixMilli(m.B), EndAt: time.UnixMilli(m.E), AdmitPerSecond: m.R, PrequeueSeconds: m.P, Draw: m.D}
}

// announce tells the feeds where st's shopper stands, when a push can
// follow (waiting, sold out, or admitted with the pass unused). It is best
// effort: the shopper already has the answer, and a lost announcement only
// means no pushes until the page reads its place again.
func (r *Room) announce(ctx context.Context, l Line, st Status) {
	if !st.State.Waits() && st.State != StateHeld && (st.State != StateAdmitted || st.Pass == "") {
		return
	}
	m := wire{T: "w", A: st.At.UnixMilli(), H: st.Head, U: st.UserID, K: st.Rank, S: st.State}
	switch st.State {
	case StateAdmitted:
		m.X = st.PassExpiresAt.UnixMilli()
	case StateHeld:
		m.X = st.HeldUntil.UnixMilli()
	}
	m.setLine(l)
	if !r.watched.fresh(m, time.Now()) {
		return
	}
	r.publish(ctx, &m)
}

// watchMemo is what this instance published lately of shoppers' places, so
// that a place read again unchanged is not published again within every: a
// read costs a script, but its publish reaches every gateway of the fleet,
// and a page (or a script) reading in a loop would make one per read. Two
// generations, swapped every interval, bound it to the places published in
// the last two intervals. The price: a socket opened on another instance
// within the interval after its place was published, whose page reads the
// unchanged place, gets its pushes from the next change (or the next read
// after the interval), not at once.
type watchMemo struct {
	every time.Duration

	mu        sync.Mutex
	cur, prev map[watchKey]watchSeen
	swapped   time.Time
}

type watchKey struct{ voucher, user int64 }

// watchSeen is a published watch without its moment (A, H): the place, the
// state, the pass's expiry and the line.
type watchSeen struct {
	m  wire
	at time.Time
}

// fresh reports whether m must be published at now, and remembers it when so.
func (w *watchMemo) fresh(m wire, now time.Time) bool {
	if w.every <= 0 {
		return true
	}
	m.A, m.H = 0, 0
	k := watchKey{m.V, m.U}
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.swapped) >= w.every {
		w.prev, w.cur, w.swapped = w.cur, make(map[watchKey]watchSeen), now
	}
	last, ok := w.cur[k]
	if !ok {
		last, ok = w.prev[k]
	}
	if ok && last.m == m && now.Sub(last.at) < w.every {
		return false
	}
	w.cur[k] = watchSeen{m: m, at: now}
	return true
}

// announceStep tells the feeds that a step moved l's line.
func (r *Room) announceStep(ctx context.Context, l Line, s Step) {
	m := wire{T: "m", A: s.At.UnixMilli(), H: s.Head, F: s.Head - s.Admitted, N: s.Expired, C: s.Closed, O: s.SoldOut}
	if s.Admitted > 0 {
		// queue_admit.lua gives every pass of one step the expiry now + ttl.
		m.X = s.At.UnixMilli() + r.passTTLOf(l).Milliseconds()
	}
	m.setLine(l)
	r.publish(ctx, &m)
}

func (r *Room) publish(ctx context.Context, m *wire) {
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	// Best effort (see announce); the next step's move carries the head again.
	_ = r.rdb.Publish(ctx, Channel, b).Err()
}

// ranks reads the current ranks of users in voucherID's line in one
// pipeline; a user not in it is left out.
func (r *Room) ranks(ctx context.Context, voucherID int64, users []int64) (map[int64]int64, error) {
	key := keysOf(voucherID).line
	cmds := make([]*redis.IntCmd, len(users))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range users {
			cmds[i] = p.ZRank(ctx, key, strconv.FormatInt(u, 10))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("read ranks", err)
	}
	out := make(map[int64]int64, len(users))
	for i, c := range cmds {
		if rank, err := c.Result(); err == nil {
			out[users[i]] = rank
		}
	}
	return out, nil
}

// Deliverer hands frames to the sockets of this instance (*notify.Hub
// implements it).
type Deliverer interface {
	// Connected reports whether the user has a socket here.
	Connected(userID int64) bool
	// Deliver writes frame to the user's sockets here, and reports whether
	// there was one.
	Deliver(userID int64, frame []byte) bool
}

// FeedConfig is what NewFeed builds a Feed from; a zero field means its
// default.
type FeedConfig struct {
	// Room is the rooms' Redis side.
	Room *Room
	// Out hands the frames to this instance's sockets (*notify.Hub).
	Out Deliverer
	// Gap is the least time between two frames to one shopper about one
	// line (default one second).
	Gap time.Duration
	// Flush is how often the feed looks for places to push (default 200 ms).
	Flush time.Duration
	// Registerer receives the feed's collectors (seckill_queue_*); nil
	// registers nothing.
	Registerer prometheus.Registerer
	// Log; nil discards.
	Log *slog.Logger
}

// Feed pushes the place in line of the shoppers connected to this instance
// (see the top of this file). One per gateway. Safe for concurrent use.
type Feed struct {
	room  *Room
	out   Deliverer
	opts  FeedConfig
	log   *slog.Logger
	m     *feedMetrics
	now   func() time.Time
	ran   atomic.Bool
	ready chan struct{}

	mu    sync.Mutex
	lines map[int64]*liveLine
	stats FeedStats
}

// FeedStats count what a feed did since it started.
type FeedStats struct {
	// Moves and Watches are the messages read from Channel.
	Moves, Watches int64
	// Frames are the queue frames handed to sockets.
	Frames int64
	// Reads are the shoppers whose state was read from Redis (expired
	// passes, missed moves); RankReads the pre-queue ranks read at begin_at.
	Reads, RankReads int64
	// Watching is how many shoppers the feed follows now.
	Watching int64
}

type liveLine struct {
	line   Line
	head   int64
	at     int64 // Redis ms of the latest message
	closed bool
	// soldOut is the room's sold-out mark as the newest message that
	// told it (at soldAt, Redis ms) had it: its waiters read sold_out.
	soldOut bool
	soldAt  int64
	dirty   bool
	// moved is the Redis ms of the latest move: a frame tells the place as
	// of it, so the place updates' push delay is counted from it (not from
	// an older move the frame also covers: with steps every fraction of a
	// second and each socket's frames a second apart, some socket is
	// always behind, and the oldest unsent move would only grow).
	moved   int64
	watches map[int64]*watch // by user
	byRank  map[int64]*watch
	// held are the watches whose turn is held: a step may give them a
	// fresh pass or send them back in line, which no move tells by rank,
	// so each move has them read again.
	held map[int64]*watch
}

type watch struct {
	user, rank int64
	// final is true once the rank was read at or after begin_at: a
	// pre-queue rank read before may still move.
	final bool
	// state is StateWaiting for a place waiting, sold out or not: the
	// line's soldOut tells which.
	state State
	exp   int64 // the pass's expiry (ms), while admitted
	// admittedAt is the Redis ms of the step that admitted, for the delay.
	admittedAt int64
	used       bool
	sent       view
	sentAt     time.Time
	// recheck is set on a held watch by a move: read it again.
	recheck bool
}

// view is what a frame tells; a frame goes out only when it changes.
type view struct {
	state    State
	position int64
	exp      int64
	used     bool
}

// NewFeed returns the feed of this instance's sockets. It starts nothing:
// Run does.
func NewFeed(cfg FeedConfig) (*Feed, error) {
	if cfg.Gap <= 0 {
		cfg.Gap = time.Second
	}
	if cfg.Flush <= 0 {
		cfg.Flush = 200 * time.Millisecond
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newFeedMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Feed{room: cfg.Room, out: cfg.Out, opts: cfg, log: log.With("component", "waitroom"), m: m,
		now: time.Now, lines: map[int64]*liveLine{}, ready: make(chan struct{})}, nil
}

// Stats returns the feed's counts.
func (f *Feed) Stats() FeedStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stats
	for _, l := range f.lines {
		st.Watching += int64(len(l.watches))
	}
	return st
}

// Ready is closed once Redis has confirmed Run's subscription to Channel:
// the feed hears every message published from then on.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Run subscribes to Channel, closes Ready, and pushes places until ctx ends;
// then it returns nil. An error means Redis did not confirm the
// subscription. go-redis subscribes again by itself after a lost
// connection; moves published meanwhile are lost, and the next one carries
// the head. Call it once.
func (f *Feed) Run(ctx context.Context) error {
	if f.ran.Swap(true) {
		return errors.New("waitroom: the feed's Run was called twice")
	}
	ps := f.room.rdb.Subscribe(ctx, Channel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		return unavailable("subscribe "+Channel, err)
	}
	close(f.ready)
	ch := ps.Channel(redis.WithChannelSize(1024))
	t := time.NewTicker(f.opts.Flush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case msg, ok := <-ch:
			if !ok {
				return nil
			}
			f.Apply(msg.Payload)
		case <-t.C:
			f.Flush(ctx)
		}
	}
}

// Apply takes one message of Channel.
func (f *Feed) Apply(payload string) {
	var m wire
	if err := json.Unmarshal([]byte(payload), &m); err != nil || m.V <= 0 || m.R <= 0 {
		f.log.Debug("waitroom: ignoring a bad message", "payload", payload)
		return
	}
	switch m.T {
	case "m":
		f.move(&m)
	case "w":
		f.watch(&m)
	}
}

func (f *Feed) lineOf(m *wire) *liveLine {
	l := f.lines[m.V]
	if l == nil {
		l = &liveLine{line: m.line(), watches: map[int64]*watch{}, byRank: map[int64]*watch{}, held: map[int64]*watch{}}
		f.lines[m.V] = l
	}
	if m.A > l.at {
		l.at = m.A
		// The newest message's line: the rate in force (an operator's
		// change, an adaptive room's) and the end as they are now, so the
		// estimated waits pushed use them.
		l.line = m.line()
	}
	if m.H > l.head {
		l.head = m.H
	}
	return l
}

func (f *Feed) move(m *wire) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Moves++
	f.m.moves.Inc()
	l := f.lines[m.V]
	if l == nil {
		return // nobody here waits in this line
	}
	f.lineOf(m)
	if m.C {
		l.closed = true
	}
	l.toldSoldOut(m.A, m.O)
	if m.X > 0 {
		admit := func(w *watch) {
			if w.state == StateWaiting && w.final && w.rank >= m.F && w.rank < m.H {
				w.state, w.exp, w.admittedAt = StateAdmitted, m.X, m.A
			}
		}
		if int64(len(l.byRank)) < m.H-m.F {
			for _, w := range l.byRank {
				admit(w)
			}
		} else {
			for r := m.F; r < m.H; r++ {
				if w := l.byRank[r]; w != nil {
					admit(w)
				}
			}
		}
	}
	for _, w := range l.held {
		w.recheck = true
	}
	if m.A > l.moved {
		l.moved = m.A
	}
	l.dirty = true
}

func (f *Feed) watch(m *wire) {
	if !f.out.Connected(m.U) {
		return // the shopper's socket is elsewhere (or closed)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Watches++
	l := f.lineOf(m)
	w := l.watches[m.U]
	if w == nil {
		w = &watch{user: m.U}
		l.watches[m.U] = w
	} else if l.byRank[w.rank] == w {
		delete(l.byRank, w.rank)
	}
	w.rank, w.state, w.exp, w.used = m.K, m.S, m.X, false
	l.setHeld(w)
	if m.S.Waits() {
		w.state = StateWaiting
		l.toldSoldOut(m.A, m.S == StateSoldOut)
	}
	w.final = m.A >= m.B
	if w.final {
		l.byRank[w.rank] = w
	}
	// The shopper was just answered this: no frame until it changes, and
	// not sooner than Gap after the last frame.
	w.sent = view{state: m.S, position: m.K - m.H + 1, exp: m.X}
	if !m.S.Waits() {
		w.sent.position = 0
	}
	f.m.watching.Set(float64(f.watchingLocked()))
	l.dirty = true
}

// setHeld keeps w in l.held while its turn is held.
func (l *liveLine) setHeld(w *watch) {
	w.recheck = false
	if w.state == StateHeld {
		l.held[w.user] = w
		return
	}
	delete(l.held, w.user)
}

// toldSoldOut takes the room's sold-out mark from a message of Redis time
// at, unless a newer message told it already.
func (l *liveLine) toldSoldOut(at int64, soldOut bool) {
	if at >= l.soldAt {
		l.soldOut, l.soldAt = soldOut, at
	}
}

func (f *Feed) watchingLocked() int {
	n := 0
	for _, l := range f.lines {
		n += len(l.watches)
	}
	return n
}

// current is w's view now, or ok false when it cannot be told without
// reading Redis.
func (l *liveLine) current(w *watch, nowMs int64) (v view, ok bool) {
	switch {
	case w.used:
		return view{state: StateAdmitted, used: true}, true
	case w.state == StateAdmitted:
		if w.exp <= nowMs {
			return view{}, false // used in time, or expired?
		}
		return view{state: StateAdmitted, exp: w.exp}, true
	case w.state == StateHeld:
		if w.recheck || w.exp <= nowMs {
			return view{}, false // a fresh pass, or back in line?
		}
		return view{state: StateHeld, exp: w.exp}, true
	case w.state == StateWaiting:
		if w.rank < l.head {
			return view{}, false // admitted by a move this feed missed
		}
		if l.closed {
			return view{state: StateClosed}, true
		}
		if l.soldOut {
			return view{state: StateSoldOut, position: w.rank - l.head + 1}, true
		}
		return view{state: StateWaiting, position: w.rank - l.head + 1}, true
	}
	return view{state: w.state}, true
}

// terminal views end the watch once sent: nothing about them changes again.
func (v view) terminal() bool {
	return v.state == StateClosed || v.state == StateExpired || v.used
}

func (f *Feed) status(l *liveLine, w *watch, v view, now time.Time) Status {
	st := Status{VoucherID: l.line.VoucherID, UserID: w.user, State: v.state, Used: v.used, Rank: w.rank, Head: l.head, Draw: l.line.Draw}
	switch {
	case v.state == StateWaiting:
		st.Position, st.Ahead = v.position, v.position-1
		st.ETA = ETA(l.line, v.position, now)
	case v.state == StateSoldOut:
		st.Position, st.Ahead = v.position, v.position-1
	case v.state == StateHeld:
		st.HeldUntil = time.UnixMilli(v.exp)
	case v.state == StateAdmitted && !v.used:
		st.PassExpiresAt = time.UnixMilli(v.exp)
		st.Pass = f.room.sig.sign(Pass{VoucherID: l.line.VoucherID, UserID: w.user, ExpiresAt: st.PassExpiresAt})
	}
	return st
}

// Flush pushes every changed place whose last frame is at least Gap old,
// and reads from Redis what the messages cannot tell.
func (f *Feed) Flush(ctx context.Context) {
	type pending struct {
		line  Line
		users []int64
	}
	var reads, ranks []pending
	now := f.now()
	nowMs := now.UnixMilli()
	f.mu.Lock()
	for id, l := range f.lines {
		if !l.dirty {
			continue
		}
		l.dirty = false
		began := l.at >= l.line.BeginAt.UnixMilli()
		var rd, rk pending
		for uid, w := range l.watches {
			if !w.final {
				if began {
					rk.users = append(rk.users, uid)
					l.dirty = true
				}
				continue
			}
			v, ok := l.current(w, nowMs)
			if !ok {
				rd.users = append(rd.users, uid)
				l.dirty = true
				continue
			}
			if v == w.sent {
				continue
			}
			if now.Sub(w.sentAt) < f.opts.Gap {
				l.dirty = true
				continue
			}
			fr, err := QueueFrame(f.status(l, w, v, now))
			if err != nil {
				continue
			}
			if !f.out.Deliver(uid, fr) {
				l.drop(w)
				continue
			}
			f.stats.Frames++
			f.m.frames.Inc()
			switch {
			case v.state == StateAdmitted && w.admittedAt > 0:
				f.m.delay.WithLabelValues("admitted").Observe(float64(nowMs-w.admittedAt) / 1000)
				w.admittedAt = 0
			case v.state.Waits() && l.moved > 0:
				f.m.delay.WithLabelValues("place").Observe(float64(nowMs-l.moved) / 1000)
			}
			w.sent, w.sentAt = v, now
			if v.terminal() {
				l.drop(w)
			}
		}
		if len(l.watches) == 0 {
			delete(f.lines, id)
		}
		if rd.users != nil {
			rd.line = l.line
			reads = append(reads, rd)
		}
		if rk.users != nil {
			rk.line = l.line
			ranks = append(ranks, rk)
		}
	}
	f.m.watching.Set(float64(f.watchingLocked()))
	f.mu.Unlock()

	for _, p := range ranks {
		f.readRanks(ctx, p.line, p.users)
	}
	for _, p := range reads {
		f.readStates(ctx, p.line, p.users)
	}
}

func (l *liveLine) drop(w *watch) {
	delete(l.watches, w.user)
	delete(l.held, w.user)
	if l.byRank[w.rank] == w {
		delete(l.byRank, w.rank)
	}
}

// readRanks reads the final ranks of pre-queue shoppers once admission
// began, in pipelines of a thousand.
func (f *Feed) readRanks(ctx context.Context, l Line, users []int64) {
	for len(users) > 0 {
		n := min(len(users), 1000)
		got, err := f.room.ranks(ctx, l.VoucherID, users[:n])
		if err != nil {
			f.log.Warn("waitroom: cannot read ranks", "voucher_id", l.VoucherID, "err", err)
			return // the line stays dirty: tried again at the next flush
		}
		f.mu.Lock()
		f.stats.RankReads += int64(n)
		if ll := f.lines[l.VoucherID]; ll != nil {
			for _, u := range users[:n] {
				w := ll.watches[u]
				if w == nil {
					continue
				}
				rank, ok := got[u]
				if !ok {
					ll.drop(w)
					continue
				}
				w.rank, w.final = rank, true
				ll.byRank[rank] = w
			}
			ll.dirty = true
		}
		f.mu.Unlock()
		users = users[n:]
	}
}

// readStates reads the state of shoppers the messages cannot tell: a pass
// past its expiry (used or expired?) or a move this feed missed. Few: at
// most the rate times the pass's lifetime, of this instance's sockets.
func (f *Feed) readStates(ctx context.Context, l Line, users []int64) {
	for _, u := range users {
		// A peek: the feed's look at a held place is not the shopper
		// coming back (queue_join.lua).
		st, err := f.room.run(ctx, "peek", l, u)
		if err != nil && !errors.Is(err, apperr.ErrNotFound) {
			if errors.Is(err, context.Canceled) {
				return
			}
			f.log.Warn("waitroom: cannot read a place", "voucher_id", l.VoucherID, "user_id", u, "err", err)
			return
		}
		f.mu.Lock()
		f.stats.Reads++
		if ll := f.lines[l.VoucherID]; ll != nil {
			if w := ll.watches[u]; w != nil {
				switch {
				case err != nil:
					ll.drop(w)
				default:
					if ll.byRank[w.rank] == w {
						delete(ll.byRank, w.rank)
					}
					w.rank, w.state, w.used, w.final = st.Rank, st.State, st.Used, true
					if st.State.Waits() {
						w.state = StateWaiting
						ll.toldSoldOut(st.At.UnixMilli(), st.State == StateSoldOut)
					}
					w.exp = st.PassExpiresAt.UnixMilli()
					if st.State == StateHeld {
						w.exp = st.HeldUntil.UnixMilli()
					}
					ll.setHeld(w)
					if st.State == StateAdmitted && w.admittedAt == 0 && !st.Used {
						w.admittedAt = st.At.UnixMilli()
					}
					ll.byRank[w.rank] = w
					if st.Head > ll.head {
						ll.head = st.Head
					}
				}
				ll.dirty = true
			}
		}
		f.mu.Unlock()
	}
}

type feedMetrics struct {
	moves    prometheus.Counter
	frames   prometheus.Counter
	watching prometheus.Gauge
	delay    *prometheus.HistogramVec
}

func newFeedMetrics(reg prometheus.Registerer) (*feedMetrics, error) {
	m := &feedMetrics{
		moves: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_queue_moves_total",
			Help: "Line moves read from the Redis channel: one per admission step that moved a line, whatever the line's length.",
		}),
		frames: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_queue_frames_total",
			Help: "Queue frames handed to this instance's sockets (at most one a second per shopper and line).",
		}),
		watching: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_queue_watching",
			Help: "Shoppers in a line whose socket is on this instance.",
		}),
		delay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_queue_push_delay_seconds",
			Help:    "Age of what a queue frame tells when it is handed to the socket, from the admission step (Redis time): admitted (the step that admitted the shopper, to the frame with the pass), place (the latest step of the line, whose place the frame tells; frames are at most one a second per shopper, but each tells the latest place).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 1.5, 2, 3, 5},
		}, []string{"kind"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.moves, m.frames, m.watching, m.delay} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("waitroom: metrics: %w", err)
			}
		}
	}
	return m, nil
}
