package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/flashsale/seckill/seckill/pause"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// admitSample is one read of a room's figures (admin stats) during a run.
type admitSample struct {
	at                time.Time
	admitted, waiting int64
}

// The admission rate is checked only over a window this long holding at
// least this many admissions. The admitted count is a staircase (each
// admission step lets in what the room's clock allows, every
// waitroom.DefaultAdmitInterval per instance) and each sample's time is
// known only within its round trip, so each end of the window can be off by
// up to a quarter of a second's admissions on a busy machine: about 5% of a
// 10 s window. Over a shorter one the ratio says as much about the
// machine's timing as about the room's rate, and is reported as a figure.
const (
	rateMinWindow   = 10 * time.Second
	rateMinAdmitted = 1000
)

// admitRate is the admission rate as measured from the samples.
type admitRate struct {
	perSecond, ratio float64
	window           time.Duration
	admitted         int64
	checked          bool
	note             string
}

// admissionRate measures the slope of the admitted count while the line
// was long (someone waiting) and the stock not nearly gone (at most 80% of
// stock admitted: passes out are bounded by the stock left, so the end of a
// sale admits slower by design), and says whether the window is long enough
// for the ratio to target to be checked.
func admissionRate(samples []admitSample, stock, target int64) admitRate {
	var first, last *admitSample
	for i := range samples {
		s := &samples[i]
		if s.admitted == 0 || s.waiting == 0 || s.admitted > stock*8/10 {
			continue
		}
		if first == nil {
			first = s
		}
		last = s
	}
	var r admitRate
	if first == nil || last.at.Sub(first.at) <= time.Second {
		r.note = "fewer than two samples a second apart while the line was long"
		return r
	}
	r.window, r.admitted = last.at.Sub(first.at), last.admitted-first.admitted
	r.perSecond = float64(r.admitted) / r.window.Seconds()
	r.ratio = r.perSecond / float64(target)
	r.checked = r.window >= rateMinWindow && r.admitted >= rateMinAdmitted
	if !r.checked {
		r.note = fmt.Sprintf("measured over %.1f s and %d admissions; within 5%% needs at least %v and %d (more -stock, or a lower -room-rate)",
			r.window.Seconds(), r.admitted, rateMinWindow, rateMinAdmitted)
	}
	return r
}

// closeWait bounds how long a shopper left waiting may take to be told
// closed once the room closed. The close is one Redis step, so the answer
// should come at once; the bound keeps a busy machine's slow reads from
// counting as a wrong answer.
const closeWait = 10 * time.Second

// lineOver reports whether a shopper told state waits no more for the
// run: the stock is gone (sold_out: its holds are not paid, so no unit
// comes back before the end) or the room closed.
func lineOver(state waitroom.State) bool {
	return state == waitroom.StateSoldOut || state == waitroom.StateClosed
}

// sampleClosed reads again up to 1,000 of the shoppers in left whose last
// read said waiting, spread over the line, each until it is told sold_out
// or closed or closeWait passes, and counts the answers in rep. A shopper admitted after
// its last read and before the close answers admitted (or expired): it was
// not left waiting, and is counted apart.
func sampleClosed(ctx context.Context, api *apiClient, queuePath string, left []*roomShopper, rep *RoomReport) {
	var waiting []*roomShopper
	for _, s := range left {
		if s.state == waitroom.StateWaiting {
			waiting = append(waiting, s)
		}
	}
	step := max(1, len(waiting)/1000)
	var sample []*roomShopper
	for i := 0; i < len(waiting) && len(sample) < 1000; i += step {
		sample = append(sample, waiting[i])
	}
	deadline := time.Now().Add(closeWait)
	cctx, cancel := context.WithDeadline(ctx, deadline.Add(5*time.Second))
	defer cancel()
	var mu sync.Mutex
	next := make(chan *roomShopper)
	var wg sync.WaitGroup
	for range min(pollers, len(sample)) {
		wg.Go(func() {
			for s := range next {
				state := readUntilClosed(cctx, api, queuePath, s, deadline)
				mu.Lock()
				switch state {
				case waitroom.StateClosed, waitroom.StateSoldOut:
					rep.ClosedSampled++
					rep.ClosedSeen++
				case waitroom.StateWaiting:
					rep.ClosedSampled++
				case "":
					rep.ClosedSampled++
					rep.ClosedUnread++
				default:
					rep.ClosedAdmitted++
				}
				mu.Unlock()
			}
		})
	}
	for _, s := range sample {
		next <- s
	}
	close(next)
	wg.Wait()
}

// readUntilClosed reads s's place until it is anything but waiting, or
// deadline passes: the last state read ("" if none could be).
func readUntilClosed(ctx context.Context, api *apiClient, queuePath string, s *roomShopper, deadline time.Time) waitroom.State {
	var last waitroom.State
	for {
		status, body, err := api.raw(ctx, http.MethodGet, queuePath, map[string]string{"Authorization": "Bearer " + s.token}, nil)
		var q roomQueue
		if err == nil && status == http.StatusOK && json.Unmarshal(body, &q) == nil {
			last = waitroom.State(q.State)
			if last != waitroom.StateWaiting {
				return last
			}
		}
		if !time.Now().Before(deadline) || pause.For(ctx, 200*time.Millisecond) != nil {
			return last
		}
	}
}

// frameJitter is how much sooner than one a second a socket's frames may
// arrive. The gateway hands a socket at most one frame a second, but the
// tool sees when they arrive: each frame's delivery takes its own time (a
// write queued behind others, a busy machine's scheduling), so two frames
// handed a second apart may arrive 750 ms apart, and the shortest gap is a
// figure of the machine as much as of the feed. A feed that did not space
// its frames sends one at each flush (200 ms) while the line moves: k
// frames in about k/5 s, a bunch of seconds, not of a fraction of one.
const frameJitter = time.Second

// frameBunch is the most that any run of frames arrived sooner than one
// every gap: the largest (j-i)*gap - (at_j - at_i) over i < j, 0 if none.
// Frames handed a gap apart and delivered with delays that differ by at
// most d have a bunch of at most d, however many there are.
func frameBunch(frames []roomFrame, gap time.Duration) time.Duration {
	var worst time.Duration
	// (j*gap - at_j) - (i*gap - at_i): keep the least of the second term.
	var least time.Duration
	for j, f := range frames {
		v := time.Duration(j)*gap - f.at.Sub(frames[0].at)
		if j > 0 {
			worst = max(worst, v-least)
		}
		if j == 0 || v < least {
			least = v
		}
	}
	return worst
}

// A shopper without a socket reads its place again when its estimated
// wait says so (80% of it, to be early), but at least every maxPollGap, as
// a page would; a buy gets buyTries tries in all.
const (
	maxPollGap = time.Minute
	buyTries   = 3
)
