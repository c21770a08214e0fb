package edge

import (
	"sync"
	"time"
)

// gcraSlack absorbs float rounding (in nanoseconds) so that the last request
// of a full burst is not refused because k·interval came out a hair above
// burst·interval.
const gcraSlack = 1.0

// localGCRA is the GCRA that redis_rate runs in Redis, run in memory instead:
// a theoretical arrival time (TAT) that every admitted request pushes one
// emission interval (1/rate) ahead, and a request is refused while admitting
// it would put the TAT more than burst intervals ahead of now. Over any
// window of t seconds it admits at most burst + rate·t. It holds one
// instance's share of the global limit, so it costs a mutex, not a round trip.
type localGCRA struct {
	epoch time.Time // times are float nanoseconds since epoch (monotonic)

	mu       sync.Mutex
	interval float64 // ns between two admissions at the steady rate
	offset   float64 // ns the TAT may run ahead of now: burst·interval
	tat      float64
}

// gcraResult is one decision of localGCRA.
type gcraResult struct {
	allowed bool
	// retryAfter is how long until a refused request would be admitted (0
	// when allowed).
	retryAfter time.Duration
	// resetAfter is how long until the limiter is fully rested (the whole
	// burst available again).
	resetAfter time.Duration
	// remaining is how many more requests would be admitted right now (0
	// when refused).
	remaining int
}

// newLocalGCRA returns a limiter of rate per second with a burst of burst
// (both positive; fractions are fine, burst should be at least 1).
func newLocalGCRA(rate, burst float64) *localGCRA {
	l := &localGCRA{epoch: time.Now()}
	l.set(rate, burst)
	return l
}

// set changes the rate and burst. The TAT is kept: a request admitted before
// still counts against the new share.
func (l *localGCRA) set(rate, burst float64) {
	interval := float64(time.Second) / rate
	l.mu.Lock()
	l.interval, l.offset = interval, burst*interval
	l.mu.Unlock()
}

// allow decides one request arriving at now.
func (l *localGCRA) allow(now time.Time) gcraResult {
	t := float64(now.Sub(l.epoch))
	l.mu.Lock()
	defer l.mu.Unlock()
	var res gcraResult
	l.tat, res = gcraStep(l.tat, t, l.interval, l.offset)
	return res
}

// gcraStep is one GCRA decision, without state of its own: given the stored
// theoretical arrival time tat and the arrival time t (float nanoseconds on
// one clock), the emission interval and the burst offset, it returns the new
// tat to store (unchanged on a refusal) and the decision. localGCRA keeps one
// tat; AddrLimit keeps one per client address.
func gcraStep(tat, t, interval, offset float64) (float64, gcraResult) {
	tat = max(tat, t)
	next := tat + interval
	if ahead := next - t; ahead > offset+gcraSlack {
		return tat, gcraResult{
			retryAfter: time.Duration(ahead - offset),
			resetAfter: time.Duration(tat - t),
		}
	}
	left := int((offset + gcraSlack - (next - t)) / interval)
	return next, gcraResult{allowed: true, resetAfter: time.Duration(next - t), remaining: max(left, 0)}
}
