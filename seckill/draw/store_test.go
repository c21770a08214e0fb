package draw_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/draw"
	"github.com/flashsale/seckill/seckill/waitroom"
)

func shapes(t *testing.T) map[string]redis.UniversalClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: stack.RedisCluster(t).Addrs})
	t.Cleanup(func() { _ = c.Close() })
	return map[string]redis.UniversalClient{"plain": stack.Redis(t), "cluster": c}
}

// TestWholeDraw: entries in the window, frozen at begin_at with their hash
// committed, drawn from the committed round once it is out: the round's
// signature verifies, every ticket is HMAC-SHA256 of the randomness, the
// lowest win, the room seats them, and the commitments are shown oldest
// first.
func TestWholeDraw(t *testing.T) {
	for name, rdb := range shapes(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			in := newInstance(t, rdb, stack.NewDatabase(t))
			id := map[string]int64{"plain": 280001, "cluster": 280002}[name]
			early, _ := drawVoucher(t, in, id+10, 2*time.Hour)
			early.WaitingRoom.PrequeueSeconds = 60
			earlyLine, _ := waitroom.LineOf(early)
			_, err := in.draws.Enter(ctx, earlyLine, 1)
			require.ErrorIs(t, err, seckill.ErrNotStarted, "no entry before the window")

			uncommitted := early
			uncommitted.ID, uncommitted.WaitingRoom = id+20, &seckill.WaitingRoom{AdmitPerSecond: 1000, PrequeueSeconds: 7200, Mode: seckill.RoomDraw}
			ul, _ := waitroom.LineOf(uncommitted)
			_, err = in.draws.Enter(ctx, ul, 1)
			require.ErrorIs(t, err, apperr.ErrUnavailable, "no entry before the round deciding it is committed to")

			v, l := drawVoucher(t, in, id, 1500*time.Millisecond)
			face, err := in.draws.Face(ctx, id)
			require.NoError(t, err)
			require.NotZero(t, face.Beacon.Round, "the beacon round is committed when the voucher is made")
			assert.Empty(t, face.Beacon.Signature)
			assert.Empty(t, face.EntriesHash)
			ids := map[int64]string{}
			for u := int64(1); u <= 30; u++ {
				e, err := in.draws.Enter(ctx, l, 100+u)
				require.NoError(t, err)
				require.True(t, e.Entered)
				require.Len(t, e.EntryID, 32)
				assert.NotEqual(t, strconv.FormatInt(100+u, 10), e.EntryID, "the entry id is not the user id")
				ids[100+u] = e.EntryID
			}
			again, err := in.draws.Enter(ctx, l, 101)
			require.NoError(t, err)
			assert.Equal(t, ids[101], again.EntryID, "one entry per account")
			assert.Equal(t, int64(30), again.Entries)

			untilBegun(t, rdb, l)
			_, err = in.draws.Enter(ctx, l, 999)
			require.ErrorIs(t, err, seckill.ErrEnded, "no new entry from begin_at")
			out := drawn(t, in, l, v.StockLeft, 2)
			require.Len(t, out.Draw.Ranked, 30)
			assert.Equal(t, 5, out.Draw.Winners, "10 units at 2 each: 5 winners")

			face, err = in.draws.Face(ctx, id)
			require.NoError(t, err)
			all := make([]string, 0, len(ids))
			for _, e := range ids {
				all = append(all, e)
			}
			assert.Equal(t, draw.EntriesHash(all), face.EntriesHash)
			require.Equal(t, 2, face.NCommitments)
			assert.Equal(t, draw.KindBeacon, face.Commitments[0].Kind, "oldest first")
			assert.Equal(t, draw.KindEntriesHash, face.Commitments[1].Kind)
			assert.Equal(t, face.EntriesHash, face.Commitments[1].EntriesHash)
			sig, err := hex.DecodeString(face.Beacon.Signature)
			require.NoError(t, err)
			ch, err := in.beacon.Chain(ctx)
			require.NoError(t, err)
			require.NoError(t, ch.Verify(face.Beacon.Round, sig), "the published signature is the round's")
			rnd := sha256.Sum256(sig)
			for i, e := range out.Draw.Ranked {
				m := hmac.New(sha256.New, rnd[:])
				m.Write([]byte(strconv.FormatInt(id, 10) + ":" + e.EntryID))
				require.Equal(t, hex.EncodeToString(m.Sum(nil)), e.Ticket.String())
				if i > 0 {
					require.Less(t, out.Draw.Ranked[i-1].Ticket.String(), e.Ticket.String())
				}
			}
			cut, _ := out.Draw.Cutoff()
			assert.Equal(t, cut.String(), face.Cutoff)

			first, err := in.room.Status(ctx, l, out.Draw.Ranked[0].UserID)
			require.NoError(t, err)
			assert.Equal(t, waitroom.StateWon, waitroom.DrawState(first.State))
			next, err := in.room.Status(ctx, l, out.Draw.Ranked[5].UserID)
			require.NoError(t, err)
			assert.Equal(t, waitroom.StateWaitlisted, waitroom.DrawState(next.State))
			assert.Equal(t, int64(1), next.Position)

			list, err := in.draws.EntryList(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, string(draw.EntryList(all)), string(list))
			sum := sha256.Sum256(list)
			assert.Equal(t, face.EntriesHash, hex.EncodeToString(sum[:]), "the list hashes to entries_hash")
		})
	}
}

// TestPatchEndKeepsTheDrawKeys: the sale's end moves later (PATCH end_at)
// past the old expiry of the draw's keys; the drawer moves their expiry
// with it, as the room's and the stock's move, and the entries are still
// there after the old expiry.
func TestPatchEndKeepsTheDrawKeys(t *testing.T) {
	ctx := context.Background()
	rdb := stack.Redis(t)
	in := newInstance(t, rdb, stack.NewDatabase(t))
	const id = 280101
	v, _ := drawVoucher(t, in, id, time.Hour)
	v.EndAt = v.BeginAt.Add(time.Hour)
	// A store whose keys live 1 s past the end, and an end 2 s away.
	short := draw.New(draw.Config{Redis: rdb, Room: in.room, Record: in.record, Beacon: in.beacon, Grace: time.Second})
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	v.BeginAt, v.EndAt = now.Add(time.Hour), now.Add(2*time.Second)
	l, _ := waitroom.LineOf(v)
	_, err = short.Enter(ctx, l, 7)
	require.NoError(t, err)
	ttl, err := rdb.PTTL(ctx, draw.EntriesKey(id)).Result()
	require.NoError(t, err)
	require.Less(t, ttl, 4*time.Second)

	v.EndAt = now.Add(time.Hour) // the operator's PATCH
	drawer := draw.NewDrawer(draw.DrawerConfig{Draws: short, Targets: func(context.Context) ([]draw.Target, error) {
		l, _ := waitroom.LineOf(v)
		return []draw.Target{{Line: l, Voucher: v, Stock: 10, PerUserLimit: 1}}, nil
	}})
	drawer.Tick(ctx)
	time.Sleep(ttl + 500*time.Millisecond)
	e, err := short.Entered(ctx, l, 7)
	require.NoError(t, err)
	assert.True(t, e.Entered, "the entry outlives the old expiry")
	ttl, err = rdb.PTTL(ctx, draw.EntriesKey(id)).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 50*time.Minute)
}

// TestLostEntriesMakeTheDrawVoid: the entries' key is deleted in the
// window; the draw is void, visibly, and logged; entering again is
// refused, and nothing is drawn.
func TestLostEntriesMakeTheDrawVoid(t *testing.T) {
	ctx := context.Background()
	rdb := stack.Redis(t)
	in := newInstance(t, rdb, stack.NewDatabase(t))
	const id = 280201
	_, l := drawVoucher(t, in, id, 5*time.Second)
	for u := int64(1); u <= 3; u++ {
		_, err := in.draws.Enter(ctx, l, u)
		require.NoError(t, err)
	}
	require.NoError(t, rdb.Del(ctx, draw.EntriesKey(id)).Err())

	err := in.draws.Open(ctx, l)
	require.ErrorIs(t, err, draw.ErrVoid)
	face, err := in.draws.Face(ctx, id)
	require.NoError(t, err)
	assert.True(t, face.Void)
	assert.Contains(t, face.Why, "lost")
	_, err = in.draws.Enter(ctx, l, 4)
	require.ErrorIs(t, err, draw.ErrVoid, "a void draw takes no entry")
	_, err = in.draws.Enter(ctx, l, 1)
	require.ErrorIs(t, err, draw.ErrVoid, "nor an entrant again")
	assert.Contains(t, in.log.String(), "draw void")
	assert.Contains(t, in.log.String(), "make a new voucher", "the log says what the operator can do")

	untilBegun(t, rdb, l)
	out, err := in.draws.Draw(ctx, l, 10, 1)
	require.NoError(t, err)
	assert.True(t, out.Done)
	assert.False(t, out.Drew, "a void draw is never drawn")
	_, ok, err := in.room.Seated(ctx, id)
	require.NoError(t, err)
	assert.False(t, ok)
}

// TestSlicesSeatOnceUnderRacingDrawers: 2,300 entries (five slices), four
// instances drawing at once, after a drawer that died having seated one
// slice: exactly one call finishes the seating, every place holds its rank,
// and the winners alone hold passes.
func TestSlicesSeatOnceUnderRacingDrawers(t *testing.T) {
	ctx := context.Background()
	rdb := stack.Redis(t)
	pool := stack.NewDatabase(t)
	first := newInstance(t, rdb, pool)
	const id, n = 280301, 2300
	_, l := drawVoucher(t, first, id, 3*time.Second)
	for u := int64(1); u <= n; u++ {
		_, err := first.draws.Enter(ctx, l, 10_000+u)
		require.NoError(t, err)
	}
	untilBegun(t, rdb, l)
	ref := drawnRanking(t, first, l)

	// A drawer seats the first slice and dies.
	users := ref.Users()
	args := []any{int64(600_000), int64(300), strconv.FormatInt(l.EndAt.Add(time.Hour).UnixMilli(), 10), 0, n}
	for _, u := range users[:waitroom.SeatSlice] {
		args = append(args, strconv.FormatInt(u, 10))
	}
	keys := []string{"waitroom:{v280301}:line", "waitroom:{v280301}:room", "waitroom:{v280301}:passes",
		"waitroom:{v280301}:outcome", "waitroom:{v280301}:claims"}
	res, err := redis.NewScript(lua.QueueSeat).Run(ctx, rdb, keys, args...).Int64Slice()
	require.NoError(t, err)
	require.Equal(t, int64(3), res[0], "one slice seated, more to go")

	var wg sync.WaitGroup
	var mu sync.Mutex
	drew := 0
	for range 4 {
		in := newInstance(t, stack.Redis(t), pool)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := drawn(t, in, l, 600, 2)
			mu.Lock()
			defer mu.Unlock()
			if out.Drew {
				drew++
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, drew, "the seating is finished once")
	size, err := rdb.ZCard(ctx, keys[0]).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(n), size)
	places, err := rdb.ZRangeWithScores(ctx, keys[0], 0, -1).Result()
	require.NoError(t, err)
	for i, p := range places {
		require.Equal(t, float64(i), p.Score)
		require.Equal(t, strconv.FormatInt(users[i], 10), p.Member, "rank %d", i)
	}
	passes, err := rdb.ZCard(ctx, keys[2]).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(300), passes, "600 units at 2 each: 300 winners, passes for them alone")
}

// drawnRanking is l's ranking as the committed round decides it, computed
// without seating (the round is waited for).
func drawnRanking(t *testing.T, in instance, l waitroom.Line) draw.Draw {
	ctx := context.Background()
	face, err := in.draws.Face(ctx, l.VoucherID)
	require.NoError(t, err)
	c := in.beacon
	var sig []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.Round(ctx, face.Beacon.Round)
		if err == nil {
			sig = r.Signature
			break
		}
		require.True(t, time.Now().Before(deadline), "round %d: %v", face.Beacon.Round, err)
		time.Sleep(200 * time.Millisecond)
	}
	var entries []draw.Entry
	it := in.rdb.HScan(ctx, draw.EntriesKey(l.VoucherID), 0, "u:*", 1000).Iterator()
	for it.Next(ctx) {
		f := it.Val()
		require.True(t, it.Next(ctx))
		uid, err := strconv.ParseInt(strings.TrimPrefix(f, "u:"), 10, 64)
		require.NoError(t, err)
		entries = append(entries, draw.Entry{EntryID: it.Val(), UserID: uid})
	}
	require.NoError(t, it.Err())
	return draw.Rank(draw.RandomnessOf(sig), l.VoucherID, entries, 600, 2)
}

// TestConcurrentFirstEntriesOpenOnce: 32 shoppers enter at once a draw
// nobody opened yet, on their own connections: the entries open once, none
// is lost, and the draw is not taken for void.
func TestConcurrentFirstEntriesOpenOnce(t *testing.T) {
	ctx := context.Background()
	rdb := stack.Redis(t)
	pool := stack.NewDatabase(t)
	first := newInstance(t, rdb, pool)
	const id = 280601
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	v := seckill.Voucher{ID: id, BeginAt: now.Add(time.Hour), EndAt: now.Add(2 * time.Hour), PerUserLimit: 1,
		WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 1000, PrequeueSeconds: 7200, Mode: seckill.RoomDraw}}
	l, _ := waitroom.LineOf(v)
	_, err = first.draws.CommitBeacon(ctx, v)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for u := range int64(32) {
		in := newInstance(t, stack.Redis(t), pool)
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := in.draws.Enter(ctx, l, 60_000+u)
			if assert.NoError(t, err) {
				assert.True(t, e.Entered)
			}
		}()
	}
	wg.Wait()
	face, err := first.draws.Face(ctx, id)
	require.NoError(t, err)
	assert.False(t, face.Void, "%s", face.Why)
	e, err := first.draws.Entered(ctx, l, 60_000)
	require.NoError(t, err)
	assert.Equal(t, int64(32), e.Entries)
}
