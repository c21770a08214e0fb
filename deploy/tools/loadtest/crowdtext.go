package loadtest

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// The real crowd's targets: the catalog list at least this share of
// GET /healthz's rate, fewer PostgreSQL transactions than this share of the
// catalog reads, honest shoppers answered with anything but 429 at least
// this often under the bots.
const (
	TargetListShare    = 0.60
	TargetCatalogXacts = 0.01
	TargetHonestShare  = 0.95
)

// WriteCrowdText writes the crowd's report as a table of figures, each with
// its target and verdict where it has one, then the notes.
func WriteCrowdText(w io.Writer, rep CrowdReport) error {
	var b strings.Builder
	addrs := "one loopback address per client"
	if !rep.SourceAddresses {
		addrs = "every client from one address"
	}
	fmt.Fprintf(&b, "Crowd against %s: %d vouchers listed, %d connections, %s, seed %d\n\n",
		rep.BaseURL, rep.CatalogVouchers, rep.Healthz.Concurrency, addrs, rep.Seed)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\tratio\ttarget\tverdict")
	verdict := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "MISSED"
	}
	h := rep.Healthz
	fmt.Fprintf(tw, "GET /healthz\t%.0f/s (%d requests, p50 %s p99 %s)\t\t\t\n",
		h.ServedPerSecond, h.Requests, fmtMS(h.Latency.P50MS), fmtMS(h.Latency.P99MS))
	for _, r := range []struct {
		name   string
		run    PathRun
		share  float64
		target bool
	}{{"GET /api/v1/vouchers", rep.List, rep.ListShare, true}, {"GET /api/v1/vouchers/{id}", rep.Single, rep.SingleShare, false}} {
		t, v := "", ""
		if r.target {
			t, v = "≥ "+pct(TargetListShare), verdict(r.share >= TargetListShare)
		}
		fmt.Fprintf(tw, "%s\t%.0f/s (%d requests: 200 ×%d, 304 ×%d, 429 ×%d; p50 %s p99 %s)\t%s of /healthz\t%s\t%s\n",
			r.name, r.run.ServedPerSecond, r.run.Requests, r.run.OK, r.run.NotModified, r.run.RateLimited,
			fmtMS(r.run.Latency.P50MS), fmtMS(r.run.Latency.P99MS), pct(r.share), t, v)
	}
	pg := rep.Postgres
	if pg.Error == "" {
		fmt.Fprintf(tw, "PostgreSQL transactions, catalog\t%d during %d catalog reads and %s of settling (at rest: %d in %s, so about %.0f of them)\t%s of the reads\t< %s\t%s\n",
			pg.CatalogXacts, pg.CatalogReads, fmtMS(pg.SettleMS), pg.AtRest, fmtMS(pg.AtRestMS), pg.CatalogBackground,
			pct(pg.CatalogShare), pct(TargetCatalogXacts), verdict(pg.CatalogShare < TargetCatalogXacts))
		fmt.Fprintf(tw, "PostgreSQL transactions, sale\t%d (%.0f/s over the crowd's %s)\t\t\t\n",
			pg.SaleXacts, pg.SaleXactsPerSecond, fmtMS(rep.Sale.CrowdForMS))
	} else {
		fmt.Fprintf(tw, "PostgreSQL transactions\tnot counted\t\t< %s\t\n", pct(TargetCatalogXacts))
	}
	s := rep.Sale
	fmt.Fprintf(tw, "honest shoppers answered, not 429\t%d of %d (%s; retries %d; p50 %s p99 %s)\t%s\t≥ %s\t%s\n",
		s.HonestNot429, s.Buyers, outcomeList(s.Honest), s.HonestRetries,
		fmtMS(s.HonestLatency.P50MS), fmtMS(s.HonestLatency.P99MS), pct(s.HonestShare), pct(TargetHonestShare),
		verdict(s.HonestShare >= TargetHonestShare))
	fmt.Fprintf(tw, "bots\t%d × %d connections: %d buys (%.0f/s; %s)\t\t\t\n",
		s.Bots, s.BotConns, s.BotSent, s.BotPerSecond, outcomeList(s.Bot))
	soldOut := "not sold out"
	if s.SoldOutAfterMS != nil {
		soldOut = "sold out " + fmtMS(*s.SoldOutAfterMS) + " after the opening"
	}
	fmt.Fprintf(tw, "sale\tvoucher %s: %d of %d units accepted, %s\t\t≤ stock\t%s\n",
		s.VoucherID, s.AcceptedUnits, s.Stock, soldOut, verdict(s.AcceptedUnits <= s.Stock))
	so := rep.Sockets
	how := "anonymous"
	if so.WithTokens {
		how = "with visitor tokens"
	}
	fmt.Fprintf(tw, "sockets\t%d open of %d (%s), %d closed by the server; %d messages, %d about vouchers, %d about the sale\t\t\t\n",
		so.Open, so.Asked, how, so.ClosedByServer, so.Messages, so.VoucherMessages, so.SaleMessages)
	if so.SaleMessages > 0 {
		d := so.PushDelay
		fmt.Fprintf(tw, "push delay 202 → stock_left\tp50 %s p99 %s max %s over %d (buy, socket) pairs, %d never pushed\t\t\t\n",
			fmtMS(d.P50MS), fmtMS(d.P99MS), fmtMS(d.MaxMS), d.Count, so.PushMissed)
		if so.SellOut != nil {
			d := so.SellOut.Delay
			fmt.Fprintf(tw, "push delay sell-out → stock_left 0\tp50 %s p99 %s max %s, seen by %d of %d sockets\t\t\t\n",
				fmtMS(d.P50MS), fmtMS(d.P99MS), fmtMS(d.MaxMS), so.SellOut.Seen, so.Open)
		}
	} else {
		fmt.Fprintf(tw, "push delay\tno voucher pushes received\t\t\t\n")
	}
	v := rep.Visitors
	if v.Concurrency > 0 {
		fmt.Fprintf(tw, "catalog during the sale\t%.0f/s on %d pages (200 ×%d, 304 ×%d, 429 ×%d)\t\t\t\n",
			v.ServedPerSecond, v.Concurrency, v.OK, v.NotModified, v.RateLimited)
	}
	fmt.Fprintf(tw, "5xx answers\t%d\t\t0\t%s\n", rep.FiveXX, verdict(rep.FiveXX == 0))
	if err := tw.Flush(); err != nil {
		return err
	}
	errs := map[string]int{}
	for _, r := range []PathRun{rep.Healthz, rep.List, rep.Single, rep.Visitors} {
		for k, n := range r.ErrorKinds {
			errs[r.Path+": "+k] += n
		}
	}
	for k, n := range s.HonestErrors {
		errs["honest buy: "+k] += n
	}
	if len(errs) > 0 {
		fmt.Fprintf(&b, "\nErrors: %s\n", errorsTop(errs, 8))
	}
	if len(so.Refused) > 0 {
		fmt.Fprintf(&b, "Sockets refused: %s\n", errorsTop(so.Refused, 4))
	}
	if rep.List.CacheControl != "" {
		fmt.Fprintf(&b, "Catalog Cache-Control: %s\n", rep.List.CacheControl)
	}
	if pg.Source != "" {
		fmt.Fprintf(&b, "PostgreSQL counted from pg_stat_database via %s, each window read %s after its work\n", pg.Source, fmtMS(pg.SettleMS))
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "Note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// outcomeList renders outcome counts in report order, leaving out zeros.
func outcomeList(m map[Outcome]int) string {
	var parts []string
	for _, o := range Outcomes() {
		if n := m[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s ×%d", o, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
