package waitroom_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// sockets records the frames a feed hands to this instance's sockets.
type sockets struct {
	mu     sync.Mutex
	users  map[int64]bool
	frames map[int64][]got
}

type got struct {
	at time.Time
	q  api.Queue
}

func newSockets(users ...int64) *sockets {
	s := &sockets{users: map[int64]bool{}, frames: map[int64][]got{}}
	for _, u := range users {
		s.users[u] = true
	}
	return s
}

func (s *sockets) Connected(u int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.users[u]
}

func (s *sockets) Deliver(u int64, frame []byte) bool {
	var f api.Frame
	if err := json.Unmarshal(frame, &f); err != nil || f.Type != api.FrameQueue || f.Queue == nil {
		panic("not a queue frame: " + string(frame))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.users[u] {
		return false
	}
	s.frames[u] = append(s.frames[u], got{time.Now(), *f.Queue})
	return true
}

func (s *sockets) of(u int64) []got {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]got(nil), s.frames[u]...)
}

// runFeed starts a feed and an admitter of line until the test ends.
func runFeed(t *testing.T, room *waitroom.Room, out waitroom.Deliverer, target func() waitroom.Target) *waitroom.Feed {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	feed, err := waitroom.NewFeed(waitroom.FeedConfig{Room: room, Out: out, Flush: 50 * time.Millisecond})
	require.NoError(t, err)
	adm := waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: room, Targets: func(context.Context) ([]waitroom.Target, error) {
		return []waitroom.Target{target()}, nil
	}, Interval: 50 * time.Millisecond})
	var wg sync.WaitGroup
	wg.Go(func() { require.NoError(t, feed.Run(ctx)) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	<-feed.Ready() // the admitter's first moves are heard
	wg.Go(func() { _ = adm.Run(ctx) })
	return feed
}

// A shopper whose socket is on this instance is pushed their place as the
// line moves, at most once a second, then the pass at admission (a pass
// the room accepts); when the room closes, everyone still waiting is told.
// One admission step costs one message on the channel, however many wait.
func TestFeedPushesPlaceThenPass(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140020, BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour), AdmitPerSecond: 3}
	var mu sync.Mutex
	over := false
	var users []int64
	for u := int64(1); u <= 30; u++ {
		users = append(users, u)
	}
	out := newSockets(users...)
	feed := runFeed(t, room, out, func() waitroom.Target {
		mu.Lock()
		defer mu.Unlock()
		return waitroom.Target{Line: line, Passes: -1, Over: over}
	})
	// Joined in order on "another instance": the feed hears of it.
	for _, u := range users {
		st, err := room.Join(ctx, line, u)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateWaiting, st.State)
	}
	require.Eventually(t, func() bool {
		return len(out.of(3)) > 0 && waitroom.State(out.of(3)[len(out.of(3))-1].q.State) == waitroom.StateAdmitted
	},
		5*time.Second, 20*time.Millisecond, "user 3 is admitted within a second or so at 3 a second")
	frames := out.of(3)
	last := frames[len(frames)-1].q
	require.NotNil(t, last.Pass)
	require.Zero(t, last.Position)
	_, err := room.Claim(ctx, line.VoucherID, 3, *last.Pass, "")
	require.NoError(t, err, "the pushed pass is the room's")

	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	over = true
	mu.Unlock()
	require.Eventually(t, func() bool {
		f := out.of(30)
		return len(f) > 0 && waitroom.State(f[len(f)-1].q.State) == waitroom.StateClosed
	}, 5*time.Second, 20*time.Millisecond, "the last in line hears the room closed: %+v", out.of(30))

	for _, u := range users {
		f := out.of(u)
		for i := 1; i < len(f); i++ {
			require.GreaterOrEqual(t, f[i].at.Sub(f[i-1].at), 950*time.Millisecond, "user %d: at most a frame a second", u)
			if waitroom.State(f[i].q.State) == waitroom.StateWaiting {
				require.Less(t, f[i].q.Position, f[i-1].q.Position, "user %d: the place only moves forward", u)
				require.Equal(t, f[i].q.Position-1, f[i].q.Ahead)
			}
		}
	}
	// User 30 waited the whole time: the positions pushed are its real ones.
	for _, g := range out.of(30) {
		if waitroom.State(g.q.State) == waitroom.StateWaiting {
			require.Positive(t, g.q.ETASeconds)
		}
	}
	st := feed.Stats()
	t.Logf("feed: %+v", st)
	require.EqualValues(t, 30, st.Watches)
	require.Positive(t, st.Moves)
}

// Pre-queue places are drawn at begin_at: the feed reads its shoppers'
// final ranks once then, and pushes the positions the room gives.
func TestFeedPrequeueRanksAtBegin(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140021, BeginAt: now.Add(700 * time.Millisecond), EndAt: now.Add(time.Hour),
		AdmitPerSecond: 2, PrequeueSeconds: 60}
	users := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	out := newSockets(users...)
	feed := runFeed(t, room, out, func() waitroom.Target { return waitroom.Target{Line: line, Passes: -1} })
	for _, u := range users {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return feed.Stats().RankReads == int64(len(users)) }, 5*time.Second, 20*time.Millisecond)
	time.Sleep(1200 * time.Millisecond)
	for _, u := range users {
		f := out.of(u)
		require.NotEmpty(t, f, "user %d", u)
		q := f[len(f)-1].q
		st, err := room.Status(ctx, line, u)
		require.NoError(t, err)
		if waitroom.State(q.State) == waitroom.StateWaiting && st.State == waitroom.StateWaiting {
			// The pushed place is the room's, give or take the steps since.
			require.GreaterOrEqual(t, q.Position, st.Position, "user %d", u)
			require.LessOrEqual(t, q.Position-st.Position, int64(3), "user %d", u)
		}
	}
}
