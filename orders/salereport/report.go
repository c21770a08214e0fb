package salereport

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/seckill/seckill/api"
)

// botCodes are the refusals of the gates against automation: the limits,
// the captcha and the waiting room's pass.
var botCodes = []string{"rate_limited", "captcha_invalid", "not_admitted"}

// Reports answers the operator's sale report and order export from the
// Store.
type Reports struct {
	store Store
}

// NewReports returns the reports over store.
func NewReports(store Store) *Reports { return &Reports{store: store} }

// Report reads voucherID's recorded figures and orders and sums them up.
func (r *Reports) Report(ctx context.Context, voucherID int64) (api.SaleReport, error) {
	of, err := r.store.SaleOrders(ctx, voucherID)
	if err != nil {
		return api.SaleReport{}, fmt.Errorf("sale report: %w", err)
	}
	list, err := r.store.SaleCounts(ctx, voucherID)
	if err != nil {
		return api.SaleReport{}, fmt.Errorf("sale report: %w", err)
	}
	return Build(voucherID, list, of), nil
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

// Build sums a voucher's recorded figures (in any order) and its orders
// into its report.
func Build(voucherID int64, list []Count, of OrderFigures) api.SaleReport {
	rep := api.SaleReport{
		VoucherID: strconv.FormatInt(voucherID, 10),
		SoldOutAt: of.SoldOutAt,
		Refusals:  map[string]int64{},
		Limiters:  map[string]int64{},
		Bought:    of.Bought,
		Paid:      of.Paid,
		Timeline:  []api.SaleSecond{},
	}
	if of.Bought > 0 {
		rep.Conversion = float64(of.Paid) / float64(of.Bought)
	}
	var first, last int64 = math.MaxInt64, math.MinInt64
	for _, c := range list {
		s := c.Second.Unix()
		first, last = min(first, s), max(last, s)
	}
	if first <= last {
		rep.Timeline = make([]api.SaleSecond, last-first+1)
		for i := range rep.Timeline {
			rep.Timeline[i] = api.SaleSecond{T: time.Unix(first+int64(i), 0).UTC(), Refusals: map[string]int64{}}
		}
	}
	for _, c := range list {
		sec := &rep.Timeline[c.Second.Unix()-first]
		switch name := c.Name; {
		case name == figAttempts:
			sec.Attempts += c.N
			rep.Attempts += c.N
		case name == figAccepted:
			sec.Accepted += c.N
			rep.Accepted += c.N
		case name == figReplayed:
			sec.Replayed += c.N
			rep.Replayed += c.N
		case name == figWaiting:
			sec.Waiting = max(sec.Waiting, c.N)
		case name == figAdmitted:
			sec.Admitted += c.N
			rep.Admitted += c.N
		case name == figPaid:
			sec.Paid += c.N
		case name == figTimedOut:
			sec.TimedOut += c.N
			rep.TimedOut += c.N
		case name == figReturned:
			sec.Returned += c.N
			rep.Returned += c.N
		case strings.HasPrefix(name, prefixRefused):
			code := strings.TrimPrefix(name, prefixRefused)
			sec.Refusals[code] += c.N
			rep.Refusals[code] += c.N
		case strings.HasPrefix(name, prefixLimiter):
			rep.Limiters[strings.TrimPrefix(name, prefixLimiter)] += c.N
		}
	}
	for i := range rep.Timeline {
		if rep.Timeline[i].Attempts > 0 {
			t := rep.Timeline[i].T
			rep.FirstBuyAt = &t
			break
		}
	}
	for _, code := range botCodes {
		rep.BotsRefused += rep.Refusals[code]
	}
	// Every unit held beyond the stock was a returned unit sold again.
	rep.Resold = min(max(of.UnitsHeld-of.StockTotal, 0), rep.Returned)
	rep.TimeInLine = timeInLine(rep.Timeline)
	return rep
}

// timeInLine is the wait of the admitted, from the line's figures alone:
// the line is first come, first served (the pre-queue's random places are
// all taken at the opening, where its waits begin), so the k-th shopper
// admitted is the k-th who entered. By the end of a second, the admitted
// so far plus the waiting have entered; the k-th admitted waited from the
// first second by whose end k had entered to the second that admitted
// them.
func timeInLine(tl []api.SaleSecond) api.Percentiles {
	var admitted int64
	entered := make([]int64, len(tl))
	done := make([]int64, len(tl))
	for i, s := range tl {
		admitted += s.Admitted
		done[i] = admitted
		entered[i] = admitted + s.Waiting
		if i > 0 {
			entered[i] = max(entered[i], entered[i-1])
		}
	}
	if admitted == 0 {
		return api.Percentiles{}
	}
	wait := func(q float64) *int64 {
		k := max(int64(math.Ceil(q*float64(admitted))), 1)
		in, out := firstReaching(entered, k), firstReaching(done, k)
		ms := int64(max(out-in, 0)) * 1000
		return &ms
	}
	return api.Percentiles{P50: wait(0.50), P99: wait(0.99)}
}

// firstReaching is the first index where the non-decreasing cum reaches k
// (len(cum) when none does).
func firstReaching(cum []int64, k int64) int {
	lo, hi := 0, len(cum)
	for lo < hi {
		m := (lo + hi) / 2
		if cum[m] >= k {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}
