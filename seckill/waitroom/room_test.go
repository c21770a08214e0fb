package waitroom_test

import (
	"context"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/waitroom"
)

var secret = []byte("waitroom-test-secret")

// spearman is the rank correlation of a permutation with the identity.
func spearman(perm []int) float64 {
	n := float64(len(perm))
	var d2 float64
	for i, p := range perm {
		d := float64(i - p)
		d2 += d * d
	}
	return 1 - 6*d2/(n*(n*n-1))
}

// A pre-queue joined in order comes out in random order: the rank
// correlation of join order and place is what a random permutation gives
// (|rho| < 0.1, about 4.5 standard deviations for n = 2000; the places are
// HMACs of a fixed key, so the test is deterministic). Joining later, after
// begin_at, is first come first served, behind the whole pre-queue.
func TestPrequeueIsShuffledThenFirstComeFirstServed(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140001, BeginAt: now.Add(time.Hour), EndAt: now.Add(2 * time.Hour),
		AdmitPerSecond: 10, PrequeueSeconds: 7200}
	const n = 2000
	for u := int64(1); u <= n; u++ {
		st, err := room.Join(ctx, line, u)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateWaiting, st.State)
	}
	perm := make([]int, n)
	for u := int64(1); u <= n; u++ {
		st, err := room.Status(ctx, line, u)
		require.NoError(t, err)
		perm[u-1] = int(st.Rank)
		require.Equal(t, st.Rank+1, st.Position)
		require.Greater(t, st.ETA, 59*time.Minute, "the wait includes the time to begin_at")
	}
	rho := spearman(perm)
	t.Logf("pre-queue of %d joined in order: Spearman rho of join order vs place = %.4f", n, rho)
	require.Less(t, math.Abs(rho), 0.1)
	// The places are a permutation (one each) and not the identity.
	seen := append([]int(nil), perm...)
	sort.Ints(seen)
	for i, r := range seen {
		require.Equal(t, i, r)
	}

	// A line whose begin_at comes while shoppers keep joining: who joined
	// before it is shuffled, who joined after is in order behind them.
	now = redisNow(t, c)
	mixed := waitroom.Line{VoucherID: 140002, BeginAt: now.Add(300 * time.Millisecond),
		EndAt: now.Add(time.Hour), AdmitPerSecond: 1, PrequeueSeconds: 60}
	var users []int64
	for u := int64(1); len(users) < 50 || !redisNow(t, c).After(mixed.BeginAt.Add(50*time.Millisecond)); u++ {
		_, err := room.Join(ctx, mixed, u)
		require.NoError(t, err)
		users = append(users, u)
	}
	for u, more := users[len(users)-1]+1, len(users)+200; len(users) < more; u++ {
		_, err := room.Join(ctx, mixed, u)
		require.NoError(t, err)
		users = append(users, u)
	}
	var pre, post []int64 // ranks, by join order
	for _, u := range users {
		score, err := c.ZScore(ctx, "waitroom:{v140002}:line", strconv.FormatInt(u, 10)).Result()
		require.NoError(t, err)
		st, err := room.Status(ctx, mixed, u)
		require.NoError(t, err)
		if score < 1<<52 {
			require.Empty(t, post, "a pre-queue place after a place in order")
			pre = append(pre, st.Rank)
		} else {
			post = append(post, st.Rank)
		}
	}
	require.NotEmpty(t, post)
	for i, r := range post {
		require.Equal(t, int64(len(pre)+i), r, "after begin_at, places follow arrival")
	}
}

// One place per user: joining again, even many times at once from several
// instances, keeps the first place.
func TestOnePlacePerUser(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140003, BeginAt: now.Add(-time.Second), EndAt: now.Add(time.Hour), AdmitPerSecond: 5}
	rooms := []*waitroom.Room{waitroom.New(waitroom.Config{Redis: client(t), Secret: secret}), waitroom.New(waitroom.Config{Redis: client(t), Secret: secret}), waitroom.New(waitroom.Config{Redis: client(t), Secret: secret})}
	first, err := rooms[0].Join(ctx, line, 7)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := 0; g < 30; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for u := int64(1); u <= 20; u++ {
				st, err := rooms[g%3].Join(ctx, line, u)
				if err != nil {
					t.Error(err)
					return
				}
				if u == 7 && st.Rank != first.Rank {
					t.Errorf("user 7 moved from %d to %d by joining again", first.Rank, st.Rank)
				}
			}
		}(g)
	}
	wg.Wait()
	require.EqualValues(t, 20, c.ZCard(ctx, "waitroom:{v140003}:line").Val())
	again, err := rooms[1].Join(ctx, line, 7)
	require.NoError(t, err)
	require.Equal(t, first.Rank, again.Rank)
	require.Equal(t, int64(1), first.Position)

	_, err = rooms[0].Status(ctx, line, 999)
	require.ErrorIs(t, err, apperr.ErrNotFound)
	early := waitroom.Line{VoucherID: 140004, BeginAt: now.Add(time.Hour), EndAt: now.Add(2 * time.Hour),
		AdmitPerSecond: 5, PrequeueSeconds: 60}
	_, err = rooms[0].Join(ctx, early, 7)
	require.ErrorIs(t, err, seckill.ErrNotStarted, "the line opens prequeue_seconds before begin_at")
}

// Three instances each run the admission step on their own clock; together
// they admit the room's rate. The rate is measured on Redis's clock (the
// steps' own times), so it does not depend on how fast this machine is.
func TestAdmissionRateHeldAcrossThreeInstances(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	now := redisNow(t, c)
	const rate = 200
	line := waitroom.Line{VoucherID: 140005, BeginAt: now.Add(500 * time.Millisecond), EndAt: now.Add(time.Hour),
		AdmitPerSecond: rate, PrequeueSeconds: 60}
	joiner := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	for u := int64(1); u <= 1500; u++ {
		_, err := joiner.Join(ctx, line, u)
		require.NoError(t, err)
	}
	type sample struct {
		at   time.Time
		head int64
	}
	var mu sync.Mutex
	var samples []sample
	admitted := make([]int64, 3)
	stop := time.Now().Add(3500 * time.Millisecond)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			room := waitroom.New(waitroom.Config{Redis: client(t), Secret: secret})
			tick := time.NewTicker(time.Duration(40+15*i) * time.Millisecond)
			defer tick.Stop()
			for time.Now().Before(stop) {
				<-tick.C
				st, err := room.Admit(ctx, line, -1, 0)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				admitted[i] += st.Admitted
				if !st.At.Before(line.BeginAt) {
					samples = append(samples, sample{st.At, st.Head})
				}
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	sort.Slice(samples, func(i, j int) bool { return samples[i].at.Before(samples[j].at) })
	require.Greater(t, len(samples), 10)
	a, b := samples[0], samples[len(samples)-1]
	require.Greater(t, b.at.Sub(a.at), time.Second, "the steps span at least a second of Redis time")
	got := float64(b.head-a.head) / b.at.Sub(a.at).Seconds()
	t.Logf("admitted %d in %v of Redis time: %.1f/s (want %d/s); per instance %v", b.head-a.head, b.at.Sub(a.at), got, rate, admitted)
	require.InDelta(t, rate, got, rate*0.05)
	// Never more than the clock allows, at any step.
	for _, s := range samples {
		allowed := int64(s.at.Sub(line.BeginAt).Milliseconds() * rate / 1000)
		require.LessOrEqual(t, s.head, allowed+1)
	}
	// Every admission happened once: the instances' counts add up to the head.
	st, err := joiner.Stats(ctx, line.VoucherID)
	require.NoError(t, err)
	require.Equal(t, admitted[0]+admitted[1]+admitted[2], st.Admitted)
	require.Equal(t, st.Admitted, c.ZCard(ctx, "waitroom:{v140005}:passes").Val())
	require.Equal(t, 1500-st.Admitted, st.Waiting)
}

// The pass: signed, bound to user and voucher, single use; a claim whose buy
// never reached the stock can be given back.
func TestPass(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140006, BeginAt: now.Add(-2 * time.Second), EndAt: now.Add(time.Hour), AdmitPerSecond: 2}
	for u := int64(1); u <= 3; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	step, err := room.Admit(ctx, line, -1, 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, step.Admitted, "a room first stepped late gets one second of credit: two at two a second")
	a, err := room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, a.State)
	require.NotEmpty(t, a.Pass)
	require.WithinDuration(t, step.At.Add(waitroom.DefaultPassTTL), a.PassExpiresAt, time.Millisecond)
	w, err := room.Status(ctx, line, 3)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, w.State)
	require.Equal(t, int64(1), w.Position)
	require.Equal(t, 500*time.Millisecond, w.ETA)

	forged := a.Pass[:len(a.Pass)-2] + "xx"
	other := waitroom.New(waitroom.Config{Redis: c, Secret: []byte("another key")})
	for name, try := range map[string]func() error{
		"missing":      func() error { _, err := room.Claim(ctx, 140006, 1, "", ""); return err },
		"forged":       func() error { _, err := room.Claim(ctx, 140006, 1, forged, ""); return err },
		"other key":    func() error { _, err := other.Claim(ctx, 140006, 1, a.Pass, ""); return err },
		"borrowed":     func() error { _, err := room.Claim(ctx, 140006, 2, a.Pass, ""); return err },
		"other coupon": func() error { _, err := room.Claim(ctx, 140007, 1, a.Pass, ""); return err },
		"waiting user": func() error {
			_, err := room.Claim(ctx, 140006, 3, strings.Replace(a.Pass, ".1.", ".3.", 1), "")
			return err
		},
	} {
		require.ErrorIs(t, try(), seckill.ErrNotAdmitted, name)
	}
	p, err := room.Claim(ctx, 140006, 1, a.Pass, "")
	require.NoError(t, err)
	_, err = room.Claim(ctx, 140006, 1, a.Pass, "")
	require.ErrorIs(t, err, seckill.ErrNotAdmitted, "a pass is used once")
	used, err := room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.True(t, used.Used)
	require.Empty(t, used.Pass)
	require.NoError(t, room.Restore(ctx, p))
	_, err = room.Claim(ctx, 140006, 1, a.Pass, "key-1")
	require.NoError(t, err, "a restored pass is good again")
	_, err = room.Claim(ctx, 140006, 1, a.Pass, "key-1")
	require.NoError(t, err, "the retry of the same buy (same Idempotency-Key) goes on to replay its order")
	_, err = room.Claim(ctx, 140006, 1, a.Pass, "key-2")
	require.ErrorIs(t, err, seckill.ErrNotAdmitted, "another buy with a used pass")
	st, err := room.Stats(ctx, 140006)
	require.NoError(t, err)
	require.Equal(t, waitroom.Stats{Waiting: 1, Admitted: 2, PassesUsed: 1}, st)
}

// An admitted shopper who does not use the pass in time is expired, and the
// place goes to the next in line; closing the room closes everyone waiting.
func TestExpiryThenClose(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret, PassTTL: 300 * time.Millisecond})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140008, BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour), AdmitPerSecond: 100}
	for u := int64(1); u <= 5; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	// One pass out at a time (one unit of stock left, say).
	step, err := room.Admit(ctx, line, 1, 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, step.Admitted)
	first, err := room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, first.State)
	for deadline := time.Now().Add(10 * time.Second); step.Expired == 0; {
		require.True(t, time.Now().Before(deadline), "the pass never expired")
		time.Sleep(50 * time.Millisecond)
		step, err = room.Admit(ctx, line, 1, 0)
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, step.Admitted, "the expired place goes to the next")
	first, err = room.Status(ctx, line, 1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateExpired, first.State)
	_, err = room.Claim(ctx, 140008, 1, "p1.140008.1."+strconv.FormatInt(first.PassExpiresAt.UnixMilli(), 10)+".x", "")
	require.ErrorIs(t, err, seckill.ErrNotAdmitted)
	second, err := room.Status(ctx, line, 2)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, second.State)

	_, err = room.Close(ctx, line)
	require.NoError(t, err)
	for u := int64(3); u <= 5; u++ {
		st, err := room.Status(ctx, line, u)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateClosed, st.State)
	}
	late, err := room.Join(ctx, line, 6)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateClosed, late.State)
	step, err = room.Admit(ctx, line, -1, 0)
	require.NoError(t, err)
	require.True(t, step.Closed)
	require.Zero(t, step.Admitted)
	st, err := room.Stats(ctx, 140008)
	require.NoError(t, err)
	require.Equal(t, waitroom.Stats{Waiting: 0, Admitted: 2, Expired: 1}, st)
}
