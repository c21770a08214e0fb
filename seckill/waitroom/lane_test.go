package waitroom_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/waitroom"
)

// In a line whose entries name lanes, every priority place in the
// pre-queue is ahead of every standard one, each lane still shuffled;
// joining again keeps the place whatever the lane; from begin_at a joiner
// of either lane goes to the back, so no place ever moves.
func TestPriorityLaneIsAheadInThePrequeue(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 149901, BeginAt: now.Add(time.Hour), EndAt: now.Add(2 * time.Hour),
		AdmitPerSecond: 10, PrequeueSeconds: 7200}
	const n = 200
	lane := func(u int64) waitroom.Lane {
		if u%4 == 0 {
			return waitroom.LanePriority
		}
		return waitroom.LaneStandard
	}
	for u := int64(1); u <= n; u++ {
		_, err := room.JoinIn(ctx, line, u, lane(u))
		require.NoError(t, err)
	}
	var lastPriority, firstStandard int64 = -1, n
	var priorityOrder []int64
	for u := int64(1); u <= n; u++ {
		st, err := room.Status(ctx, line, u)
		require.NoError(t, err)
		if lane(u) == waitroom.LanePriority {
			lastPriority = max(lastPriority, st.Rank)
			priorityOrder = append(priorityOrder, st.Rank)
		} else {
			firstStandard = min(firstStandard, st.Rank)
		}
		again, err := room.JoinIn(ctx, line, u, waitroom.LanePriority)
		require.NoError(t, err)
		require.Equal(t, st.Rank, again.Rank, "joining again keeps the place")
	}
	require.Equal(t, int64(n/4-1), lastPriority, "the priority lane fills the front")
	require.Equal(t, int64(n/4), firstStandard)
	sorted := true
	for i := 1; i < len(priorityOrder); i++ {
		sorted = sorted && priorityOrder[i] > priorityOrder[i-1]
	}
	require.False(t, sorted, "the priority lane is shuffled too, not in join order")

	// From begin_at places never move: a late priority joiner is at the
	// back.
	now = redisNow(t, c)
	open := waitroom.Line{VoucherID: 149902, BeginAt: now.Add(-time.Second), EndAt: now.Add(time.Hour),
		AdmitPerSecond: 1, PrequeueSeconds: 60}
	first, err := room.JoinIn(ctx, open, 1, waitroom.LaneStandard)
	require.NoError(t, err)
	late, err := room.JoinIn(ctx, open, 2, waitroom.LanePriority)
	require.NoError(t, err)
	require.Greater(t, late.Rank, first.Rank)
}
