package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// summarize turns the raw results of the crowd into the report's figures.
func (r *runner) summarize(rep *Report) {
	rep.Outcomes = make(map[Outcome]int)
	rep.Latency = make(map[string]LatencyStats)
	rep.Errors = make(map[string]int)
	if len(rep.Targets) > 1 {
		rep.ByTarget = make(map[string]map[Outcome]int)
	}
	byOutcome := make(map[Outcome][]time.Duration)
	var all []time.Duration
	first, last := time.Duration(math.MaxInt64), time.Duration(0)
	lastAccepted := time.Duration(0)
	firstAccept := make(map[string]time.Duration) // order id -> when its first 202's request was sent
	for i, res := range r.results {
		if !res.sent {
			continue
		}
		rep.Sent++
		if r.attempts[i].replayOf >= 0 {
			rep.ReplaysSent++
		}
		rep.Outcomes[res.outcome]++
		if len(rep.Targets) > 1 {
			t := rep.Targets[r.attempts[i].target]
			if rep.ByTarget[t] == nil {
				rep.ByTarget[t] = make(map[Outcome]int)
			}
			rep.ByTarget[t][res.outcome]++
		}
		byOutcome[res.outcome] = append(byOutcome[res.outcome], res.latency)
		all = append(all, res.latency)
		if res.outcome == OutcomeError {
			rep.Errors[res.detail]++
		}
		end := res.start + res.latency
		first, last = min(first, res.start), max(last, end)
		if res.outcome == OutcomeAccepted {
			// Only the first 202 of an order took stock: a replay's 202
			// after the sell-out is no sale.
			if e, ok := firstAccept[res.orderID]; !ok || res.start < e {
				firstAccept[res.orderID] = res.start
			}
		}
	}
	for _, sent := range firstAccept {
		lastAccepted = max(lastAccepted, sent)
	}
	if rep.Sent == 0 {
		return
	}
	for o, ds := range byOutcome {
		rep.Latency[string(o)] = latencyStats(ds)
	}
	rep.Latency["all"] = latencyStats(all)
	rep.ElapsedMS = ms(last - first)
	if last > first {
		rep.RequestsPerSecond = math.Round(float64(rep.Sent)/(last-first).Seconds()*10) / 10
	}
	// Sold out: the first sold_out answer that ended after the last sale's
	// request was sent. Its unit was reserved after that send, while its
	// 202 may come back much later (it waits for Kafka's acknowledgement,
	// which sold_out answers never do), so the 202's own arrival is no
	// bound. A sold_out that ended before that send can be a quantity-2 ask
	// against the last unit.
	soldOut := time.Duration(-1)
	for _, res := range r.results {
		if res.sent && res.outcome == OutcomeSoldOut {
			if end := res.start + res.latency; end >= lastAccepted && (soldOut < 0 || end < soldOut) {
				soldOut = end
			}
		}
	}
	if soldOut >= 0 {
		v := ms(soldOut)
		rep.SoldOutAfterMS = &v
	}
	r.timeline(rep, last)
}

// timeline buckets the results for the charts: about a hundred buckets of a
// round width.
func (r *runner) timeline(rep *Report, span time.Duration) {
	width := niceWidth(span / 100)
	n := int(span/width) + 1
	rep.BucketMS = ms(width)
	rep.Timeline = make([]Bucket, n)
	lat := make([][]time.Duration, n)
	for i := range rep.Timeline {
		rep.Timeline[i].AtMS = ms(time.Duration(i) * width)
	}
	for _, res := range r.results {
		if !res.sent {
			continue
		}
		s := min(n-1, max(0, int(res.start/width)))
		e := min(n-1, max(0, int((res.start+res.latency)/width)))
		rep.Timeline[s].Sent++
		lat[s] = append(lat[s], res.latency)
		b := &rep.Timeline[e]
		if b.Answers == nil {
			b.Answers = make(map[Outcome]int)
		}
		b.Answers[res.outcome]++
	}
	for i := range rep.Timeline {
		rep.Timeline[i].Latency = latencyStats(lat[i])
	}
}

// niceWidth rounds d up to 1, 2 or 5 times a power of ten, at least 1 ms.
func niceWidth(d time.Duration) time.Duration {
	for w := time.Millisecond; ; w *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if w*m >= d {
				return w * m
			}
		}
	}
}

// latencyStats takes nearest-rank percentiles of ds (which it sorts).
func latencyStats(ds []time.Duration) LatencyStats {
	if len(ds) == 0 {
		return LatencyStats{}
	}
	slices.Sort(ds)
	rank := func(p float64) time.Duration {
		return ds[max(0, int(math.Ceil(p*float64(len(ds))))-1)]
	}
	return LatencyStats{
		Count: len(ds),
		P50MS: ms(rank(0.50)),
		P90MS: ms(rank(0.90)),
		P99MS: ms(rank(0.99)),
		MaxMS: ms(ds[len(ds)-1]),
	}
}

// acceptance is one distinct order the system accepted.
type acceptance struct {
	orderID string
	shopper int
	qty     int64
	// sentAt and at are the local wall times when the first request that got
	// this order was sent and answered.
	sentAt, at time.Time
}

// acceptances lists the distinct accepted orders, each with its first 202.
func (r *runner) acceptances() []*acceptance {
	byID := make(map[string]*acceptance)
	var out []*acceptance
	for i, res := range r.results {
		if !res.sent || res.outcome != OutcomeAccepted {
			continue
		}
		at := r.openWall.Add(res.start + res.latency)
		if a, ok := byID[res.orderID]; ok {
			if at.Before(a.at) {
				a.at, a.sentAt = at, r.openWall.Add(res.start)
			}
			continue
		}
		a := &acceptance{
			orderID: res.orderID,
			shopper: r.attempts[i].shopper,
			qty:     r.attempts[i].qty,
			sentAt:  r.openWall.Add(res.start),
			at:      at,
		}
		byID[res.orderID] = a
		out = append(out, a)
	}
	return out
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, rep Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("json report: %w", err)
	}
	return nil
}

// fmtMS prints milliseconds with three significant figures.
func fmtMS(v float64) string {
	switch {
	case v >= 10_000:
		return fmt.Sprintf("%.1fs", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	}
	return fmt.Sprintf("%.2fms", v)
}

func sumOutcomes(m map[Outcome]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// WriteText writes the report as tables for a human.
func WriteText(w io.Writer, rep Report) error {
	var b strings.Builder
	kind := rep.Kind
	if rep.Shards > 0 {
		kind = fmt.Sprintf("%s, %d shards", kind, rep.Shards)
	}
	fmt.Fprintf(&b, "Flash sale against %s: voucher %s (%s), stock %d, limit %d per user, %d¢\n",
		rep.BaseURL, rep.VoucherID, kind, rep.Stock, rep.PerUserLimit, rep.PriceCents)
	if len(rep.Targets) > 1 {
		var parts []string
		for _, t := range rep.Targets {
			parts = append(parts, fmt.Sprintf("%s (%d accepted of %d)", t, rep.ByTarget[t][OutcomeAccepted], sumOutcomes(rep.ByTarget[t])))
		}
		fmt.Fprintf(&b, "Spread over %d gateways in turn: %s\n", len(rep.Targets), strings.Join(parts, ", "))
	}
	pace := "unpaced"
	if rep.TargetRate > 0 {
		pace = fmt.Sprintf("paced at %.0f/s", rep.TargetRate)
	}
	addrs := "each shopper an address of its own (X-Forwarded-For)"
	if !rep.ShopperAddresses {
		addrs = "every shopper the tool's own address"
	}
	fmt.Fprintf(&b, "Crowd: %d shoppers × %d attempts, concurrency %d, %s, quantities %s, replays %.0f%%, seed %d; %s\n",
		rep.Shoppers, rep.Attempts, rep.Concurrency, pace, rep.Quantities, rep.ReplayShare*100, rep.Seed, addrs)
	fmt.Fprintf(&b, "Clock: offset %+.1fms, %s (bracket %+.1fms..%+.1fms from %d Date samples)\n",
		rep.Clock.OffsetMS, rep.Clock.Method, rep.Clock.LowMS, rep.Clock.HighMS, rep.Clock.Samples)
	fmt.Fprintf(&b, "Opened %s (server clock); crowd released %s after; %d warm connections\n\n",
		rep.OpensAt.Format(time.RFC3339), fmtMS(rep.ReleaseLateMS), rep.WarmConnections)

	// Right-aligned figures; names padded to one width so they read left-aligned.
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-14s\tcount\tshare\tp50\tp90\tp99\tmax\t\n", "outcome")
	row := func(name string, n int) {
		l := rep.Latency[name]
		share := 0.0
		if rep.Sent > 0 {
			share = float64(n) / float64(rep.Sent) * 100
		}
		if n == 0 {
			fmt.Fprintf(tw, "%-14s\t0\t\t\t\t\t\t\n", name)
			return
		}
		fmt.Fprintf(tw, "%-14s\t%d\t%.1f%%\t%s\t%s\t%s\t%s\t\n", name, n, share,
			fmtMS(l.P50MS), fmtMS(l.P90MS), fmtMS(l.P99MS), fmtMS(l.MaxMS))
	}
	for _, o := range Outcomes() {
		row(string(o), rep.Outcomes[o])
	}
	row("all", rep.Sent)
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(&b, "\nSent %d of %d requests (%d replays) in %s: %.0f requests/s\n",
		rep.Sent, rep.Planned, rep.ReplaysSent, fmtMS(rep.ElapsedMS), rep.RequestsPerSecond)
	if rep.SoldOutAfterMS != nil {
		fmt.Fprintf(&b, "Sold out %s after the opening (first sold_out answer after the last accepted one)\n", fmtMS(*rep.SoldOutAfterMS))
	} else {
		fmt.Fprintln(&b, "Not sold out")
	}
	if len(rep.Errors) > 0 {
		fmt.Fprintf(&b, "Errors: %s\n", errorsTop(rep.Errors, 8))
	}
	p := rep.Persist
	fmt.Fprintf(&b, "Persistence: %d of %d accepted orders (%d units) persisted within %s",
		p.Persisted, p.Orders, rep.AcceptedUnits, fmtMS(p.WaitedMS))
	if p.Delay.Count > 0 {
		fmt.Fprintf(&b, "; 202 → created p50 %s, p99 %s, max %s (by %s)",
			fmtMS(p.Delay.P50MS), fmtMS(p.Delay.P99MS), fmtMS(p.Delay.MaxMS), p.Method)
	}
	fmt.Fprintln(&b)
	left := "unknown"
	if rep.StockLeft != nil {
		left = fmt.Sprint(*rep.StockLeft)
	}
	fmt.Fprintf(&b, "Sold %d of %d, stock_left %s\n", rep.Sold, rep.Stock, left)
	if rep.ReadWaits > 0 {
		fmt.Fprintf(&b, "The checks' own reads waited out %d refusals (429/503) as their Retry-After said\n", rep.ReadWaits)
	}
	b.WriteString("\n")

	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tresult\tdetail")
	for _, c := range rep.Checks {
		verdict := "ok"
		if !c.OK {
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, verdict, c.Detail)
		for _, pr := range c.Problems {
			fmt.Fprintf(tw, "\t\t  - %s\n", pr)
		}
		if more := c.ProblemCount - len(c.Problems); more > 0 {
			fmt.Fprintf(tw, "\t\t  - and %d more\n", more)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.Passed {
		fmt.Fprintln(&b, "\nPASSED: sold honestly")
	} else if len(rep.Checks) > 0 {
		fmt.Fprintln(&b, "\nFAILED: see the checks above")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
