package waitroom_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/waitroom"
)

// An admitted shopper's pass reads unused until it is claimed; nobody
// outside the line has one.
func TestPassUnusedUntilClaimed(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140051, BeginAt: now, EndAt: now.Add(time.Hour), AdmitPerSecond: 200}
	for u := int64(1); u <= 3; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	adm := waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: room,
		Targets: func(context.Context) ([]waitroom.Target, error) {
			return []waitroom.Target{{Line: line, Passes: -1}}, nil
		}})
	require.Eventually(t, func() bool {
		adm.Tick(ctx)
		st, err := room.Status(ctx, line, 2)
		require.NoError(t, err)
		return st.State == waitroom.StateAdmitted
	}, 5*time.Second, 20*time.Millisecond)

	st, err := room.Status(ctx, line, 2)
	require.NoError(t, err)
	unused, err := room.PassUnused(ctx, line.VoucherID, 2)
	require.NoError(t, err)
	require.True(t, unused)
	_, err = room.Claim(ctx, line.VoucherID, 2, st.Pass, "unused-test-key")
	require.NoError(t, err)
	unused, err = room.PassUnused(ctx, line.VoucherID, 2)
	require.NoError(t, err)
	require.False(t, unused, "a claimed pass is a turn taken")
	unused, err = room.PassUnused(ctx, line.VoucherID, 99)
	require.NoError(t, err)
	require.False(t, unused, "nobody outside the line has a turn")
}
