package waitroom_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/waitroom"
)

// turnLog is a TurnSink that keeps what it heard.
type turnLog struct {
	mu    sync.Mutex
	turns []waitroom.Turn
}

func (l *turnLog) TurnCame(_ context.Context, t waitroom.Turn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.turns = append(l.turns, t)
}

func (l *turnLog) all() []waitroom.Turn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]waitroom.Turn(nil), l.turns...)
}

// Every admitted shopper's turn is heard once, with the pass's expiry;
// three admitters stepping the same room at once still tell each turn
// exactly once (the step that admitted it), and the pass reads unused
// until it is claimed.
func TestEveryTurnIsToldOnce(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	sink := &turnLog{}
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140051, BeginAt: now, EndAt: now.Add(time.Hour), AdmitPerSecond: 200}
	const shoppers = 60
	var wg sync.WaitGroup
	for u := int64(1); u <= shoppers; u++ {
		wg.Go(func() {
			_, err := waitroom.New(waitroom.Config{Redis: c, Secret: secret}).Join(ctx, line, u)
			require.NoError(t, err)
		})
	}
	wg.Wait()

	var admitted sync.Map
	for range 3 {
		room := waitroom.New(waitroom.Config{Redis: c, Secret: secret, Turns: sink})
		adm := waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: room,
			Targets: func(context.Context) ([]waitroom.Target, error) {
				return []waitroom.Target{{Line: line, Passes: -1}}, nil
			}})
		wg.Go(func() {
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) && len(sink.all()) < shoppers {
				adm.Tick(ctx)
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	wg.Wait()

	turns := sink.all()
	require.Len(t, turns, shoppers)
	for _, tn := range turns {
		_, twice := admitted.LoadOrStore(tn.UserID, true)
		require.False(t, twice, "user %d told twice", tn.UserID)
		require.Equal(t, line.VoucherID, tn.VoucherID)
		require.WithinDuration(t, now.Add(waitroom.DefaultPassTTL), tn.Until, 15*time.Second)
	}

	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	st, err := room.Status(ctx, line, 7)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, st.State)
	unused, err := room.PassUnused(ctx, line.VoucherID, 7)
	require.NoError(t, err)
	require.True(t, unused)
	_, err = room.Claim(ctx, line.VoucherID, 7, st.Pass, "turns-test-key")
	require.NoError(t, err)
	unused, err = room.PassUnused(ctx, line.VoucherID, 7)
	require.NoError(t, err)
	require.False(t, unused, "a claimed pass is a turn taken")
	unused, err = room.PassUnused(ctx, line.VoucherID, shoppers+1)
	require.NoError(t, err)
	require.False(t, unused, "nobody outside the line has a turn")
}

// A draw's winners are told their turn when the ranking is seated, with
// the draw's own pass lifetime; the waitlisted are not, and seating again
// (another instance, the same ranking) tells nobody twice.
func TestDrawWinnersAreToldTheirTurn(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	sink := &turnLog{}
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret, Turns: sink})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140052, BeginAt: now, EndAt: now.Add(time.Hour), Draw: true, PassTTL: 10 * time.Minute}
	ranking := []int64{31, 17, 58, 4, 99}
	seated, err := room.Seat(ctx, line, ranking, 2)
	require.NoError(t, err)
	require.True(t, seated.Now)
	_, err = waitroom.New(waitroom.Config{Redis: c, Secret: secret, Turns: sink}).Seat(ctx, line, ranking, 2)
	require.NoError(t, err)

	turns := sink.all()
	require.Len(t, turns, 2)
	require.ElementsMatch(t, []int64{31, 17}, []int64{turns[0].UserID, turns[1].UserID})
	for _, tn := range turns {
		require.Equal(t, line.VoucherID, tn.VoucherID)
		require.WithinDuration(t, seated.At.Add(10*time.Minute), tn.Until, time.Second)
	}
}
