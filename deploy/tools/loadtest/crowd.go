package loadtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// counters are what the progress line shows while the crowd runs.
type counters struct {
	sent    atomic.Int64
	answers [numOutcomes]atomic.Int64
}

func (c *counters) answered() int64 {
	var n int64
	for i := range c.answers {
		n += c.answers[i].Load()
	}
	return n
}

// prepare mints every token and builds every request before the opening, so
// the crowd's only work at the opening second is to send.
func (r *runner) prepare(ctx context.Context, tokenExp time.Time) error {
	cfg := r.cfg
	r.shoppers = make([]shopper, cfg.Shoppers)
	for i := range r.shoppers {
		uid := cfg.FirstUserID + int64(i)
		tok, err := mintToken(r.api.secret, uid, tokenExp)
		if err != nil {
			return err
		}
		r.shoppers[i] = shopper{userID: uid, uid: strconv.FormatInt(uid, 10), auth: "Bearer " + tok}
		if !cfg.OneAddress {
			r.shoppers[i].addr = shopperAddr(uid)
		}
	}

	// One buy URL per gateway; attempts take them in turn.
	var buyURLs []string
	for _, base := range cfg.bases() {
		u, err := url.Parse(base + "/api/v1/vouchers/" + url.PathEscape(r.voucher.ID) + "/orders")
		if err != nil {
			return fmt.Errorf("buy url: %w", err)
		}
		buyURLs = append(buyURLs, u.String())
	}
	// Rounds: everybody's first attempt, then everybody's second, each
	// round in a new random order. That is a crowd: all press at once, then
	// the unlucky press again.
	n := cfg.Shoppers * cfg.Attempts
	r.attempts = make([]attempt, 0, n)
	r.results = make([]result, n)
	byShopper := make([][]int, cfg.Shoppers) // attempt indexes per shopper, in rounds
	for round := range cfg.Attempts {
		for _, s := range r.rng.Perm(cfg.Shoppers) {
			a := attempt{shopper: s, round: round, replayOf: -1}
			if earlier := byShopper[s]; len(earlier) > 0 && r.rng.Float64() < cfg.ReplayShare {
				// A replay re-sends an earlier request as it was: a client
				// retrying after a lost answer.
				idx := earlier[r.rng.IntN(len(earlier))]
				orig := r.attempts[idx]
				if orig.replayOf >= 0 {
					idx = orig.replayOf // point at the first request with the key
				}
				a.qty, a.key, a.replayOf = orig.qty, orig.key, idx
			} else {
				a.qty = cfg.Quantities.pick(r.rng.Float64())
				a.key = fmt.Sprintf("lt-%s-%d-%d", r.voucher.ID, s, round)
			}
			a.target = len(r.attempts) % len(buyURLs)
			body := fmt.Appendf(nil, `{"quantity":%d}`, a.qty)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, buyURLs[a.target], bytes.NewReader(body))
			if err != nil {
				return fmt.Errorf("build request: %w", err)
			}
			req.Header.Set("Authorization", r.shoppers[s].auth)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", a.key)
			if from := r.shoppers[s].addr; from != "" {
				req.Header.Set(headerForwardedFor, from)
			}
			a.req = req
			byShopper[s] = append(byShopper[s], len(r.attempts))
			r.attempts = append(r.attempts, a)
		}
	}
	return nil
}

// warm opens n connections and leaves them idle in the pool: each request
// holds its connection until all have one, so none is reused and every
// worker finds its own connection at the opening.
func (r *runner) warm(ctx context.Context, n int) int {
	var (
		got    sync.WaitGroup
		wg     sync.WaitGroup
		ok     atomic.Int64
		allGot = make(chan struct{})
	)
	got.Add(n)
	go func() { got.Wait(); close(allGot) }()
	bases := r.cfg.bases()
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, bases[i%len(bases)]+"/healthz", nil)
			if err != nil {
				got.Done()
				return
			}
			resp, err := r.client.Do(req)
			got.Done()
			if err != nil {
				return
			}
			ok.Add(1)
			select {
			case <-allGot:
			case <-time.After(5 * time.Second):
			case <-ctx.Done():
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	return int(ok.Load())
}

// crowd waits for the opening and releases every worker at once. Workers
// take attempts in order until none is left, the duration cap passes or ctx
// ends. It returns how late after the opening the crowd was released.
func (r *runner) crowd(ctx context.Context) (time.Duration, error) {
	cfg := r.cfg
	n := len(r.attempts)
	workers := min(cfg.Concurrency, n)
	start := make(chan struct{})
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			<-start
			stopAt := r.openMono.Add(cfg.Duration)
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if cfg.Rate > 0 {
					at := r.openMono.Add(time.Duration(float64(i) / cfg.Rate * float64(time.Second)))
					if d := time.Until(at); d > 0 {
						t := time.NewTimer(d)
						select {
						case <-t.C:
						case <-ctx.Done():
							t.Stop()
							return
						}
					}
				}
				if !time.Now().Before(stopAt) {
					return
				}
				r.send(i)
			}
		})
	}

	stopProgress := r.progress(func(rate float64) string {
		if wait := time.Until(r.openWall); wait > 0 {
			return fmt.Sprintf("opening in %.1fs │ %d requests ready", wait.Seconds(), n)
		}
		c := &r.counts
		return fmt.Sprintf("sent %d/%d │ accepted %d  sold_out %d  limit %d  429 %d  503 %d  not_started %d  error %d │ %.0f/s",
			c.sent.Load(), n, c.answers[0].Load(), c.answers[1].Load(), c.answers[2].Load(),
			c.answers[3].Load(), c.answers[4].Load(), c.answers[5].Load(), c.answers[6].Load(), rate)
	}, r.counts.answered)

	// Sleep to just before the opening, then spin the last stretch: timers
	// may wake a little late, and a few microseconds of spinning are cheaper
	// than a crowd that starts a millisecond after the others would.
	wait := time.NewTimer(max(0, time.Until(r.openWall)-time.Millisecond))
	select {
	case <-wait.C:
	case <-ctx.Done():
		wait.Stop()
		close(start)
		wg.Wait()
		stopProgress()
		return 0, ctx.Err()
	}
	for time.Now().Before(r.openWall) {
	}
	now := time.Now()
	late := now.Round(0).Sub(r.openWall)
	r.openMono = now.Add(-late)
	close(start)
	wg.Wait()
	stopProgress()
	return late, ctx.Err()
}

// send makes attempt i and records what came back.
func (r *runner) send(i int) {
	a := &r.attempts[i]
	res := &r.results[i]
	t0 := time.Now()
	res.sent = true
	res.start = t0.Sub(r.openMono)
	r.counts.sent.Add(1)
	resp, err := r.client.Do(a.req)
	if err != nil {
		res.latency = time.Since(t0)
		res.outcome, res.detail = OutcomeError, shortError(err)
		r.counts.answers[res.outcome.index()].Add(1)
		return
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	res.latency = time.Since(t0)
	res.status = resp.StatusCode
	switch {
	case rerr != nil:
		res.outcome, res.detail = OutcomeError, shortError(rerr)
	default:
		res.outcome, res.orderID, res.detail = classify(resp.StatusCode, body)
	}
	r.counts.answers[res.outcome.index()].Add(1)
}

// classify maps an answer to an outcome, per the error table of gateway/openapi.yaml.
func classify(status int, body []byte) (Outcome, string, string) {
	switch {
	case status >= 200 && status <= 299:
		var b struct {
			OrderID string `json:"order_id"`
		}
		if err := json.Unmarshal(body, &b); err != nil || b.OrderID == "" {
			return OutcomeError, "", fmt.Sprintf("HTTP %d without an order_id", status)
		}
		return OutcomeAccepted, b.OrderID, ""
	case status == http.StatusTooManyRequests:
		return OutcomeRateLimited, "", ""
	case status == http.StatusServiceUnavailable:
		return OutcomeUnavailable, "", ""
	}
	code := decodeAPIError("", status, body).Code
	if status == http.StatusConflict {
		switch code {
		case "sold_out":
			return OutcomeSoldOut, "", ""
		case "limit_exceeded":
			return OutcomeLimitExceeded, "", ""
		case "not_started":
			return OutcomeNotStarted, "", ""
		}
	}
	return OutcomeError, "", fmt.Sprintf("HTTP %d %s", status, code)
}

// progress redraws line(rate) on stderr about five times a second, only on a
// terminal. done counts answers, for the rate. The returned stop draws the
// last line and ends it.
func (r *runner) progress(line func(rate float64) string, done func() int64) (stop func()) {
	if !r.tty {
		return func() {}
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		last, lastAt := done(), time.Now()
		draw := func() {
			now, d := time.Now(), done()
			rate := float64(d-last) / now.Sub(lastAt).Seconds()
			last, lastAt = d, now
			fmt.Fprintf(r.stderr, "\r\x1b[K%s", line(rate))
		}
		for {
			select {
			case <-t.C:
				draw()
			case <-quit:
				draw()
				fmt.Fprintln(r.stderr)
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

// keyOf names one attempt's idempotency scope: the user and the key.
func keyOf(s shopper, key string) string {
	return s.uid + "\x00" + key
}

// errorsTop renders the error details, most frequent first.
func errorsTop(m map[string]int, n int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(m[b], m[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for i, k := range keys {
		if i == n {
			parts = append(parts, fmt.Sprintf("%d more kinds", len(keys)-n))
			break
		}
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
