package waitroom_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// A room nobody steps (its voucher paused: the admitters skip it; or no
// gateway up) keeps its admitted shoppers: their passes' lifetime stands
// still meanwhile. After a stop longer than a pass lives, the next step
// expires nobody, the shopper's place reads admitted with a new pass that
// buys, and joining again keeps it. A room stepped all along still expires
// an unused pass.
func TestPassOutlivesAStopOfItsRoom(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	const ttl = 1500 * time.Millisecond
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret, PassTTL: ttl})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140030, BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour), AdmitPerSecond: 100}
	for u := int64(1); u <= 2; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	step, err := room.Admit(ctx, line, -1, 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, step.Admitted)
	before, err := room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, before.State)
	left := before.PassExpiresAt.Sub(before.At)

	// The pause: no step until well past the pass's expiry.
	require.Eventually(t, func() bool { return redisNow(t, c).After(before.PassExpiresAt.Add(time.Second)) },
		30*time.Second, 20*time.Millisecond)
	during, err := room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, during.State, "a stopped room's pass does not run out")
	require.True(t, during.PassExpiresAt.After(during.At), "the place reads a pass still valid")

	step, err = room.Admit(ctx, line, -1, 0)
	require.NoError(t, err)
	require.Zero(t, step.Expired, "the step after the stop expires nobody")
	after, err := room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, after.State)
	require.NotEqual(t, before.Pass, after.Pass, "a new pass, with the lifetime it had left")
	require.GreaterOrEqual(t, after.PassExpiresAt.Sub(after.At), left-time.Second)
	again, err := room.Join(ctx, line, 1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, again.State, "joining again keeps the admission")
	_, err = room.Claim(ctx, line.VoucherID, 1, after.Pass, "k1")
	require.NoError(t, err, "the new pass buys")
	_, err = room.Claim(ctx, line.VoucherID, 1, during.Pass, "k2")
	require.ErrorIs(t, err, seckill.ErrNotAdmitted, "still one buy per admission")

	// Stepped all along, the other shopper's pass runs out.
	for deadline := time.Now().Add(30 * time.Second); ; {
		require.True(t, time.Now().Before(deadline), "the pass never expired")
		st, err := room.Status(ctx, line, 2)
		require.NoError(t, err)
		if st.State == waitroom.StateExpired {
			break
		}
		time.Sleep(50 * time.Millisecond)
		_, err = room.Admit(ctx, line, -1, 0)
		require.NoError(t, err)
	}
}
