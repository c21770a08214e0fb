package waitroom_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// savedCopy keeps what a Mirror copies, in memory, as the PostgreSQL table
// does (orders/pgstore, room_places; the system's test covers that leg).
type savedCopy struct {
	mu    sync.Mutex
	saved map[int64]waitroom.Saved
}

func (c *savedCopy) SaveRoom(_ context.Context, _ int64, joined, admitted []waitroom.Saved) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range joined {
		if _, ok := c.saved[s.UserID]; !ok {
			c.saved[s.UserID] = s
		}
	}
	for _, a := range admitted {
		s := c.saved[a.UserID]
		s.PassExpiresAt = a.PassExpiresAt
		c.saved[a.UserID] = s
	}
	return nil
}

func (c *savedCopy) list() []waitroom.Saved {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []waitroom.Saved
	for _, s := range c.saved {
		out = append(out, s)
	}
	return out
}

// A room with recovery loses its Redis keys (and its voucher's stock meta,
// in the same slot): until it is recovered every call answers
// ErrUnavailable, never "not in line" or "not admitted"; recovered from the
// mirror's copy, the line has the same order, the admitted pass still buys
// once, a used one stays used, and a new joiner goes behind everyone. On a
// plain server and on a Redis Cluster (every key of a call in one slot).
func TestRoomRecoversFromItsCopy(t *testing.T) {
	for name, rdb := range map[string]redis.UniversalClient{"plain": client(t), "cluster": clusterClient(t)} {
		t.Run(name, func(t *testing.T) {
			id := int64(150001)
			if name == "cluster" {
				id++
			}
			testRoomRecovers(t, rdb, id)
		})
	}
}

func testRoomRecovers(t *testing.T, rdb redis.UniversalClient, id int64) {
	ctx := context.Background()
	onSale := redisstock.OnSaleKey(id)
	require.NoError(t, rdb.Set(ctx, onSale, "1", time.Hour).Err())
	room := waitroom.New(waitroom.Config{Redis: rdb, Secret: secret, Recovery: redisstock.OnSaleKey})
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	line := waitroom.Line{VoucherID: id, BeginAt: now.Add(-time.Second), EndAt: now.Add(time.Hour), AdmitPerSecond: 1000}
	for u := int64(1); u <= 5; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	step, err := room.Admit(ctx, line, 2, 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, step.Head)
	st1, err := room.Status(ctx, line, 1)
	require.NoError(t, err)
	_, err = room.Claim(ctx, id, 1, st1.Pass, "")
	require.NoError(t, err, "user 1 buys")
	st2, err := room.Status(ctx, line, 2)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, st2.State)
	cp := &savedCopy{saved: map[int64]waitroom.Saved{}}
	waitroom.NewMirror(waitroom.MirrorConfig{Room: room, Copy: cp, Lines: func(context.Context) ([]waitroom.Line, error) { return []waitroom.Line{line}, nil }}).Tick(ctx)
	require.Len(t, cp.list(), 5)

	// Redis loses the room and the stock.
	keys := []string{onSale}
	for _, k := range []string{"line", "room", "passes", "outcome", "claims", "journal"} {
		keys = append(keys, "waitroom:{v"+strconv.FormatInt(id, 10)+"}:"+k)
	}
	require.NoError(t, rdb.Del(ctx, keys...).Err())
	_, err = room.Status(ctx, line, 3)
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	_, err = room.Join(ctx, line, 9)
	require.ErrorIs(t, err, apperr.ErrUnavailable, "nobody joins a line about to be put back")
	_, err = room.Claim(ctx, id, 2, st2.Pass, "")
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	_, err = room.Admit(ctx, line, 10, 0)
	require.ErrorIs(t, err, apperr.ErrUnavailable)

	wrote, err := room.Recover(ctx, line, cp.list(), []int64{1})
	require.NoError(t, err)
	require.True(t, wrote)
	require.NoError(t, rdb.Set(ctx, onSale, "1", time.Hour).Err(), "the stock is back")
	wrote, err = room.Recover(ctx, line, cp.list(), nil)
	require.NoError(t, err)
	require.False(t, wrote, "a room Redis holds is left alone")

	got, err := room.Status(ctx, line, 2)
	require.NoError(t, err)
	require.Equal(t, st2.Pass, got.Pass, "the admitted keeps the pass they hold")
	for u := int64(3); u <= 5; u++ {
		st, err := room.Status(ctx, line, u)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateWaiting, st.State)
		require.Equal(t, u-2, st.Position, "user %d keeps the place", u)
	}
	_, err = room.Claim(ctx, id, 1, st1.Pass, "")
	require.ErrorIs(t, err, seckill.ErrNotAdmitted, "a pass that bought stays used")
	_, err = room.Claim(ctx, id, 2, st2.Pass, "")
	require.NoError(t, err, "the unexpired pass buys")
	st6, err := room.Join(ctx, line, 6)
	require.NoError(t, err)
	require.EqualValues(t, 4, st6.Position, "a new joiner goes behind everyone")
	stats, err := room.Stats(ctx, id)
	require.NoError(t, err)
	require.Equal(t, waitroom.Stats{Waiting: 4, Admitted: 2, PassesUsed: 2}, stats)
}
