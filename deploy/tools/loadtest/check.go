package loadtest

// The checks after a run: waiting until every accepted order is persisted,
// then the invariants in one list, each a few lines, read top to bottom;
// split, the list would no longer show every rule in one place.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Order statuses of the HTTP contract (gateway/openapi.yaml).
const (
	statusReserved  = "reserved"
	statusCreated   = "created"
	statusPaid      = "paid"
	statusCancelled = "cancelled"
	statusFailed    = "failed"
)

// pollers bounds the requests in flight while the tool polls and checks:
// enough to be quick, few enough not to be a second load test.
const pollers = 16

// observation is the last word of the system on one accepted order.
type observation struct {
	order apiOrder
	ok    bool   // a 200 was seen
	err   string // the last failure, when not ok
	seen  time.Time
}

// stockLeftWait bounds how long the check reads the public voucher for its
// stock_left to agree with what was sold. That read is the gateway's
// catalog, a copy of the live stock refreshed every 100 ms (seckill.Catalog's
// StockEvery), later on a loaded machine, while the check comes a few
// milliseconds after the last order is persisted. A copy that lags is read
// again until it catches up; one still wrong after stockLeftWait, twenty
// refreshes and more, is a wrong figure, not a late one.
const stockLeftWait = 3 * time.Second

// awaitStockLeft reads voucher vid until its stock_left is want, or
// stockLeftWait has passed, and returns the last read and how long it
// waited.
func (r *runner) awaitStockLeft(ctx context.Context, vid string, want int64) (apiVoucher, time.Duration, error) {
	begin := time.Now()
	for {
		v, err := r.api.voucher(ctx, vid)
		waited := time.Since(begin)
		if err != nil || v.StockLeft == want || waited >= stockLeftWait {
			return v, waited, err
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return v, waited, fmt.Errorf("loadtest: reading the voucher's stock_left: %w", ctx.Err())
		}
	}
}

// maxProblems caps what a check lists; the count says the rest.
const maxProblems = 10

// awaitPersisted polls every accepted order as its shopper until it is no
// longer reserved, or PersistWait passes. Polling is the test's instrument,
// not the product's way: shoppers get pushes over the WebSocket.
func (r *runner) awaitPersisted(ctx context.Context, acc []*acceptance) (map[string]*observation, PersistReport) {
	rep := PersistReport{Orders: len(acc), ByStatus: make(map[string]int)}
	obs := make(map[string]*observation, len(acc))
	for _, a := range acc {
		obs[a.orderID] = &observation{err: "never answered"}
	}
	pending := acc
	begin := time.Now()
	deadline := begin.Add(r.cfg.PersistWait)
	var persisted atomic.Int64
	stop := r.progress(func(float64) string {
		return fmt.Sprintf("persisted %d/%d │ %.1fs", persisted.Load(), len(acc), time.Since(begin).Seconds())
	}, persisted.Load)
	for len(pending) > 0 && ctx.Err() == nil {
		var (
			mu   sync.Mutex
			next []*acceptance
		)
		r.each(ctx, len(pending), func(i int) {
			a := pending[i]
			o, err := r.api.order(ctx, r.shoppers[a.shopper], a.orderID)
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			ob := obs[a.orderID]
			if err != nil {
				ob.ok, ob.err = false, err.Error()
				next = append(next, a)
				return
			}
			ob.ok, ob.err, ob.order = true, "", o
			if o.Status == statusReserved {
				next = append(next, a)
				return
			}
			ob.seen = now
			persisted.Add(1)
		})
		pending = next
		if len(pending) == 0 || !time.Now().Before(deadline) {
			break
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	stop()
	rep.WaitedMS = ms(time.Since(begin))

	var (
		delays              []time.Duration
		byCreated, bySeen   int
		trustServerCreateAt = r.clockTrusted()
	)
	for _, a := range acc {
		ob := obs[a.orderID]
		switch {
		case !ob.ok:
			rep.ByStatus["unanswered"]++
			continue
		case ob.order.Status == statusReserved:
			rep.StillReserved++
		default:
			rep.Persisted++
		}
		rep.ByStatus[ob.order.Status]++
		if st := ob.order.Status; st != statusCreated && st != statusPaid {
			continue
		}
		// created_at is the server's persist time: the best figure when the
		// clocks agree and it is plausible (not before the request was even
		// sent, which means it records something else, like the reservation).
		if c := ob.order.CreatedAt.Time; trustServerCreateAt && !c.IsZero() {
			if local := c.Add(-r.offset); !local.Before(a.sentAt) {
				delays = append(delays, max(0, local.Sub(a.at)))
				byCreated++
				continue
			}
		}
		// A pause before the polling is not the system's delay.
		delays = append(delays, max(0, ob.seen.Sub(a.at)-r.paused))
		bySeen++
	}
	rep.Delay = latencyStats(delays)
	switch {
	case byCreated > 0 && bySeen > 0:
		rep.Method = fmt.Sprintf("created_at for %d, first seen for %d", byCreated, bySeen)
	case byCreated > 0:
		rep.Method = "created_at"
	case bySeen > 0:
		rep.Method = "first seen (polling every 50ms)"
	}
	return obs, rep
}

// clockTrusted reports whether server timestamps can be compared with local
// ones to the millisecond: only when the local clock agreed with the server's
// Date headers. An offset learned from a Date tick may be a second off.
func (r *runner) clockTrusted() bool {
	return r.clockMethod == clockLocal
}

// each runs f(0..n-1) on at most pollers goroutines.
func (r *runner) each(ctx context.Context, n int, f func(i int)) {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range min(pollers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// problems collects a check's problems, keeping the first few and counting
// the rest.
type problems struct {
	list  []string
	total int
}

func (p *problems) add(format string, args ...any) {
	p.total++
	if len(p.list) < maxProblems {
		p.list = append(p.list, fmt.Sprintf(format, args...))
	}
}

func (p *problems) check(name, okDetail, failDetail string) Check {
	c := Check{Name: name, OK: p.total == 0, Detail: okDetail, Problems: p.list, ProblemCount: p.total}
	if !c.OK {
		c.Detail = failDetail
	}
	return c
}

// check reads what the system says it sold and judges every invariant. It
// returns an *InvariantError naming each failed check.
func (r *runner) check(ctx context.Context, rep *Report, acc []*acceptance, obs map[string]*observation) error {
	vid := r.voucher.ID

	// Every shopper's own list, filtered to this voucher: where an order the
	// tool never heard of, or one twice, would show.
	lists := make([][]apiOrder, len(r.shoppers))
	listErrs := make([]error, len(r.shoppers))
	r.each(ctx, len(r.shoppers), func(i int) {
		all, err := r.api.orders(ctx, r.shoppers[i])
		listErrs[i] = err
		for _, o := range all {
			if o.VoucherID == vid {
				lists[i] = append(lists[i], o)
			}
		}
	})
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("loadtest: checking: %w", err)
	}

	// Everything known about this voucher's orders: the lists (read last)
	// over the polled answers.
	orders := make(map[string]apiOrder)
	for _, a := range acc {
		if ob := obs[a.orderID]; ob.ok {
			orders[a.orderID] = ob.order
		}
	}
	for _, l := range lists {
		for _, o := range l {
			orders[o.OrderID] = o
		}
	}
	var (
		sold, held   int64
		statusCount  = make(map[string]int64)
		holdsByUser  = make(map[string]int64)
		acceptByUser = make(map[string]int64)
	)
	for _, o := range orders {
		statusCount[o.Status]++
		switch o.Status {
		case statusCreated, statusPaid:
			sold += o.Quantity
			holdsByUser[o.UserID] += o.Quantity
		case statusReserved:
			held += o.Quantity
			holdsByUser[o.UserID] += o.Quantity
		}
	}
	for _, a := range acc {
		acceptByUser[r.shoppers[a.shopper].uid] += a.qty
	}
	rep.Sold = sold
	stock, limit := r.cfg.Stock, r.cfg.PerUserLimit

	var checks []Check

	// No oversell, at the gate (what was accepted) and in the record (what
	// was sold).
	{
		var p problems
		if sold > stock {
			p.add("oversold: %d units sold (created/paid) of stock %d, %d too many", sold, stock, sold-stock)
		}
		if rep.AcceptedUnits > stock {
			p.add("oversold at the gate: %d units accepted (202) of stock %d, %d too many", rep.AcceptedUnits, stock, rep.AcceptedUnits-stock)
		}
		checks = append(checks, p.check(CheckNoOversell,
			fmt.Sprintf("sold %d of stock %d (accepted %d units in %d orders)", sold, stock, rep.AcceptedUnits, len(acc)),
			fmt.Sprintf("more than the stock of %d was sold", stock)))
	}

	// Per-user limit, at the gate and in the record.
	{
		var p problems
		for _, s := range r.shoppers {
			if a, h := acceptByUser[s.uid], holdsByUser[s.uid]; a > limit || h > limit {
				p.add("user %s: accepted %d units, holds %d, limit %d", s.uid, a, h, limit)
			}
		}
		checks = append(checks, p.check(CheckPerUserLimit,
			fmt.Sprintf("nobody over %d", limit),
			fmt.Sprintf("per-user limit of %d broken", limit)))
	}

	// Every accepted reservation persisted, as what was asked.
	{
		var p problems
		n := 0
		for _, a := range acc {
			s := r.shoppers[a.shopper]
			ob := obs[a.orderID]
			o := ob.order
			switch {
			case !ob.ok:
				p.add("order %s of user %s: %s", a.orderID, s.uid, ob.err)
				continue
			case o.Status == statusReserved:
				p.add("order %s of user %s still reserved after %s", a.orderID, s.uid, r.cfg.PersistWait)
				continue
			case o.Status != statusCreated && o.Status != statusPaid:
				p.add("order %s of user %s ended %s", a.orderID, s.uid, o.Status)
				continue
			}
			bad := false
			if o.OrderID != a.orderID || o.VoucherID != vid || o.UserID != s.uid || o.Quantity != a.qty {
				p.add("order %s of user %s: is order %s of voucher %s for user %s, quantity %d; the tool asked voucher %s, quantity %d",
					a.orderID, s.uid, o.OrderID, o.VoucherID, o.UserID, o.Quantity, vid, a.qty)
				bad = true
			}
			if want := a.qty * r.cfg.PriceCents; o.AmountCents != want {
				p.add("order %s: amount_cents %d, want %d × %d = %d", a.orderID, o.AmountCents, a.qty, r.cfg.PriceCents, want)
				bad = true
			}
			if !bad {
				n++
			}
		}
		checks = append(checks, p.check(CheckPersisted,
			fmt.Sprintf("all %d accepted orders created/paid as asked", len(acc)),
			fmt.Sprintf("%d of %d accepted orders persisted as asked", n, len(acc))))
	}

	// Exactly once: every shopper's list holds exactly the orders it got a
	// 202 for, each once.
	{
		var p problems
		accByID := make(map[string]*acceptance, len(acc))
		for _, a := range acc {
			accByID[a.orderID] = a
		}
		extra := 0
		for i, s := range r.shoppers {
			if listErrs[i] != nil {
				p.add("could not list the orders of user %s: %v", s.uid, listErrs[i])
				continue
			}
			seen := make(map[string]int)
			for _, o := range lists[i] {
				seen[o.OrderID]++
				if a, ok := accByID[o.OrderID]; !ok || a.shopper != i {
					p.add("user %s has order %s (%s, quantity %d) that no 202 announced", s.uid, o.OrderID, o.Status, o.Quantity)
					extra++
				}
				if o.UserID != s.uid {
					p.add("user %s's list shows order %s of user %s", s.uid, o.OrderID, o.UserID)
				}
			}
			for id, k := range seen {
				if k > 1 {
					p.add("order %s listed %d times for user %s", id, k, s.uid)
				}
			}
		}
		for _, a := range acc {
			if listErrs[a.shopper] != nil {
				continue
			}
			found := false
			for _, o := range lists[a.shopper] {
				found = found || o.OrderID == a.orderID
			}
			if !found {
				p.add("accepted order %s is missing from user %s's orders", a.orderID, r.shoppers[a.shopper].uid)
			}
		}
		checks = append(checks, p.check(CheckExactlyOnce,
			fmt.Sprintf("%d orders listed, each once, each announced by a 202", len(orders)),
			fmt.Sprintf("orders doubled, unannounced or lost (%d unannounced)", extra)))
	}

	checks = append(checks, r.checkReplays())

	// The voucher's live stock and the operators' stats agree with the record.
	wantLeft := stock - sold - held
	{
		var p problems
		v, waited, err := r.awaitStockLeft(ctx, vid, wantLeft)
		if err != nil {
			p.add("%v", err)
		} else {
			left := v.StockLeft
			rep.StockLeft = &left
			if v.StockTotal != stock {
				p.add("stock_total %d, the tool created %d", v.StockTotal, stock)
			}
			if v.StockLeft != wantLeft {
				p.add("stock_left %d after %s, but stock − sold − held = %d − %d − %d = %d",
					v.StockLeft, waited.Round(time.Millisecond), stock, sold, held, wantLeft)
			}
		}
		checks = append(checks, p.check(CheckStockLeft,
			fmt.Sprintf("stock_left %d = %d − %d sold", wantLeft, stock, sold),
			"the voucher's stock disagrees with what was sold"))
	}
	{
		var p problems
		st, err := r.api.stats(ctx, vid)
		if err != nil {
			p.add("%v", err)
		} else {
			if st.StockTotal != stock {
				p.add("stock_total %d, want %d", st.StockTotal, stock)
			}
			if st.StockLeft != wantLeft {
				p.add("stock_left %d, want %d", st.StockLeft, wantLeft)
			}
			for _, c := range []struct {
				name      string
				got, want int64
			}{
				{statusReserved, st.Reserved, statusCount[statusReserved]},
				{statusCreated, st.Created, statusCount[statusCreated]},
				{statusPaid, st.Paid, statusCount[statusPaid]},
				{statusCancelled, st.Cancelled, statusCount[statusCancelled]},
				{statusFailed, st.Failed, statusCount[statusFailed]},
			} {
				if c.got != c.want {
					p.add("%s %d, but the shoppers' lists show %d %s orders", c.name, c.got, c.want, c.name)
				}
			}
		}
		checks = append(checks, p.check(CheckAdminStats,
			fmt.Sprintf("stats agree: stock_left %d, %d created, %d paid", wantLeft, statusCount[statusCreated], statusCount[statusPaid]),
			"the admin stats disagree with what was sold"))
	}

	rep.Checks = checks
	var failed []Check
	for _, c := range checks {
		if !c.OK {
			failed = append(failed, c)
		}
	}
	rep.Passed = len(failed) == 0
	if len(failed) > 0 {
		return &InvariantError{Failed: failed}
	}
	return nil
}

// checkReplays judges the Idempotency-Keys: one key of one shopper never
// yields two orders, one order never answers two different keys, and a
// replay of a key that got an order gets that order (or a refusal that comes
// before the stock is looked at: 429, 503, a transport error).
func (r *runner) checkReplays() Check {
	var p problems
	byKey := make(map[string]string)  // user+key -> first order id
	keyOf1 := make(map[string]string) // order id -> user+key
	matched := 0
	for i, res := range r.results {
		if !res.sent || res.outcome != OutcomeAccepted {
			continue
		}
		a := r.attempts[i]
		s := r.shoppers[a.shopper]
		k := keyOf(s, a.key)
		if id, ok := byKey[k]; ok && id != res.orderID {
			p.add("user %s, Idempotency-Key %s: orders %s and %s", s.uid, a.key, id, res.orderID)
		} else if !ok {
			byKey[k] = res.orderID
		}
		if other, ok := keyOf1[res.orderID]; ok && other != k {
			p.add("order %s answered two different attempts (%s and %s)", res.orderID,
				scopeString(other), scopeString(k))
		} else if !ok {
			keyOf1[res.orderID] = k
		}
	}
	for i, res := range r.results {
		a := r.attempts[i]
		if !res.sent || a.replayOf < 0 {
			continue
		}
		orig := r.results[a.replayOf]
		if !orig.sent || orig.outcome != OutcomeAccepted {
			continue
		}
		switch res.outcome {
		case OutcomeAccepted:
			if res.orderID == orig.orderID {
				matched++
			}
		case OutcomeSoldOut, OutcomeLimitExceeded, OutcomeNotStarted:
			p.add("user %s replayed Idempotency-Key %s of order %s and got %s", r.shoppers[a.shopper].uid, a.key, orig.orderID, res.outcome)
		}
	}
	return p.check(CheckReplays,
		fmt.Sprintf("one order per Idempotency-Key; %d replays of accepted requests got their order", matched),
		"replays did not get their first order")
}

// scopeString prints a user+key scope made by keyOf.
func scopeString(k string) string {
	for i := 0; i < len(k); i++ {
		if k[i] == 0 {
			return "user " + k[:i] + " key " + strconv.Quote(k[i+1:])
		}
	}
	return k
}
