package gateway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A socket's budget lets its burst through at once, then its rate, on the
// clock it is given; a negative rate never runs out.
func TestMessageBudget(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_800_000_000, 0)
	b := newMessageBudget(2, 3, at)
	for i := range 3 {
		require.True(t, b.take(at), "message %d of the burst", i+1)
	}
	require.False(t, b.take(at), "past the burst")
	require.False(t, b.take(at.Add(400*time.Millisecond)), "0.8 of a message back")
	require.True(t, b.take(at.Add(500*time.Millisecond)), "one message back after half a second")
	require.False(t, b.take(at.Add(500*time.Millisecond)))
	at = at.Add(time.Hour)
	for i := range 3 {
		require.True(t, b.take(at), "a rested budget is whole again, never more: message %d", i+1)
	}
	require.False(t, b.take(at))

	free := newMessageBudget(-1, 0, at)
	for range 1000 {
		require.True(t, free.take(at))
	}
}
