package waitroom_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/waitroom"
)

// watches counts the watch announcements of voucherID on the rooms'
// channel, from a real subscription.
func watches(t *testing.T, voucherID string) *atomic.Int64 {
	t.Helper()
	sub := client(t).Subscribe(context.Background(), waitroom.Channel)
	t.Cleanup(func() { _ = sub.Close() })
	_, err := sub.Receive(context.Background()) // the subscription is live
	require.NoError(t, err)
	var n atomic.Int64
	go func() {
		for m := range sub.Channel() {
			if strings.Contains(m.Payload, `"t":"w"`) && strings.Contains(m.Payload, `"v":`+voucherID+`,`) {
				n.Add(1)
			}
		}
	}()
	return &n
}

// Reading an unchanged place again and again publishes it once: every
// publish reaches every gateway of the fleet, and a shopper (or a script)
// reading in a loop must not make one each. A place that changed is
// published at once.
func TestReadingAnUnchangedPlaceAnnouncesItOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := client(t)
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140901, BeginAt: now.Add(-time.Second), EndAt: now.Add(time.Hour), AdmitPerSecond: 1}
	seen := watches(t, "140901")
	room := waitroom.New(waitroom.Config{Redis: client(t), Secret: secret, WatchEvery: time.Hour})
	for u := int64(1); u <= 3; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return seen.Load() == 3 }, 20*time.Second, 10*time.Millisecond, "each join is announced")
	for range 300 {
		st, err := room.Status(ctx, line, 3)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateWaiting, st.State)
	}
	_, err := room.Join(ctx, line, 3)
	require.NoError(t, err)

	// The line moves: user 1 is admitted, so their place changed.
	_, err = room.Admit(ctx, line, 10, 0)
	require.NoError(t, err)
	st, err := room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, st.State)
	require.Eventually(t, func() bool { return seen.Load() == 4 }, 20*time.Second, 10*time.Millisecond,
		"the admitted place is announced")
	// Another instance has announced nothing for user 3 yet.
	_, err = waitroom.New(waitroom.Config{Redis: client(t), Secret: secret}).Status(ctx, line, 3)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return seen.Load() >= 5 }, 20*time.Second, 10*time.Millisecond)
	// Redis delivers in the order it ran the publishes: anything the reads
	// above published came before this last one.
	require.EqualValues(t, 5, seen.Load(), "300 reads and a join of an unchanged place publish nothing more")
}
