package waitroom_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// A room whose stock is all held is sold out, not closed: those waiting
// keep their places and read sold_out, and a newcomer still joins, behind
// them. When units come back the room admits again in line order, at most
// as many as came back however much rate credit it has; only Close (the
// sale over) closes it.
func TestSoldOutKeepsPlacesAndReturnedUnitsGoInOrder(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140060, BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour), AdmitPerSecond: 1000}
	for u := int64(1); u <= 10; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	step, err := room.Admit(ctx, line, 3, 0)
	require.NoError(t, err)
	require.EqualValues(t, 3, step.Admitted)
	require.False(t, step.SoldOut)

	// The three buy (their passes used, their reservations in the stock):
	// nothing is left.
	for u := int64(1); u <= 3; u++ {
		st, err := room.Status(ctx, line, u)
		require.NoError(t, err)
		p, err := room.Claim(ctx, line.VoucherID, u, st.Pass, "")
		require.NoError(t, err)
		require.NoError(t, room.Spend(ctx, p))
	}
	step, err = room.Admit(ctx, line, 0, step.Landed)
	require.NoError(t, err)
	require.True(t, step.SoldOut)
	require.True(t, step.SoldOutChanged, "the step that marks the room sold out says so, to be announced")
	require.Zero(t, step.Admitted)
	require.False(t, step.Closed)
	require.EqualValues(t, 3, step.Landed, "three claims settled")
	again, err := room.Admit(ctx, line, 0, step.Landed)
	require.NoError(t, err)
	require.True(t, again.SoldOut)
	require.False(t, again.SoldOutChanged, "announced once")

	st, err := room.Status(ctx, line, 4)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateSoldOut, st.State)
	require.EqualValues(t, 1, st.Position, "the place is kept")
	require.Zero(t, st.Ahead)
	require.Zero(t, st.ETA)
	q := waitroom.QueueJSON(st)
	require.Nil(t, q.Pass)
	late, err := room.Join(ctx, line, 11)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateSoldOut, late.State, "a sold-out line still takes joins")
	require.EqualValues(t, 8, late.Position)

	// Two units come back: exactly the next two in line are admitted, even
	// with a whole second of rate credit (1,000).
	time.Sleep(1100 * time.Millisecond)
	step, err = room.Admit(ctx, line, 2, again.Landed)
	require.NoError(t, err)
	require.EqualValues(t, 2, step.Admitted)
	require.False(t, step.SoldOut)
	require.True(t, step.SoldOutChanged)
	for u, want := range map[int64]waitroom.State{4: waitroom.StateAdmitted, 5: waitroom.StateAdmitted, 6: waitroom.StateWaiting} {
		st, err := room.Status(ctx, line, u)
		require.NoError(t, err)
		require.Equal(t, want, st.State, "user %d", u)
	}
	step, err = room.Admit(ctx, line, 2, step.Landed)
	require.NoError(t, err)
	require.Zero(t, step.Admitted, "the unused passes already cover the units back")

	stats, err := room.Stats(ctx, line.VoucherID)
	require.NoError(t, err)
	require.EqualValues(t, 6, stats.Waiting, "sold out, the line still counts its waiters")

	step, err = room.Close(ctx, line)
	require.NoError(t, err)
	require.True(t, step.Closed)
	st, err = room.Status(ctx, line, 6)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateClosed, st.State)
}

// A shopper watching on this instance's socket is pushed sold_out (with the
// place kept) when the room sells out, then, when a unit comes back and the
// line reaches them, the pass.
func TestFeedPushesSoldOutThenPass(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140061, BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour), AdmitPerSecond: 50}
	var mu sync.Mutex
	passes := int64(1)
	users := []int64{1, 2, 3}
	out := newSockets(users...)
	runFeed(t, room, out, func() waitroom.Target {
		mu.Lock()
		defer mu.Unlock()
		return waitroom.Target{Line: line, Passes: passes}
	})
	for _, u := range users {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	last := func(u int64) api.Queue {
		f := out.of(u)
		if len(f) == 0 {
			return api.Queue{}
		}
		return f[len(f)-1].q
	}
	require.Eventually(t, func() bool { return waitroom.State(last(1).State) == waitroom.StateAdmitted }, 5*time.Second, 20*time.Millisecond)
	mu.Lock()
	passes = 0 // user 1 buys the one unit: the stock left is 0 from now
	mu.Unlock()
	p, err := room.Claim(ctx, line.VoucherID, 1, *last(1).Pass, "")
	require.NoError(t, err)
	require.NoError(t, room.Spend(ctx, p), "the reservation is in the stock")
	require.Eventually(t, func() bool { return waitroom.State(last(3).State) == waitroom.StateSoldOut }, 5*time.Second, 20*time.Millisecond,
		"the last in line hears the room sold out: %+v", out.of(3))
	require.EqualValues(t, 2, last(3).Position, "and keeps the place")
	require.EqualValues(t, 1, last(3).Ahead)
	require.Zero(t, last(3).ETASeconds)

	mu.Lock()
	passes = 1 // a unit came back
	mu.Unlock()
	require.Eventually(t, func() bool { return waitroom.State(last(2).State) == waitroom.StateAdmitted }, 5*time.Second, 20*time.Millisecond,
		"the next in line gets the unit back: %+v", out.of(2))
	require.NotNil(t, last(2).Pass)
	require.Eventually(t, func() bool { return waitroom.State(last(3).State) == waitroom.StateWaiting }, 5*time.Second, 20*time.Millisecond,
		"no longer sold out: %+v", out.of(3))
	require.EqualValues(t, 1, last(3).Position)
	st, err := room.Status(ctx, line, 3)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, st.State, "one pass out covers the one unit back")
}

// A room closed because every unit was paid for opens again when stock is
// added: the admitter that saw it closed steps it again once its target is
// no longer over, and the units added go to the next in line.
func TestReopenAfterStockAdded(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140062, BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour), AdmitPerSecond: 100}
	for u := int64(1); u <= 3; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	var mu sync.Mutex
	target := waitroom.Target{Line: line, Passes: 0, Over: true} // every unit paid for
	adm := waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: room, Targets: func(context.Context) ([]waitroom.Target, error) {
		mu.Lock()
		defer mu.Unlock()
		return []waitroom.Target{target}, nil
	}})
	adm.Tick(ctx)
	st, err := room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateClosed, st.State)

	require.NoError(t, room.Reopen(ctx, line))
	mu.Lock()
	target = waitroom.Target{Line: line, Passes: 1} // one unit added
	mu.Unlock()
	adm.Tick(ctx)
	st, err = room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, st.State, "the first in line gets the unit added")
	st, err = room.Status(ctx, line, 2)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, st.State)
}
