package waitroom_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/waitroom"
)

// The admitter tells OnStep every step it ran: what it admitted and how
// many still wait, so that the admitted so far plus the waiting are always
// everyone who joined.
func TestAdmitterTellsEveryStep(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140031, BeginAt: now, EndAt: now.Add(time.Hour), AdmitPerSecond: 20}
	for u := int64(1); u <= 10; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	var steps int
	var admitted int64
	adm := waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: room,
		Targets: func(context.Context) ([]waitroom.Target, error) {
			return []waitroom.Target{{Line: line, Passes: -1}}, nil
		},
		OnStep: func(id int64, s waitroom.Step) {
			require.Equal(t, line.VoucherID, id)
			steps++
			admitted += s.Admitted
			require.EqualValues(t, 10, admitted+s.Waiting, "step %d: %+v", steps, s)
		},
	})
	require.Eventually(t, func() bool { adm.Tick(ctx); return admitted == 10 }, 5*time.Second, 50*time.Millisecond)
	require.Positive(t, steps)
}
