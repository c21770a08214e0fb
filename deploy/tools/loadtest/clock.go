package loadtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/flashsale/seckill/seckill/apperr"
)

// ClockSync is what the tool learned about the server's clock from the Date
// headers of GET /healthz. The sale window is checked with the server's
// clock, so the crowd must be released by it, not by the local one.
type ClockSync struct {
	// OffsetMS is server time minus local time, as used to release the crowd.
	OffsetMS float64 `json:"offset_ms"`
	// LowMS and HighMS bound the real offset as far as the Date headers tell.
	LowMS  float64 `json:"low_ms"`
	HighMS float64 `json:"high_ms"`
	// Samples is how many answers were looked at.
	Samples int `json:"samples"`
	// Method says how OffsetMS was chosen.
	Method string `json:"method"`
}

// dateSpan is how far a Date header may trail the server's real time: one
// second of resolution, plus one second because some servers (fasthttp, under
// Fiber) refresh a cached Date only once a second.
const dateSpan = 2 * time.Second

// The ways an offset is chosen.
const (
	clockLocal  = "local clock (agrees with the server's Date headers)"
	clockServer = "server clock from a Date tick (never early, up to 1s late)"
	clockNoDate = "local clock (the server sends no Date header)"
)

// syncClock polls GET /healthz until the server's Date header ticks to the
// next second, and so brackets the server clock. Each answer dated D that was
// asked at local s and received at local r says the offset o (server − local)
// lies in [D−r, D+dateSpan−s); seeing the tick makes the bracket about one
// second wide. When the local clock fits the bracket (same host, or NTP), it
// is used as is, exact to the millisecond; otherwise the lower bound, which
// can release late but never early.
func syncClock(ctx context.Context, c *http.Client, base string) (time.Duration, ClockSync, error) {
	const budget = 2500 * time.Millisecond
	var (
		info     ClockSync
		lo, hi   time.Duration
		prevDate time.Time
		end      = time.Now().Add(budget)
	)
	for time.Now().Before(end) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
		if err != nil {
			return 0, info, fmt.Errorf("clock: %w", err)
		}
		s := time.Now()
		resp, err := c.Do(req)
		r := time.Now()
		if err != nil {
			return 0, info, fmt.Errorf("clock: GET /healthz: %w: %w", apperr.ErrUnavailable, err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, info, fmt.Errorf("clock: GET /healthz: HTTP %d: %w", resp.StatusCode, apperr.ErrUnavailable)
		}
		d, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil {
			info.Method = clockNoDate
			return 0, info, nil
		}
		info.Samples++
		// Wall-clock differences: d carries no monotonic reading, so Sub
		// compares wall times, which is what an offset is.
		l, h := d.Sub(r), d.Add(dateSpan).Sub(s)
		if info.Samples == 1 {
			lo, hi = l, h
		} else {
			lo, hi = max(lo, l), min(hi, h)
		}
		ticked := info.Samples > 1 && d.After(prevDate)
		prevDate = d
		if ticked {
			break
		}
		select {
		case <-ctx.Done():
			return 0, info, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	info.LowMS, info.HighMS = ms(lo), ms(hi)
	if lo <= 0 && 0 < hi {
		info.Method = clockLocal
		return 0, info, nil
	}
	info.Method = clockServer
	info.OffsetMS = ms(lo)
	return lo, info, nil
}

// ms is a duration in milliseconds with microsecond precision, the unit of
// every figure in the report.
func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// wholeSecondUp rounds t up to a whole second: a sale opens on one, like a
// countdown on a shop page.
func wholeSecondUp(t time.Time) time.Time {
	if w := t.Truncate(time.Second); !w.Equal(t) {
		return w.Add(time.Second)
	}
	return t
}
