package draw_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/draw"
	"github.com/flashsale/seckill/seckill/waitroom"
)

var secret = []byte("draw tests' room secret")

// instance is one gateway's view of the draws: its own pool, room and store.
type instance struct {
	room  *waitroom.Room
	draws *draw.Store
}

func newInstance(rdb redis.UniversalClient) instance {
	room := waitroom.New(waitroom.Config{Redis: rdb, Secret: secret})
	return instance{room: room, draws: draw.New(draw.Config{Redis: rdb, Room: room})}
}

// drawLine is a draw whose entries are open now and whose start is in
// `in`, by Redis's clock.
func drawLine(t *testing.T, rdb redis.UniversalClient, id int64, in, pass time.Duration) waitroom.Line {
	now, err := rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	v := seckill.Voucher{ID: id, BeginAt: now.Add(in), EndAt: now.Add(time.Hour), PerUserLimit: 1,
		WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 1000, PrequeueSeconds: 3600, Mode: seckill.RoomDraw}}
	l, ok := waitroom.LineOf(v)
	require.True(t, ok)
	require.True(t, l.Draw)
	if pass > 0 {
		l.PassTTL = pass
	}
	return l
}

// untilBegun waits until Redis's clock passes l's start.
func untilBegun(t *testing.T, rdb redis.UniversalClient, l waitroom.Line) {
	for {
		now, err := rdb.Time(context.Background()).Result()
		require.NoError(t, err)
		if !now.Before(l.BeginAt) {
			return
		}
		time.Sleep(l.BeginAt.Sub(now) + time.Millisecond)
	}
}

func TestEntryWindow(t *testing.T) {
	for name, rdb := range shapes(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			in := newInstance(rdb)
			id := map[string]int64{"plain": 270001, "cluster": 270002}[name]

			early := drawLine(t, rdb, id+10, 2*time.Hour, 0)
			_, err := in.draws.Enter(ctx, early, 1)
			require.ErrorIs(t, err, seckill.ErrNotStarted)
			info, err := in.draws.Info(ctx, early.VoucherID)
			require.NoError(t, err)
			assert.Empty(t, info.Commitment, "no commitment before the window")

			l := drawLine(t, rdb, id, 500*time.Millisecond, 0)
			_, err = in.draws.Draw(ctx, l, 10, 1)
			require.NoError(t, err)
			e, err := in.draws.Enter(ctx, l, 1)
			require.NoError(t, err)
			assert.True(t, e.Entered)
			e, err = in.draws.Enter(ctx, l, 1)
			require.NoError(t, err)
			assert.Equal(t, int64(1), e.Entries, "one entry per account")
			info, err = in.draws.Info(ctx, id)
			require.NoError(t, err)
			assert.Len(t, info.Commitment, 64, "the commitment is out once entries open")
			assert.Nil(t, info.Seed, "the seed is secret until the draw")

			untilBegun(t, rdb, l)
			_, err = in.draws.Enter(ctx, l, 2)
			require.ErrorIs(t, err, seckill.ErrEnded, "an entry after begin_at is refused")
			e, err = in.draws.Enter(ctx, l, 1)
			require.NoError(t, err, "an entrant entering again keeps the entry")
			assert.True(t, e.Entered)
			e, err = in.draws.Entered(ctx, l, 2)
			require.NoError(t, err)
			assert.False(t, e.Entered)

			out, err := in.draws.Draw(ctx, l, 10, 1)
			require.NoError(t, err)
			require.True(t, out.Due)
			assert.Equal(t, []int64{1}, out.Draw.Users())
			after, err := in.draws.Info(ctx, id)
			require.NoError(t, err)
			require.NotNil(t, after.Seed)
			assert.Equal(t, info.Commitment, after.Seed.Commitment(), "the seed published is the one committed to")
		})
	}
}

// TestDrawOnceWithThreeRacingDrawers has three instances, each with its own
// connections, run the draw at begin_at together and again and again: one
// seats it, and every one of them computes the same ranking.
func TestDrawOnceWithThreeRacingDrawers(t *testing.T) {
	for name, rdb := range shapes(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			id := map[string]int64{"plain": 270101, "cluster": 270102}[name]
			l := drawLine(t, rdb, id, 700*time.Millisecond, 0)
			entrant := newInstance(rdb)
			for u := int64(1); u <= 300; u++ {
				_, err := entrant.draws.Enter(ctx, l, 5000+u)
				require.NoError(t, err)
			}
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				drew  int
				users [][]int64
			)
			for range 3 {
				in := newInstance(fresh(t, rdb))
				wg.Add(1)
				go func() {
					defer wg.Done()
					calls := 0
					for calls < 5 {
						out, err := in.draws.Draw(ctx, l, 100, 2)
						if !assert.NoError(t, err) {
							return
						}
						if !out.Due {
							time.Sleep(5 * time.Millisecond)
							continue
						}
						calls++
						mu.Lock()
						if out.Drew {
							drew++
						}
						users = append(users, out.Draw.Users())
						assert.Equal(t, 50, out.Draw.Winners, "100 units at 2 each: 50 winners")
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			require.Equal(t, 1, drew, "the draw is seated once")
			require.Len(t, users, 15)
			for _, u := range users[1:] {
				require.Equal(t, users[0], u)
			}

			info, err := entrant.draws.Info(ctx, id)
			require.NoError(t, err)
			require.NotNil(t, info.Seed)
			want := draw.Rank(*info.Seed, id, users[0], 100, 2)
			cut, _ := want.Cutoff()
			require.NotNil(t, info.Cutoff)
			assert.Equal(t, cut, *info.Cutoff)
			assert.Equal(t, int64(50), info.Winners)
			assert.Equal(t, int64(300), info.Entries)

			first, err := entrant.room.Status(ctx, l, users[0][0])
			require.NoError(t, err)
			assert.Equal(t, waitroom.StateWon, waitroom.DrawState(first.State))
			assert.NotEmpty(t, first.Pass)
			assert.WithinDuration(t, first.At.Add(seckill.DefaultDrawPassSeconds*time.Second), first.PassExpiresAt, time.Second,
				"a winner's pass lives draw_pass_seconds")
			next, err := entrant.room.Status(ctx, l, users[0][50])
			require.NoError(t, err)
			assert.Equal(t, waitroom.StateWaitlisted, waitroom.DrawState(next.State))
			assert.Equal(t, int64(1), next.Position)
			last, err := entrant.room.Status(ctx, l, users[0][299])
			require.NoError(t, err)
			assert.Equal(t, int64(250), last.Position)
		})
	}
}

// TestWaitlistAdvances: a winner whose pass expires unused, and a winner
// whose hold times out, each hand their turn to the next on the waitlist,
// in draw order.
func TestWaitlistAdvances(t *testing.T) {
	for name, rdb := range shapes(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			id := map[string]int64{"plain": 270201, "cluster": 270202}[name]
			in := newInstance(rdb)
			l := drawLine(t, rdb, id, 300*time.Millisecond, 1500*time.Millisecond)
			for u := int64(1); u <= 6; u++ {
				_, err := in.draws.Enter(ctx, l, u)
				require.NoError(t, err)
			}
			untilBegun(t, rdb, l)
			out, err := in.draws.Draw(ctx, l, 2, 1)
			require.NoError(t, err)
			rank := out.Draw.Users()
			state := func(u int64) (waitroom.State, int64) {
				st, err := in.room.Status(ctx, l, u)
				require.NoError(t, err)
				return waitroom.DrawState(st.State), st.Position
			}

			// The first winner buys (claims the pass); the second does nothing.
			st, err := in.room.Status(ctx, l, rank[0])
			require.NoError(t, err)
			claimed, err := in.room.Claim(ctx, id, rank[0], st.Pass, "")
			require.NoError(t, err)
			// Its reservation lands (the stock below already counts it)
			// and the buy settles the claim, as the pipeline does.
			require.NoError(t, in.room.Spend(ctx, claimed))
			step, err := in.room.Admit(ctx, l, 1, 0) // one unit left: the second winner's
			require.NoError(t, err)
			assert.Zero(t, step.Admitted, "no place while both winners hold their turn")

			deadline := time.Now().Add(10 * time.Second)
			for step.Expired == 0 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
				// The stock given already counts the first winner's
				// reservation: the settled claim an earlier step saw is not
				// counted again (Step.Landed, as the admitter passes it).
				step, err = in.room.Admit(ctx, l, 1, step.Landed)
				require.NoError(t, err)
			}
			require.Equal(t, int64(1), step.Expired, "the unused pass expires")
			s, _ := state(rank[1])
			assert.Equal(t, waitroom.StateLost, s)
			s, _ = state(rank[2])
			assert.Equal(t, waitroom.StateWon, s, "the first on the waitlist wins its place")
			s, pos := state(rank[3])
			assert.Equal(t, waitroom.StateWaitlisted, s)
			assert.Equal(t, int64(1), pos)

			// The first winner's hold times out: its unit is back (two left).
			step, err = in.room.Admit(ctx, l, 2, step.Landed)
			require.NoError(t, err)
			assert.Equal(t, int64(1), step.Admitted)
			s, _ = state(rank[3])
			assert.Equal(t, waitroom.StateWon, s, "the next on the waitlist wins the unit back")
			s, pos = state(rank[5])
			assert.Equal(t, waitroom.StateWaitlisted, s)
			assert.Equal(t, int64(2), pos)
		})
	}
}

// TestLostDrawIsNotDrawnAgain: Redis loses the draw's keys (entries and
// seed) after the draw while the room keeps its line (restored from its
// copy): drawing again seats nothing, keeps the winners, and publishes no
// other seed.
func TestLostDrawIsNotDrawnAgain(t *testing.T) {
	ctx := context.Background()
	rdb := plain(t)
	in := newInstance(rdb)
	const id = 270401
	l := drawLine(t, rdb, id, 300*time.Millisecond, 0)
	for u := int64(1); u <= 4; u++ {
		_, err := in.draws.Enter(ctx, l, u)
		require.NoError(t, err)
	}
	untilBegun(t, rdb, l)
	out, err := in.draws.Draw(ctx, l, 2, 1)
	require.NoError(t, err)
	require.True(t, out.Drew)
	require.NoError(t, rdb.Del(ctx, "draw:{v270401}:meta", "draw:{v270401}:entries").Err())
	require.NoError(t, rdb.HDel(ctx, "waitroom:{v270401}:room", "drawn").Err()) // lost too; the line was restored

	again, err := in.draws.Draw(ctx, l, 2, 1)
	require.Error(t, err)
	assert.True(t, again.Due)
	assert.False(t, again.Drew)
	info, err := in.draws.Info(ctx, id)
	require.NoError(t, err)
	assert.Nil(t, info.Seed, "no other seed is published as the draw's")
	st, err := in.room.Status(ctx, l, out.Draw.Users()[0])
	require.NoError(t, err)
	assert.Equal(t, waitroom.StateAdmitted, st.State, "the seated winners stand")
	st, err = in.room.Status(ctx, l, out.Draw.Users()[3])
	require.NoError(t, err)
	assert.Equal(t, int64(2), st.Position)
}
