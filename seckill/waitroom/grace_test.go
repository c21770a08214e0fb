package waitroom_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// turns collects every Turn published on the rooms' channel while a test
// runs.
type turns struct {
	mu  sync.Mutex
	got []waitroom.Turn
}

func listenTurns(t *testing.T, c *redis.Client) *turns {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ps := c.Subscribe(ctx, waitroom.Channel)
	_, err := ps.Receive(ctx)
	require.NoError(t, err)
	tr := &turns{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for msg := range ps.Channel() {
			if turn, ok := waitroom.ParseTurn(msg.Payload); ok {
				tr.mu.Lock()
				tr.got = append(tr.got, turn)
				tr.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = ps.Close()
		<-done
	})
	return tr
}

// of are the kinds of the turns of voucher v's user u, in order, once at
// least want arrived (pub/sub delivers a moment after the publish).
func (tr *turns) of(t *testing.T, v, u int64, want int) []waitroom.TurnKind {
	t.Helper()
	var kinds []waitroom.TurnKind
	require.Eventually(t, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		kinds = kinds[:0]
		for _, turn := range tr.got {
			if turn.VoucherID == v && turn.UserID == u {
				kinds = append(kinds, turn.Kind)
			}
		}
		return len(kinds) >= want
	}, 5*time.Second, 20*time.Millisecond)
	return kinds
}

// stepper runs a room's admission steps as an Admitter does, carrying the
// landed count from one step to the next.
type stepper struct {
	room   *waitroom.Room
	line   waitroom.Line
	landed int64
}

func (s *stepper) step(t *testing.T, bound int64) waitroom.Step {
	t.Helper()
	st, err := s.room.Admit(context.Background(), s.line, bound, s.landed)
	require.NoError(t, err)
	s.landed = st.Landed
	return st
}

// clearRoom deletes voucher v's room, so a test run again starts afresh.
func clearRoom(t *testing.T, c *redis.Client, v int64) {
	t.Helper()
	p := "waitroom:{v" + strconv.FormatInt(v, 10) + "}:"
	require.NoError(t, c.Del(context.Background(), p+"line", p+"room", p+"passes", p+"outcome", p+"claims").Err())
}

// A missed pass is held for the grace: the shopper who reads the place
// within it gets a fresh pass at once when the last step left a unit
// spare, or is marked back and admitted first by the next step that has
// one; who never comes back goes to the back of the line once when the
// grace ends, and a pass missed after that expires for good. Every turn is
// announced on the channel with its kind.
func TestMissedTurnIsHeldThenBackInLineOnce(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	tr := listenTurns(t, c)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret, WatchEvery: -1})
	now := redisNow(t, c)
	const v = 149001
	clearRoom(t, c, v)
	line := waitroom.Line{VoucherID: v, BeginAt: now.Add(-2 * time.Second), EndAt: now.Add(time.Hour),
		AdmitPerSecond: 1000, PassTTL: 300 * time.Millisecond, Grace: 1500 * time.Millisecond}
	s := &stepper{room: room, line: line}
	for u := int64(1); u <= 5; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, s.step(t, 3).Admitted, "three units: three passes")
	wouldHold := func(u int64) bool {
		t.Helper()
		h, err := room.MissWouldHold(ctx, v, u)
		require.NoError(t, err)
		return h
	}
	require.True(t, wouldHold(1), "a first turn missed is held")

	time.Sleep(350 * time.Millisecond) // the three passes expire unused
	st := s.step(t, 3)
	require.EqualValues(t, 3, st.Expired)
	require.EqualValues(t, 2, st.Admitted, "held places reserve no unit: 4 and 5 take them")
	for u := int64(1); u <= 3; u++ {
		// A read that does not come back in time (user 3's) still says
		// held; it is user 1 and 2's return below that takes the units.
		held, err := c.ZScore(ctx, "waitroom:{v"+strconv.FormatInt(v, 10)+"}:passes", "h:"+strconv.FormatInt(u, 10)).Result()
		require.NoError(t, err, "user %d held", u)
		require.Greater(t, held, float64(1<<44))
	}

	// User 1 comes back: the step left one unit spare (3 units, 2 passes).
	back, err := room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, back.State)
	require.NotEmpty(t, back.Pass)
	_, err = room.Check(v, 1, back.Pass)
	require.NoError(t, err, "the fresh pass is valid")
	require.False(t, wouldHold(1), "a fresh pass after a hold is not held again")

	// User 2 comes back too: no unit spare, so held, and marked back.
	held, err := room.Status(ctx, line, 2)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateHeld, held.State)
	require.True(t, held.HeldUntil.After(redisNow(t, c)))
	q := waitroom.QueueJSON(held)
	require.Equal(t, "held", q.State)
	require.NotNil(t, q.HeldUntil)
	require.Nil(t, q.Pass)

	// Three passes out over three units: the next step admits nobody; one
	// more unit (stock added) goes to user 2 first, outside the rate.
	st = s.step(t, 3)
	require.Zero(t, st.Back)
	st = s.step(t, 4)
	require.EqualValues(t, 1, st.Back)
	again, err := room.Status(ctx, line, 2)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, again.State)

	// User 3 never came back: after the grace the place is at the back of
	// the line (behind everyone; here nobody else waits).
	require.Eventually(t, func() bool {
		s.step(t, 0)
		st, err := room.Status(ctx, line, 3)
		require.NoError(t, err)
		return st.State.Waits()
	}, 5*time.Second, 100*time.Millisecond)
	// User 1 missed the fresh pass too: back in line at once, no second
	// hold.
	one, err := room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.True(t, one.State.Waits(), "user 1 after missing the fresh pass: %s", one.State)

	// Their second turns come (the steps above had no unit: the room was
	// sold out, so these are units come back), and missing them is the end.
	st = s.step(t, 10)
	require.GreaterOrEqual(t, st.Admitted, int64(2))
	for _, u := range []int64{1, 3} {
		st, err := room.Status(ctx, line, u)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateAdmitted, st.State, "user %d's second turn", u)
		require.False(t, wouldHold(u), "user %d's turn after going back in line is not held", u)
	}
	time.Sleep(350 * time.Millisecond)
	s.step(t, 10)
	for _, u := range []int64{1, 3} {
		st, err := room.Status(ctx, line, u)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateExpired, st.State, "user %d missed the place back in line", u)
	}

	require.Equal(t, []waitroom.TurnKind{waitroom.TurnPass, waitroom.TurnHeldPass, waitroom.TurnReturnedUnit}, tr.of(t, v, 1, 3))
	// User 2 missed the fresh pass as well, meanwhile: the same path.
	require.Equal(t, []waitroom.TurnKind{waitroom.TurnPass, waitroom.TurnHeldPass, waitroom.TurnReturnedUnit}, tr.of(t, v, 2, 3))
	require.Equal(t, []waitroom.TurnKind{waitroom.TurnPass, waitroom.TurnReturnedUnit}, tr.of(t, v, 3, 2))
}

// With no grace (grace_seconds 0) a missed pass expires at once, as it
// always did.
func TestNoGraceExpiresAtOnce(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 149002, BeginAt: now.Add(-2 * time.Second), EndAt: now.Add(time.Hour),
		AdmitPerSecond: 1000, PassTTL: 200 * time.Millisecond}
	s := &stepper{room: room, line: line}
	clearRoom(t, c, line.VoucherID)
	_, err := room.Join(ctx, line, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, s.step(t, 1).Admitted)
	time.Sleep(250 * time.Millisecond)
	require.EqualValues(t, 1, s.step(t, 1).Expired)
	st, err := room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateExpired, st.State)
}

// take is the test's stand-in for the reservation: one unit of the
// counter, if one is left (1), else 0.
var take = redis.NewScript(`local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n <= 0 then return 0 end
redis.call('DECR', KEYS[1])
return 1`)

// Many shoppers, most of them missing their pass, against one room stepped
// as the fleet steps it: a third buy at their first pass, a third let it
// expire and come back (their reads of the place are the return), a third
// are away for good. The units are never oversold, no shopper with a pass
// finds no unit, nobody gets more than two turns of the line (the first and
// the one back in line) or more than one fresh pass after a hold, the away
// never get a fresh pass, and each of their missed places comes back to the
// line once.
func TestManyShoppersMostMissingTheirPass(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := client(t)
	tr := listenTurns(t, c)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret, WatchEvery: -1})
	const v, units, shoppers = 149010, 50, 120
	clearRoom(t, c, v)
	stockKey := "test:{v149010}:units"
	require.NoError(t, c.Set(ctx, stockKey, units, time.Hour).Err())
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: v, BeginAt: now.Add(-2 * time.Second), EndAt: now.Add(time.Hour),
		AdmitPerSecond: 400, PassTTL: 150 * time.Millisecond, Grace: 300 * time.Millisecond}
	for u := int64(1); u <= shoppers; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}

	var stepErr error
	stepping := make(chan struct{})
	go func() { // the admitters of the fleet
		defer close(stepping)
		landed := int64(0)
		for ctx.Err() == nil {
			left, err := c.Get(ctx, stockKey).Int64()
			if err == nil {
				var st waitroom.Step
				st, err = room.Admit(ctx, line, left, landed)
				landed = st.Landed
			}
			if err != nil && ctx.Err() == nil {
				stepErr = err
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	var mu sync.Mutex
	var bought, noUnit int
	var wg sync.WaitGroup
	for u := int64(1); u <= shoppers; u++ {
		if u%3 == 2 {
			continue // away: never reads the place again
		}
		wg.Add(1)
		go func(u int64) {
			defer wg.Done()
			skip := u%3 == 1 // lets the first pass expire, then comes back
			for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(15 * time.Millisecond) {
				st, err := room.Status(ctx, line, u)
				if err != nil || st.State == waitroom.StateExpired || st.State == waitroom.StateClosed || st.Used {
					return
				}
				if st.State != waitroom.StateAdmitted {
					continue
				}
				if skip {
					if st.PassExpiresAt.Before(time.Now()) {
						skip = false
					}
					continue
				}
				p, err := room.Claim(ctx, v, u, st.Pass, "")
				if err != nil {
					continue
				}
				got, err := take.Run(ctx, c, []string{stockKey}).Int()
				if err != nil {
					return
				}
				_ = room.Spend(ctx, p)
				mu.Lock()
				if got == 1 {
					bought++
				} else {
					noUnit++
				}
				mu.Unlock()
				return
			}
		}(u)
	}
	wg.Wait()
	time.Sleep(line.PassTTL + line.Grace + 200*time.Millisecond) // every hold of the away ends
	cancel()
	<-stepping
	require.NoError(t, stepErr)

	left, err := c.Get(context.Background(), stockKey).Int()
	require.NoError(t, err)
	t.Logf("%d shoppers, %d units: %d bought, %d left, %d with a pass found no unit", shoppers, units, bought, left, noUnit)
	require.Equal(t, units, bought+left, "never oversold")
	require.Zero(t, noUnit, "every pass had its unit")
	require.Greater(t, bought, units/2)

	p := "waitroom:{v" + strconv.FormatInt(v, 10) + "}:"
	tr.mu.Lock()
	defer tr.mu.Unlock()
	lineTurns, fresh := map[int64]int{}, map[int64]int{}
	for _, turn := range tr.got {
		if turn.VoucherID != v {
			continue
		}
		if turn.Kind == waitroom.TurnHeldPass {
			fresh[turn.UserID]++
		} else {
			lineTurns[turn.UserID]++
		}
	}
	requeued := 0
	for u := int64(1); u <= shoppers; u++ {
		require.LessOrEqual(t, lineTurns[u], 2, "user %d: at most the first turn and one back in line", u)
		require.LessOrEqual(t, fresh[u], 1, "user %d: one hold", u)
		if u%3 != 2 || lineTurns[u] == 0 {
			continue
		}
		require.Zero(t, fresh[u], "away user %d never came back", u)
		// The away user's place came back to the line once: it waits
		// there, or its second turn was missed too and it expired.
		_, inLine := c.ZScore(context.Background(), p+"line", "r:"+strconv.FormatInt(u, 10)).Result()
		o, _ := c.HGet(context.Background(), p+"outcome", strconv.FormatInt(u, 10)).Result()
		require.True(t, inLine == nil, "away user %d's place is back in line (outcome %q)", u, o)
		require.Contains(t, []string{"r", "x"}, o, "away user %d", u)
		requeued++
	}
	require.Positive(t, requeued, "some away shoppers' places came back")
}

// A draw's winners are announced as draw_win turns when the draw is
// seated; a win missed is held like a line's pass (the draw's word for it
// is held too), and the waitlisted next in order take the unit as a
// returned_unit turn.
func TestDrawWinMissedIsHeld(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	tr := listenTurns(t, c)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret, WatchEvery: -1})
	const v = 149020
	clearRoom(t, c, v)
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: v, BeginAt: now.Add(-time.Second), EndAt: now.Add(time.Hour), AdmitPerSecond: 100,
		Draw: true, PassTTL: 200 * time.Millisecond, Grace: time.Minute}
	seated, err := room.Seat(ctx, line, []int64{11, 12, 13}, 2)
	require.NoError(t, err)
	require.True(t, seated.Now)
	require.Equal(t, []waitroom.TurnKind{waitroom.TurnDrawWin}, tr.of(t, v, 11, 1))
	require.Equal(t, []waitroom.TurnKind{waitroom.TurnDrawWin}, tr.of(t, v, 12, 1))

	time.Sleep(250 * time.Millisecond)
	s := &stepper{room: room, line: line}
	st := s.step(t, 2)
	require.EqualValues(t, 2, st.Expired)
	require.EqualValues(t, 1, st.Admitted, "the waitlisted next takes a unit back")
	require.Equal(t, []waitroom.TurnKind{waitroom.TurnReturnedUnit}, tr.of(t, v, 13, 1))

	back, err := room.Status(ctx, line, 12)
	require.NoError(t, err)
	// A unit was spare after the step (two units, one pass out): back
	// within the grace, the winner gets a fresh pass.
	require.Equal(t, waitroom.StateAdmitted, back.State)
	require.Equal(t, "won", waitroom.QueueJSON(back).State)
	held, err := room.Status(ctx, line, 11)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateHeld, held.State, "no unit spare any more")
	q := waitroom.QueueJSON(held)
	require.Equal(t, "held", q.State)
	require.NotNil(t, q.HeldUntil)
}

// The feed pushes a held turn to the shopper's socket (held, with
// held_until, no pass) without taking it as a return, then the fresh pass
// once the shopper's own read brought them back and the next step found a
// unit for them.
func TestFeedPushesTheHeldTurn(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret, WatchEvery: -1})
	const v = 149030
	clearRoom(t, c, v)
	now := redisNow(t, c)
	// Passes outlive the feed's second between two frames, so the fresh
	// one is pushed before it expires.
	line := waitroom.Line{VoucherID: v, BeginAt: now.Add(-time.Second), EndAt: now.Add(time.Hour), AdmitPerSecond: 100,
		PassTTL: 1500 * time.Millisecond, Grace: time.Minute}
	var mu sync.Mutex
	units := int64(1)
	out := newSockets(31)
	runFeed(t, room, out, func() waitroom.Target {
		mu.Lock()
		defer mu.Unlock()
		return waitroom.Target{Line: line, Passes: units}
	})
	_, err := room.Join(ctx, line, 31)
	require.NoError(t, err)
	_, err = room.Join(ctx, line, 32) // waits behind, and takes the unit the miss frees
	require.NoError(t, err)

	var held api.Queue
	require.Eventually(t, func() bool {
		for _, g := range out.of(31) {
			if g.q.State == "held" {
				held = g.q
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "frames: %v", out.of(31))
	require.NotNil(t, held.HeldUntil)
	require.Nil(t, held.Pass)
	// Only the feed looked at 31's place; the next in line took the unit.
	require.Eventually(t, func() bool {
		st, err := room.Status(ctx, line, 32)
		require.NoError(t, err)
		return st.State == waitroom.StateAdmitted && st.Pass != ""
	}, 10*time.Second, 20*time.Millisecond)

	back, err := room.Status(ctx, line, 31)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateHeld, back.State, "no unit free: held, marked back")
	mu.Lock()
	units = 2 // a unit comes back
	mu.Unlock()
	require.Eventually(t, func() bool {
		f := out.of(31)
		last := f[len(f)-1].q
		return last.State == "admitted" && last.Pass != nil
	}, 10*time.Second, 20*time.Millisecond, "the fresh pass is pushed: %v", out.of(31))
}
