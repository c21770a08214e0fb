package salereport

import (
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/seckill/seckill/api"
)

// botCodes are the refusals of the gates against automation: the limits,
// the captcha, the proof of work and the waiting room's pass.
var botCodes = []string{"rate_limited", "captcha_invalid", "challenge_invalid", "not_admitted"}

// Reports answers the operator's sale report and order export from the
// Store.
type Reports struct {
	store Store
}

// NewReports returns the reports over store.
func NewReports(store Store) *Reports { return &Reports{store: store} }

// Report reads voucherID's recorded figures and orders and sums them up.
// What it holds is bounded by the timeline's buckets (MaxTimeline), not by
// the span of seconds the figures cover.
func (r *Reports) Report(ctx context.Context, voucherID int64) (api.SaleReport, error) {
	of, err := r.store.SaleOrders(ctx, voucherID)
	if err != nil {
		return api.SaleReport{}, fmt.Errorf("sale report: %w", err)
	}
	b := newBuilder(voucherID, of)
	if err := r.store.SaleCounts(ctx, voucherID, b.sums, b.add); err != nil {
		return api.SaleReport{}, fmt.Errorf("sale report: %w", err)
	}
	return b.done(), nil
}

// ordersHeader is the export's first line (gateway/openapi.yaml).
var ordersHeader = []string{"order_id", "user_id", "quantity", "status", "reserved_at", "paid_at"}

// WriteOrdersCSV writes voucherID's orders to w as CSV, one row at a time
// as PostgreSQL sends them, so that no export sits in memory whole.
func (r *Reports) WriteOrdersCSV(ctx context.Context, voucherID int64, w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(ordersHeader); err != nil {
		return fmt.Errorf("orders export: %w", err)
	}
	row := make([]string, len(ordersHeader))
	err := r.store.EachSaleOrder(ctx, voucherID, func(o OrderRow) error {
		row[0] = strconv.FormatInt(o.ID, 10)
		row[1] = strconv.FormatInt(o.UserID, 10)
		row[2] = strconv.FormatInt(o.Quantity, 10)
		row[3] = o.Status
		row[4] = o.ReservedAt.UTC().Format(time.RFC3339Nano)
		row[5] = ""
		if o.PaidAt != nil {
			row[5] = o.PaidAt.UTC().Format(time.RFC3339Nano)
		}
		return cw.Write(row)
	})
	cw.Flush()
	if err == nil {
		err = cw.Error()
	}
	if err != nil {
		return fmt.Errorf("orders export: %w", err)
	}
	return nil
}

// MaxTimeline is the most elements a report's timeline has, whatever the
// span of its figures: a sale of up to an hour is drawn second by second, a
// longer span in wider buckets (bucketWidth). Refusals before any limit are
// recorded unthrottled, so one stray attempt a year after a sale would
// otherwise stretch the timeline over 31 million seconds.
const MaxTimeline = 3600

// bucketWidth is the timeline's bucket, in seconds, for figures from the
// second first to the second last whose widest count covers widest
// seconds: the narrowest of 1 s, 10 s, 1 min, 10 min, 1 h, 6 h, 1 day and
// 1 week (then ten times wider each step), and no narrower than widest,
// that covers them in at most MaxTimeline buckets. Buckets start on
// multiples of their width since the Unix epoch, and each width divides
// the next, so a wider bucket holds whole narrower ones, and whole
// rolled-up counts (RollUpWidth is one of the widths).
func bucketWidth(first, last, widest int64) int64 {
	steps := [...]int64{1, 10, 60, 600, RollUpWidth, 6 * 3600, 24 * 3600, 7 * 24 * 3600}
	var w int64
	for i := 0; ; i++ {
		if i < len(steps) {
			w = steps[i]
		} else {
			w *= 10
		}
		if w >= widest && floorDiv(last, w)-floorDiv(first, w) < MaxTimeline {
			return w
		}
	}
}

// floorDiv is a / b rounded down (b > 0), so that seconds before the epoch
// fall in their bucket too.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// Build sums a voucher's recorded figures (in any order) and its orders
// into its report, as Reports.Report does from the Store.
func Build(voucherID int64, list []Count, of OrderFigures) api.SaleReport {
	list = slices.Clone(list)
	slices.SortFunc(list, func(a, b Count) int {
		return cmp.Or(a.Second.Compare(b.Second), cmp.Compare(a.Name, b.Name))
	})
	byName := map[string]int{}
	var figs []Figure
	for _, c := range list {
		i, ok := byName[c.Name]
		if !ok {
			i = len(figs)
			byName[c.Name] = i
			figs = append(figs, Figure{Name: c.Name, First: c.Second})
		}
		figs[i].N += c.N
		figs[i].Last = c.Second
		figs[i].Width = max(figs[i].Width, c.Width)
	}
	b := newBuilder(voucherID, of)
	_ = b.sums(figs)
	for _, c := range list {
		_ = b.add(c)
	}
	return b.done()
}

// builder makes a report from the Store's reads: the sums of each figure
// give the totals and the timeline's buckets (sums), then each count is
// added to its bucket and to the walk along the line (add).
type builder struct {
	rep    api.SaleReport
	of     OrderFigures
	width  int64 // of a bucket, in seconds
	origin int64 // the first bucket's start, in widths since the epoch
	line   lineWalk
}

func newBuilder(voucherID int64, of OrderFigures) *builder {
	return &builder{of: of, width: 1, rep: api.SaleReport{
		VoucherID:     strconv.FormatInt(voucherID, 10),
		SoldOutAt:     of.SoldOutAt,
		Refusals:      map[string]int64{},
		Limiters:      map[string]int64{},
		Bought:        of.Bought,
		Paid:          of.Paid,
		Payments:      of.Payments,
		Refunds:       of.Refunds,
		LatePayments:  of.LatePayments,
		BucketSeconds: 1,
		Timeline:      []api.SaleSecond{},
	}}
}

// sums takes the sum of each figure: the report's totals, and the
// timeline's buckets from the first recorded second to the last.
func (b *builder) sums(figs []Figure) error {
	rep := &b.rep
	var first, last int64 = math.MaxInt64, math.MinInt64
	var widest int64 = 1
	for _, f := range figs {
		first, last = min(first, f.First.Unix()), max(last, f.Last.Unix())
		widest = max(widest, f.Width)
		switch name := f.Name; {
		case name == figAttempts:
			rep.Attempts = f.N
			t := f.First.UTC()
			rep.FirstBuyAt = &t
		case name == figAccepted:
			rep.Accepted = f.N
		case name == figReplayed:
			rep.Replayed = f.N
		case name == figAdmitted:
			rep.Admitted = f.N
		case name == figTimedOut:
			rep.TimedOut = f.N
		case name == figReturned:
			rep.Returned = f.N
		case strings.HasPrefix(name, prefixRefused):
			rep.Refusals[strings.TrimPrefix(name, prefixRefused)] += f.N
		case strings.HasPrefix(name, prefixLimiter):
			rep.Limiters[strings.TrimPrefix(name, prefixLimiter)] += f.N
		}
	}
	b.line = newLineWalk(rep.Admitted)
	if first > last {
		return nil
	}
	b.width = bucketWidth(first, last, widest)
	b.origin = floorDiv(first, b.width)
	rep.BucketSeconds = b.width
	rep.Timeline = make([]api.SaleSecond, floorDiv(last, b.width)-b.origin+1)
	for i := range rep.Timeline {
		rep.Timeline[i] = api.SaleSecond{T: time.Unix((b.origin+int64(i))*b.width, 0).UTC(), Refusals: map[string]int64{}}
	}
	return nil
}

// add adds one count to its bucket. A count outside the span sums gave
// cannot come from one snapshot; it is left out rather than trusted.
func (b *builder) add(c Count) error {
	s := c.Second.Unix()
	i := floorDiv(s, b.width) - b.origin
	if i < 0 || i >= int64(len(b.rep.Timeline)) {
		return nil
	}
	sec := &b.rep.Timeline[i]
	switch name := c.Name; {
	case name == figAttempts:
		sec.Attempts += c.N
	case name == figAccepted:
		sec.Accepted += c.N
	case name == figReplayed:
		sec.Replayed += c.N
	case name == figWaiting:
		sec.Waiting = max(sec.Waiting, c.N)
		b.line.add(s, 0, c.N)
	case name == figAdmitted:
		sec.Admitted += c.N
		b.line.add(s, c.N, 0)
	case name == figPaid:
		sec.Paid += c.N
	case name == figTimedOut:
		sec.TimedOut += c.N
	case name == figReturned:
		sec.Returned += c.N
	case strings.HasPrefix(name, prefixRefused):
		sec.Refusals[strings.TrimPrefix(name, prefixRefused)] += c.N
	}
	return nil
}

// done finishes the report once every count was added.
func (b *builder) done() api.SaleReport {
	rep := b.rep
	if rep.Bought > 0 {
		rep.Conversion = float64(rep.Paid) / float64(rep.Bought)
	}
	for _, code := range botCodes {
		rep.BotsRefused += rep.Refusals[code]
	}
	// Every unit held beyond the stock was a returned unit sold again.
	rep.Resold = min(max(b.of.UnitsHeld-b.of.StockTotal, 0), rep.Returned)
	rep.TimeInLine = b.line.percentiles()
	return rep
}

// lineWalk is the wait of the admitted, from the line's figures alone,
// walked in second order so that it keeps running sums, not the span: the
// line is first come, first served (the pre-queue's random places are all
// taken at the opening, where its waits begin), so the k-th shopper
// admitted is the k-th who entered. By the end of a second, the admitted so
// far plus the waiting have entered; the k-th admitted waited from the
// first second by whose end k had entered to the second that admitted them.
// A second without line figures changes neither sum, so only the seconds
// that have some are walked.
type lineWalk struct {
	// ks are the shoppers whose waits are the p50 and the p99; in and out
	// the seconds they entered and were admitted (found tells which are).
	ks, in, out    [2]int64
	foundIn, found [2]bool
	total          int64
	// sec is the second being summed, with its admitted and waiting.
	sec                  int64
	open                 bool
	secAdmitted, secWait int64
	admitted, entered    int64
}

func newLineWalk(total int64) lineWalk {
	w := lineWalk{total: total}
	for i, q := range [2]float64{0.50, 0.99} {
		w.ks[i] = max(int64(math.Ceil(q*float64(total))), 1)
	}
	return w
}

// add takes one line figure of second s, in second order.
func (w *lineWalk) add(s, admitted, waiting int64) {
	if w.open && s != w.sec {
		w.close()
	}
	w.sec, w.open = s, true
	w.secAdmitted += admitted
	w.secWait = max(w.secWait, waiting)
}

// close ends the second being summed.
func (w *lineWalk) close() {
	w.admitted += w.secAdmitted
	w.entered = max(w.entered, w.admitted+w.secWait)
	for i, k := range w.ks {
		if !w.foundIn[i] && w.entered >= k {
			w.in[i], w.foundIn[i] = w.sec, true
		}
		if !w.found[i] && w.admitted >= k {
			w.out[i], w.found[i] = w.sec, true
		}
	}
	w.secAdmitted, w.secWait, w.open = 0, 0, false
}

// percentiles are the p50 and p99 waits, in milliseconds.
func (w *lineWalk) percentiles() api.Percentiles {
	if w.open {
		w.close()
	}
	if w.total == 0 || !w.found[0] || !w.found[1] {
		return api.Percentiles{}
	}
	wait := func(i int) *int64 {
		ms := max(w.out[i]-w.in[i], 0) * 1000
		return &ms
	}
	return api.Percentiles{P50: wait(0), P99: wait(1)}
}
