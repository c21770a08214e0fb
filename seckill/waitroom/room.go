// Package waitroom is the waiting room in front of a flash sale: one fair
// line per voucher in Redis, admission at a fleet-wide rate, and the signed,
// single-use passes that let the admitted buy.
//
// The data model (hash tag {v42}, the voucher's, so each script runs in one
// Redis Cluster slot; the layout is this package's alone):
//
//	waitroom:{v42}:line     zset  userID -> place
//	                              "r:<userID>" -> 2^52 + arrival (a held place back in line, once)
//	waitroom:{v42}:room     hash  head, t, at (last step), seq, closed, soldout, expired, used, landed, gone,
//	                              held (passes missed and held), spare (units the last step left)
//	waitroom:{v42}:passes   zset  userID -> pass expiry ms (admitted, pass unused and unexpired)
//	                              "h:<userID>" -> 2^44 + end of the hold ms (a missed turn held)
//	                              "b:<userID>" -> 2^45 + end of the hold ms (held, came back, awaits a unit)
//	waitroom:{v42}:outcome  hash  userID -> "u" or "u:<Idempotency-Key>" pass used | "x" pass expired
//	                              | "h" held | "g" a fresh pass after a hold | "r" back in line once
//	waitroom:{v42}:claims   zset  "c:<userID>" -> 2^52 + deadline ms (a pass claimed, its buy not over)
//	                              "<n>:<ms>" -> n (the n-th claim settled, kept a few seconds)
//
// A place is a score. A shopper joining in the pre-queue (the
// PrequeueSeconds before BeginAt) scores a random number below 2^52 drawn
// with HMAC from the voucher and user (fixed for the pair, unknown without
// the key), so at BeginAt the pre-queue stands in random order whatever the
// order of arrival. From BeginAt a joiner scores 2^52 plus an arrival
// sequence: behind everyone before, first come first served. ZADD, ZRANK and
// ZRANGE by rank are O(log n), so a join, a place and an admission step cost
// O(log n) whatever the size of the line.
//
// The room admits the line's first head members. Because places never move
// once admission began, a shopper's position is rank - head + 1: admitting
// writes only the new passes, never anything per waiter, and every instance
// can tell each of its own shoppers their place from the one number head.
// The admission clock t (see queue_admit.lua) lets any number of instances
// run the admission step at any time while the fleet together admits
// AdmitPerSecond a second.
//
// A room never lets out more passes than units can still be bought: each
// step bounds the unused passes plus the claimed passes whose reservation
// may not be in the stock yet by the stock left, read just before the step
// (from other slots too, for a voucher of several buckets, so not in the
// step's script). A claimed pass stays in claims, in flight, until its buy
// is over (Spend, or Restore which puts it back among the unused), and a
// settled claim is numbered (room.landed) and kept a few seconds more: a
// step is given the landed count some earlier step saw before the stock was
// read, and counts the claims settled after it too, whose reservations that
// stock figure may not show.
package waitroom

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Line is the waiting room of one voucher as its record sets it.
type Line struct {
	VoucherID int64
	BeginAt   time.Time
	EndAt     time.Time
	// AdmitPerSecond is how many shoppers the fleet admits a second.
	AdmitPerSecond int64
	// PrequeueSeconds is how long before BeginAt the line opens; who
	// joins in that time gets a random place at BeginAt.
	PrequeueSeconds int64
	// Draw is true for a sale by draw: the line is seated once, at
	// BeginAt, in the draw's order (Room.Seat, seckill/draw).
	Draw bool
	// PassTTL, when set, is how long this line's passes live instead of
	// the room's Config.PassTTL (a draw winner's draw_pass_seconds).
	PassTTL time.Duration
	// UnitsPerPass is how many units one pass may buy (a draw winner may
	// take up to per_user_limit): the passes out are bounded by the stock
	// left over it. 0 counts as 1.
	UnitsPerPass int64
	// Grace is how long a turn missed (a pass, a draw win, a returned
	// unit, unused until it expired) is held for its shopper; 0 expires it
	// at once. See the README's "A missed turn is held".
	Grace time.Duration
}

// LineOf is v's line, or ok false when v has no waiting room.
func LineOf(v seckill.Voucher) (l Line, ok bool) {
	if v.WaitingRoom == nil {
		return Line{}, false
	}
	l = Line{VoucherID: v.ID, BeginAt: v.BeginAt, EndAt: v.EndAt,
		AdmitPerSecond: v.WaitingRoom.AdmitPerSecond, PrequeueSeconds: v.WaitingRoom.PrequeueSeconds,
		Grace: time.Duration(v.GraceSeconds) * time.Second}
	if v.WaitingRoom.IsDraw() {
		l.Draw, l.PassTTL, l.UnitsPerPass = true, v.WaitingRoom.DrawPass(), max(v.PerUserLimit, 1)
	}
	return l, true
}

// passTTLOf is how long l's passes live.
func (r *Room) passTTLOf(l Line) time.Duration {
	if l.PassTTL > 0 {
		return l.PassTTL
	}
	return r.passTTL
}

// Opens is when the line opens: PrequeueSeconds before BeginAt.
func (l Line) Opens() time.Time {
	return l.BeginAt.Add(-time.Duration(l.PrequeueSeconds) * time.Second)
}

// State is where a shopper stands in a line (gateway/openapi.yaml, Queue.state).
type State string

// The states of a place in line.
const (
	StateWaiting  State = "waiting"
	StateAdmitted State = "admitted"
	StateExpired  State = "expired"
	// StateSoldOut is waiting while every unit is held or sold: the place
	// is kept, because units may still come back (a hold timing out, a
	// cancel, a failed order, stock added), and they go to the line in
	// order.
	StateSoldOut State = "sold_out"
	// StateClosed is the sale over: its end passed, or every unit was paid
	// for.
	StateClosed State = "closed"
	// StateHeld is a turn missed and held for the line's Grace (until
	// HeldUntil): reading the place again within it gives a fresh pass
	// when a unit is free, and after it the place goes to the back of the
	// line once.
	StateHeld State = "held"
)

// Waits reports whether s is a place still waiting for admission (waiting,
// or waiting while sold out).
func (s State) Waits() bool { return s == StateWaiting || s == StateSoldOut }

// Status is one shopper's place in one line.
type Status struct {
	VoucherID int64
	UserID    int64
	State     State
	// Position counts from 1 while waiting (or sold out); 0 otherwise.
	Position int64
	// Ahead is how many wait in front (Position - 1), 0 otherwise.
	Ahead int64
	// ETA is the estimated wait until admission: the time to BeginAt,
	// plus Position at the admission rate.
	ETA time.Duration
	// Pass is the admission pass while admitted and not yet used.
	Pass          string
	PassExpiresAt time.Time
	// Used is true once the pass was used to buy.
	Used bool
	// HeldUntil is the end of the hold while StateHeld.
	HeldUntil time.Time
	// Rank is the place's 0-based rank in the line; fixed once admission
	// began, so position = Rank - head + 1 for any later head.
	Rank int64
	// Head is how many the room had admitted when this was read.
	Head int64
	// At is Redis's time of the read.
	At time.Time
	// Draw is true in a draw's line: the API names the states as a draw
	// does (DrawState).
	Draw bool
}

// Room is the fleet's waiting rooms, one line per voucher, in Redis. It is
// safe for concurrent use; every instance makes its own over the shared Redis.
type Room struct {
	rdb               redis.UniversalClient
	sig               signer
	join, admit, pass *redis.Script
	passTTL, grace    time.Duration
	claimTTL          time.Duration
	maxStep           int64
	now               func() time.Time
	watched           watchMemo
	// onSale names the voucher's stock meta key, with Config.Recovery.
	onSale func(voucherID int64) string
}

// Defaults of Config.
const (
	DefaultPassTTL = 2 * time.Minute
	// DefaultClaimTTL is how long a claimed pass may wait for its Spend or
	// Restore before an admission step settles it: far longer than any buy
	// takes (the breaker's call timeout bounds the reservation), so it only
	// frees the unit a claim holds back when the gateway making the buy
	// died mid-way.
	DefaultClaimTTL = time.Minute
	// DefaultMaxStep bounds how many one admission step admits (the rest
	// goes in the next step), so a step never blocks Redis for long.
	DefaultMaxStep = 1000
	// DefaultWatchEvery is how long an unchanged place, once published, is
	// not published again by the same instance: the feed's own pace (at
	// most a frame a second).
	DefaultWatchEvery = time.Second
)

// Config is what New builds the rooms from; a zero field means its default.
type Config struct {
	// Redis holds the lines.
	Redis redis.UniversalClient
	// Secret keys the HMAC of passes and of the pre-queue's random places:
	// every instance needs the same one.
	Secret []byte
	// PassTTL is how long a pass is valid after admission
	// (DefaultPassTTL).
	PassTTL time.Duration
	// ClaimTTL is how long a claimed pass holds a unit back from the
	// room's admissions without its Spend or Restore (DefaultClaimTTL).
	ClaimTTL time.Duration
	// WatchEvery is how long this instance keeps from publishing again a
	// place it published unchanged (DefaultWatchEvery; negative: every
	// read is published).
	WatchEvery time.Duration
	// Grace is how long after the sale's end the room's keys live
	// (seckill.DefaultStateGrace).
	Grace time.Duration
	// Recovery, when set, makes the room survive a Redis data loss: its
	// scripts keep a journal for a Mirror and answer lost while
	// Recovery(voucherID), the key of the voucher's stock meta in the
	// room's hash slot, is missing (see recovery.go).
	Recovery func(voucherID int64) string
}

// New returns the rooms of cfg.
func New(cfg Config) *Room {
	positive := func(d, def time.Duration) time.Duration {
		if d <= 0 {
			return def
		}
		return d
	}
	watch := cfg.WatchEvery
	switch {
	case watch == 0:
		watch = DefaultWatchEvery
	case watch < 0:
		watch = 0 // no memo: every read is published
	}
	return &Room{
		rdb: cfg.Redis, sig: signer{key: append([]byte(nil), cfg.Secret...)},
		join: redis.NewScript(lua.QueueJoin), admit: redis.NewScript(lua.QueueAdmit),
		pass:    redis.NewScript(lua.QueuePass),
		passTTL: positive(cfg.PassTTL, DefaultPassTTL), grace: positive(cfg.Grace, seckill.DefaultStateGrace),
		claimTTL: positive(cfg.ClaimTTL, DefaultClaimTTL),
		maxStep:  DefaultMaxStep, now: time.Now,
		watched: watchMemo{every: watch},
		onSale:  cfg.Recovery,
	}
}

func (r *Room) expireAt(l Line) string {
	return strconv.FormatInt(l.EndAt.Add(r.grace).UnixMilli(), 10)
}

// Codes of queue_join.lua.
const (
	codeNotIn = iota
	codeWaiting
	codeAdmitted
	codeExpired
	codeClosed
	codeNotOpen
	codeUsed
	codeLost
	codeSoldOut
	codeHeld
)

// Join puts userID in l's line, or leaves the place they have. A line not
// yet open is seckill.ErrNotStarted; a closed one answers StateClosed. The
// place is announced to the fleet's feeds (see Feed), so the gateway holding
// the shopper's socket pushes its changes from then on.
func (r *Room) Join(ctx context.Context, l Line, userID int64) (Status, error) {
	return r.JoinIn(ctx, l, userID, LaneNone)
}

// Lane is a joiner's lane in a line whose entries name one (an entry
// token's, seckill/eligibility).
type Lane int

// The lanes. A line whose entries name no lane keeps one random pre-queue
// (LaneNone). Where they do, every LanePriority place in the pre-queue is
// ahead of every LaneStandard one, each lane in random order; from
// begin_at places never move, so a joiner of either lane goes to the back.
const (
	LaneNone Lane = iota
	LaneStandard
	LanePriority
)

// prequeueHalf splits the pre-queue's places (below 2^52) into the
// priority lane's half and the standard lane's.
const prequeueHalf = uint64(1) << 51

// placeIn is a pre-queue place in lane, from the random place below 2^52.
func placeIn(lane Lane, random uint64) uint64 {
	switch lane {
	case LanePriority:
		return random >> 1
	case LaneStandard:
		return prequeueHalf + random>>1
	}
	return random
}

// JoinIn is Join in lane: a place in the pre-queue is drawn within the
// lane's half of it (see Lane). Joining again keeps the place, whatever
// the lane.
func (r *Room) JoinIn(ctx context.Context, l Line, userID int64, lane Lane) (Status, error) {
	st, err := r.runIn(ctx, "join", l, userID, lane)
	if err == nil {
		r.announce(ctx, l, st)
	}
	return st, err
}

// Status is userID's place in l's line; apperr.ErrNotFound when they
// never joined. It is announced as Join's is: a page opened again (a new
// socket, maybe on another instance) reads its place, and gets pushes again.
func (r *Room) Status(ctx context.Context, l Line, userID int64) (Status, error) {
	st, err := r.run(ctx, "read", l, userID)
	if err == nil {
		r.announce(ctx, l, st)
	}
	return st, err
}

func (r *Room) run(ctx context.Context, mode string, l Line, userID int64) (Status, error) {
	return r.runIn(ctx, mode, l, userID, LaneNone)
}

func (r *Room) runIn(ctx context.Context, mode string, l Line, userID int64, lane Lane) (Status, error) {
	if l.AdmitPerSecond <= 0 {
		return Status{}, fmt.Errorf("waitroom: voucher %d has no admission rate: %w", l.VoucherID, apperr.ErrInvalidInput)
	}
	res, err := r.join.Run(ctx, r.rdb, r.keys(l.VoucherID), mode, userID,
		placeIn(lane, r.sig.place(l.VoucherID, userID)), l.Opens().UnixMilli(), l.BeginAt.UnixMilli(),
		l.EndAt.UnixMilli(), r.expireAt(l), r.passTTLOf(l).Milliseconds()).Int64Slice()
	if err != nil {
		return Status{}, unavailable("queue "+mode, err)
	}
	if len(res) != 6 {
		return Status{}, fmt.Errorf("waitroom: queue_join.lua answered %v", res)
	}
	if res[5] == 1 {
		// A held shopper came back to a free unit: their turn came again.
		r.announceTurns(ctx, l, TurnHeldPass, time.UnixMilli(res[3]), time.UnixMilli(res[4]), []int64{userID})
	}
	code, rank, head, exp, now := res[0], res[1], res[2], res[3], time.UnixMilli(res[4])
	st := Status{VoucherID: l.VoucherID, UserID: userID, Rank: rank, Head: head, At: now, Draw: l.Draw}
	switch code {
	case codeNotIn:
		return Status{}, apperr.Public(apperr.ErrNotFound, "you are not in this voucher's line; join it first")
	case codeNotOpen:
		return Status{}, apperr.Publicf(seckill.ErrNotStarted,
			"the line opens at %s; join then", l.Opens().UTC().Format(time.RFC3339))
	case codeWaiting:
		st.State = StateWaiting
		st.Position = rank - head + 1
		st.Ahead = rank - head
		st.ETA = ETA(l, st.Position, now)
	case codeSoldOut:
		// No estimate: the wait is for units to come back, which no rate
		// tells.
		st.State = StateSoldOut
		st.Position = rank - head + 1
		st.Ahead = rank - head
	case codeAdmitted:
		st.State = StateAdmitted
		st.PassExpiresAt = time.UnixMilli(exp)
		st.Pass = r.sig.sign(Pass{VoucherID: l.VoucherID, UserID: userID, ExpiresAt: st.PassExpiresAt})
	case codeUsed:
		st.State, st.Used = StateAdmitted, true
	case codeExpired:
		st.State = StateExpired
	case codeHeld:
		st.State, st.HeldUntil = StateHeld, time.UnixMilli(exp)
	case codeClosed:
		st.State = StateClosed
	case codeLost:
		return Status{}, errLost(l.VoucherID)
	default:
		return Status{}, fmt.Errorf("waitroom: queue_join.lua answered code %d", code)
	}
	return st, nil
}

// ETA is the estimated wait of the shopper at position in l at now: until
// BeginAt if the room has not started, then position at the room's rate.
func ETA(l Line, position int64, now time.Time) time.Duration {
	if l.AdmitPerSecond <= 0 || position <= 0 {
		return 0
	}
	d := time.Duration(math.Ceil(float64(position)/float64(l.AdmitPerSecond)*1000)) * time.Millisecond
	if now.Before(l.BeginAt) {
		d += l.BeginAt.Sub(now)
	}
	return d
}

// Step is what one admission step did.
type Step struct {
	// Head is how many were admitted so far: the line's first Head places.
	Head int64
	// At is Redis's time of the step.
	At time.Time
	// Waiting is how many still wait after the step.
	Waiting int64
	// Admitted and Expired are what this step admitted and expired.
	Admitted, Expired int64
	// Closed is true once the room is closed.
	Closed bool
	// SoldOut is true while the room has no stock left to admit to (its
	// waiters read StateSoldOut); SoldOutChanged when this step set or
	// cleared it.
	SoldOut, SoldOutChanged bool
	// Landed is how many claims of the room were settled by the end of
	// the step: the landed argument of the next Admit of a caller that
	// reads the stock left after this step.
	Landed int64
	// Back is how many of Admitted were held shoppers who came back
	// (admitted first, outside the rate); Requeued how many held places
	// went to the back of the line, their hold over.
	Back, Requeued int64
	// Turns are the users this step gave a pass, each announced as a Turn.
	Turns []int64
}

// Admit runs one admission step of l: expire passes unused in time, then
// admit up to the room's rate since the last step, whoever runs it. The
// passes out at once, unused or claimed by a buy whose reservation may not
// be in the stock yet, are held to at most passes (the stock left; -1 for
// no bound), so the room never lets in more buyers than it could serve.
// landed is the Step.Landed of a step of this room that ended before passes
// was read (0: none; a step given a landed count older than the room keeps
// track of admits nobody, and answers the count to give next). A bound of 0
// marks the room sold out (Step.SoldOut) until a later step's bound is
// above 0: units came back, and the line resumes in order.
//
// A room no step reached for over a second (its voucher paused, which the
// admitters skip, or no gateway up) stood still: the step moves every
// unused pass's expiry on by the stop, and until then reads and claims
// count it so too. Nobody admitted loses the turn to a wait in which they
// could not buy; their place reads admitted with a new pass.
func (r *Room) Admit(ctx context.Context, l Line, passes, landed int64) (Step, error) {
	return r.step(ctx, l, passes, landed, false)
}

// Close closes l's room for good (the sale ended, or every unit was paid
// for): no more admissions, everyone still waiting is closed. Passes
// already out stay valid until they expire.
func (r *Room) Close(ctx context.Context, l Line) (Step, error) {
	return r.step(ctx, l, 0, 0, true)
}

func (r *Room) step(ctx context.Context, l Line, passes, landed int64, closing bool) (Step, error) {
	if l.AdmitPerSecond <= 0 {
		return Step{}, fmt.Errorf("waitroom: voucher %d has no admission rate: %w", l.VoucherID, apperr.ErrInvalidInput)
	}
	cl := "0"
	if closing {
		cl = "1"
	}
	if passes > 0 && l.UnitsPerPass > 1 {
		passes = (passes + l.UnitsPerPass - 1) / l.UnitsPerPass
	}
	raw, err := r.admit.Run(ctx, r.rdb, r.keys(l.VoucherID), l.BeginAt.UnixMilli(),
		l.AdmitPerSecond, r.passTTLOf(l).Milliseconds(), passes, r.maxStep, cl, r.expireAt(l), landed,
		l.Grace.Milliseconds()).Slice()
	if err != nil {
		return Step{}, unavailable("admit", err)
	}
	res, turns, err := admitAnswer(raw)
	if err != nil {
		return Step{}, err
	}
	if res[0] < 0 {
		return Step{}, errLost(l.VoucherID)
	}
	s := Step{Head: res[0], At: time.UnixMilli(res[1]), Waiting: res[2], Admitted: res[3],
		Expired: res[4], Closed: res[5] == 1, SoldOut: res[6] == 1, SoldOutChanged: res[7] == 1, Landed: res[8],
		Back: res[10], Requeued: res[11], Turns: turns}
	if len(turns) > 0 {
		// The line's turns: a unit come back when the room was sold out
		// until this step, or in a draw (whose winners were seated).
		kind := TurnPass
		if l.Draw || (s.SoldOutChanged && !s.SoldOut) {
			kind = TurnReturnedUnit
		}
		if s.Back > 0 {
			// One step admits the held who came back first, then the
			// line: tell each its kind.
			r.announceTurns(ctx, l, TurnHeldPass, time.UnixMilli(res[9]), s.At, turns[:s.Back])
			turns = turns[s.Back:]
		}
		if len(turns) > 0 {
			r.announceTurns(ctx, l, kind, time.UnixMilli(res[9]), s.At, turns)
		}
	}
	return s, nil
}

// admitAnswer decodes queue_admit.lua's answer: twelve integers, then the
// user ids (strings) given a pass.
func admitAnswer(raw []any) (nums [12]int64, users []int64, err error) {
	if len(raw) < len(nums) {
		return nums, nil, fmt.Errorf("waitroom: queue_admit.lua answered %v", raw)
	}
	for i := range nums {
		n, ok := raw[i].(int64)
		if !ok {
			return nums, nil, fmt.Errorf("waitroom: queue_admit.lua answered %v", raw)
		}
		nums[i] = n
	}
	for _, u := range raw[len(nums):] {
		s, _ := u.(string)
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nums, nil, fmt.Errorf("waitroom: queue_admit.lua answered the user %v", u)
		}
		users = append(users, id)
	}
	return nums, users, nil
}

// Reopen opens l's room again after stock was added to a sale that had
// closed because every unit was paid for: the waiters left wait again (sold
// out or not, as the next admission step finds the stock), and the units
// added go to them in line order. The caller has checked that the sale has
// not ended (an ended sale is never changed); a room that was not closed is
// left as it is.
func (r *Room) Reopen(ctx context.Context, l Line) error {
	if err := r.rdb.HDel(ctx, keysOf(l.VoucherID).room, "closed").Err(); err != nil {
		return unavailable("reopen", err)
	}
	return nil
}

// Answers of queue_pass.lua's claim.
const (
	claimOK = 1 + iota
	claimUsed
	claimExpired
	claimNotAdmitted
	claimLost
)

// Check judges pass for a buy of voucherID by userID without any I/O: a
// pass that is missing, not signed by this room, someone else's, for another
// voucher or expired is seckill.ErrNotAdmitted. Only Claim can tell a used
// pass; Check lets the gateway refuse what is certainly useless before it
// charges any limit.
func (r *Room) Check(voucherID, userID int64, pass string) (Pass, error) {
	if pass == "" {
		return Pass{}, notAdmitted("this voucher has a waiting room: join its line, and buy with the pass you get when admitted")
	}
	p, ok := r.sig.open(pass)
	if !ok || p.VoucherID != voucherID || p.UserID != userID {
		return Pass{}, notAdmitted("this admission pass is not valid for you and this voucher")
	}
	if !r.now().Before(p.ExpiresAt) {
		return Pass{}, notAdmitted("this admission pass has expired")
	}
	return p, nil
}

// Claim uses pass to buy voucherID as userID, once: it refuses with
// seckill.ErrNotAdmitted what Check refuses, and a pass used before. A
// claim made with a requestKey (the buy's Idempotency-Key) may be made
// again with the same key: the retry of a buy whose answer was lost reaches
// the reservation, which replays the first order. When the buy is over,
// call Spend (it reached the stock, or its answer is final) or Restore (it
// never reached the stock): until then, or Config.ClaimTTL, the claim holds
// a unit back from the room's admissions.
func (r *Room) Claim(ctx context.Context, voucherID, userID int64, pass, requestKey string) (Pass, error) {
	p, err := r.Check(voucherID, userID, pass)
	if err != nil {
		return Pass{}, err
	}
	res, err := r.pass.Run(ctx, r.rdb, r.keys(voucherID), "claim", userID, p.ExpiresAt.UnixMilli(), requestKey,
		r.claimTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return Pass{}, unavailable("claim pass", err)
	}
	if len(res) != 2 {
		return Pass{}, fmt.Errorf("waitroom: queue_pass.lua answered %v", res)
	}
	switch res[0] {
	case claimOK:
		if res[1] > 0 {
			// Restore puts back the expiry as the room keeps it, which a
			// stop of the room moved past the one signed in the pass.
			p.ExpiresAt = time.UnixMilli(res[1])
		}
		return p, nil
	case claimUsed:
		return Pass{}, notAdmitted("this admission pass was used already")
	case claimExpired:
		return Pass{}, notAdmitted("this admission pass has expired")
	case claimLost:
		return Pass{}, errLost(voucherID)
	default:
		return Pass{}, notAdmitted("this admission pass is not valid for you and this voucher")
	}
}

// Restore gives back a claimed pass whose buy never reached the stock (a
// rate limit or an outage further on), so the shopper may try again with
// it until it expires.
func (r *Room) Restore(ctx context.Context, p Pass) error {
	err := r.pass.Run(ctx, r.rdb, r.keys(p.VoucherID), "restore", p.UserID, p.ExpiresAt.UnixMilli(), "", 0).Err()
	if err != nil {
		return unavailable("restore pass", err)
	}
	return nil
}

// Spend settles a claimed pass whose buy is over without giving it back:
// its reservation is in the stock (or it may still land: the outcome is
// unknown), or the answer was final for the shopper. From then on the
// stock left, not the claim, keeps the room's admissions within the units
// that can be bought. Spending twice, or a pass not claimed, does nothing.
func (r *Room) Spend(ctx context.Context, p Pass) error {
	err := r.pass.Run(ctx, r.rdb, r.keys(p.VoucherID), "spend", p.UserID, p.ExpiresAt.UnixMilli(), "", 0).Err()
	if err != nil {
		return unavailable("spend pass", err)
	}
	return nil
}

// Stats are one room's figures (GET /api/v1/admin/vouchers/{id}/stats, queue).
type Stats struct {
	Waiting, Admitted, Expired, PassesUsed int64
}

// Stats reads voucherID's room figures; all zero for a room nobody joined.
func (r *Room) Stats(ctx context.Context, voucherID int64) (Stats, error) {
	k := keysOf(voucherID)
	var card *redis.IntCmd
	var room *redis.SliceCmd
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		card = p.ZCard(ctx, k.line)
		room = p.HMGet(ctx, k.room, "head", "expired", "used", "closed")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Stats{}, unavailable("room stats", err)
	}
	f := room.Val()
	n := func(i int) int64 {
		s, _ := f[i].(string)
		v, _ := strconv.ParseInt(s, 10, 64)
		return v
	}
	st := Stats{Admitted: n(0), Expired: n(1), PassesUsed: n(2)}
	if closed, _ := f[3].(string); closed != "1" {
		st.Waiting = card.Val() - st.Admitted
	}
	return st, nil
}

func notAdmitted(msg string) error { return apperr.Public(seckill.ErrNotAdmitted, msg) }

func unavailable(what string, err error) error {
	return fmt.Errorf("waitroom: %s: %w: %w", what, apperr.ErrUnavailable, err)
}
