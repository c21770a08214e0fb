package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashsale/seckill/deploy/tools/fleet"
	"github.com/flashsale/seckill/gateway/auth"
)

// Names of the faults, in the order Run injects them.
const (
	FaultPostgresFrozen   = "postgresql frozen"
	FaultPostgresRestart  = "postgresql restarted"
	FaultRedisKilled      = "redis-server killed -9 and restarted from AOF"
	FaultRedisDataLost    = "redis data lost (FLUSHALL)"
	FaultWorkerKilled     = "worker killed mid-batch"
	FaultGatewayKilled    = "gateway killed between script and Kafka write"
	FaultBrokerRestart    = "broker restarted"
	FaultWholeProcessKill = "whole process killed -9 and started again"
	FaultDescriptors      = "gateway out of file descriptors (idle connection flood)"
	FaultSocketFlood      = "websocket flood from one address"
	// FaultFleet is not one of Faults: it runs on a fleet of its own
	// (Options.Fleet, 3 gateways, 2 workers and 2 sweepers by default), the
	// crowd spread over every gateway, and one gateway and one worker are
	// killed with SIGKILL mid-crowd and stay dead.
	FaultFleet = "fleet: a gateway and a worker killed -9"
)

// Faults lists every fault in the order Run injects them.
func Faults() []string {
	return []string{FaultPostgresFrozen, FaultPostgresRestart, FaultRedisKilled, FaultRedisDataLost,
		FaultWorkerKilled, FaultGatewayKilled, FaultBrokerRestart, FaultDescriptors, FaultSocketFlood, FaultWholeProcessKill}
}

// Options sizes a run.
type Options struct {
	// Bin is the seckill binary (see Build).
	Bin string
	// Dir is a scratch folder for the services' data and the processes' logs.
	Dir string
	// Faults to inject, by name (see Faults); empty means all of them.
	Faults []string
	// Shoppers per fault; each asks for one unit of a voucher with
	// three quarters as many units, so the sale is still selling when the
	// fault strikes.
	Shoppers int
	// Arrive spreads the shoppers' arrivals over this long.
	Arrive time.Duration
	// FaultAt is when, after the crowd's release, the fault strikes.
	FaultAt time.Duration
	// Freeze is how long PostgreSQL stays frozen.
	Freeze time.Duration
	// Down is how long redis-server and the broker stay down.
	Down time.Duration
	// Patience is how long a shopper keeps retrying after arriving.
	Patience time.Duration
	// SettleWithin is the deadline, after the crowd is done, for every
	// accepted order to end and the drift report to be clean. Generous: the
	// time it took is reported, the deadline only catches what never heals.
	SettleWithin time.Duration
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
	// Fleet is the shape FaultFleet runs on; zero means fleet.Fleet3x2x2.
	Fleet fleet.Shape
	// ApacheKafka runs the served system on a three-node Apache Kafka
	// cluster (replication factor 3, min.insync.replicas 2) instead of the
	// in-process broker, with the faults of ApacheFaults.
	ApacheKafka bool
	// KafkaDown is how long a Kafka node stays killed, frozen or stopped;
	// zero means 10 s.
	KafkaDown time.Duration
	// System, when set, is a fleet started outside the suite with faults
	// of its own (deploy/tools/netlab's, across a network): Faults then names
	// those, and each runs on it with the same crowd and checks.
	System *System
}

// System is a running fleet the suite did not start, and the faults it
// can make. The crowd is spread over its gateways; the checks ask the
// first gateway and read its PostgreSQL pool.
type System struct {
	Fleet *fleet.Fleet
	// Faults by name.
	Faults map[string]Inject
	// ShopperDial, when set, makes the shoppers' connections (deploy/tools/netlab
	// dials them from hosts of their own); the checks dial as the suite's
	// process does.
	ShopperDial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Inject strikes one fault into a crowd at its FaultAt and returns once
// the fault is over (the link back): seconds to heal count from then.
type Inject func(ctx context.Context, w Watch, res *Result) error

// Watch is what a fault sees of the crowd it strikes.
type Watch interface {
	// InFlight is how many buys are sent and not answered yet.
	InFlight() int64
	// Answers are the buys answered so far, in the order their answers
	// came.
	Answers() []Answer
	// VoucherID is the voucher the crowd buys.
	VoucherID() int64
	// Accepted is every order id a 202 gave so far, with its shopper.
	Accepted() map[int64]int64
}

// Result is what one fault did to one crowd.
type Result struct {
	Fault string
	// Accepted is how many distinct orders the shoppers got a 202 for.
	Accepted int
	// Persisted is how many of those PostgreSQL has as created, paid or
	// cancelled; Failed how many it has as failed; Unknown how many it does
	// not have in a final status when the deadline passed.
	Persisted, Failed, Unknown int
	// Total, Sold and StockLeft are PostgreSQL's figures of the voucher.
	Total, Sold, StockLeft int64
	// Healed says whether the drift report said Redis and PostgreSQL agree
	// (in-flight reservations aside) after the fault ended, and Heal how
	// long after.
	Healed bool
	Heal   time.Duration
	// Settled says whether, after the crowd, every accepted order ended and
	// the drift report was clean with nothing pending, and Settle how long
	// after the crowd's last shopper that took.
	Settled bool
	Settle  time.Duration
	// Answers counts what the shoppers were answered.
	Answers string
	// TurnedAway counts the shoppers whose last answer was neither a 202
	// nor a 409: sent away without an order (they gave up after 503s or
	// no answer).
	TurnedAway int
	// BuyP50 and BuyP99 are the medians and 99th percentile of the time
	// a buy took to be answered, retries each counted.
	BuyP50, BuyP99 time.Duration
	// Drift is the last drift report's verdict when it was not clean after
	// SettleWithin (the system did not heal by itself); empty when clean.
	Drift string
	// Problems lists every broken invariant of the sale (oversell, balance,
	// per-user limit, an accepted order without a final status, the API
	// contradicting PostgreSQL); empty means the sale stayed honest.
	Problems []string
	// Notes says what the fault did, for the log (e.g. how many buys were
	// caught in flight).
	Notes []string
	// FaultEnded, when an Inject sets it, is when its fault ended (the link
	// came back) if it returned later; seconds to heal count from it.
	FaultEnded time.Time
	// Aftermath, when an Inject sets it, runs once the crowd is done and
	// its orders settled (or SettleWithin passed), before the checks: it
	// says what became of what the fault left behind, in Notes and
	// Problems, which an Inject that returned at the fault's end cannot
	// know yet.
	Aftermath func(ctx context.Context, res *Result) error
}

// run state shared by the faults of one Run.
type runner struct {
	opts   Options
	tokens *auth.Tokens
	admin  string
	secret string
	next   int64 // first user id of the next crowd

	served *served // the services and `seckill serve` processes, started on first use
}

// Run injects each fault of opts in turn, each into its own crowd on its own
// voucher, and returns one Result per fault. Its error is about the suite
// itself (a service that would not start); broken invariants are in the
// Results' Problems.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	if opts.Dir == "" || opts.Bin == "" {
		return nil, errors.New("chaos: Options.Dir and Options.Bin are required")
	}
	if opts.Shoppers < 4 {
		return nil, errors.New("chaos: Options.Shoppers must be at least 4")
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	names := opts.Faults
	if len(names) == 0 {
		names = Faults()
	}
	if len(opts.Faults) == 0 && opts.ApacheKafka {
		names = ApacheFaults()
	}
	r := &runner{opts: opts, admin: randomHex(16), secret: randomHex(32), next: 1_000_000}
	if opts.System != nil {
		if len(opts.Faults) == 0 {
			return nil, errors.New("chaos: Options.Faults must name faults of Options.System")
		}
		for _, n := range opts.Faults {
			if opts.System.Faults[n] == nil {
				return nil, fmt.Errorf("chaos: Options.System has no fault %q", n)
			}
		}
		r.admin, r.secret = opts.System.Fleet.AdminToken, opts.System.Fleet.JWTSecret
	} else if err := checkFaults(opts, names); err != nil {
		return nil, err
	}
	var err error
	if r.tokens, err = auth.NewTokens([]byte(r.secret), 2*time.Hour); err != nil {
		return nil, err
	}
	defer r.close()
	var results []Result
	for _, name := range names {
		res, err := r.one(ctx, name)
		if err != nil {
			return results, fmt.Errorf("chaos: %s: %w", name, err)
		}
		opts.Logf("%s: accepted %d, persisted %d, failed %d, unknown %d; healed %v in %v, settled %v in %v; %s",
			name, res.Accepted, res.Persisted, res.Failed, res.Unknown, res.Healed, res.Heal.Round(100*time.Millisecond),
			res.Settled, res.Settle.Round(100*time.Millisecond), res.Answers)
		for _, n := range res.Notes {
			opts.Logf("%s: %s", name, n)
		}
		for _, p := range res.Problems {
			opts.Logf("%s: PROBLEM: %s", name, p)
		}
		if res.Drift != "" {
			opts.Logf("%s: NOT HEALED: %s", name, res.Drift)
		}
		results = append(results, res)
	}
	return results, nil
}

func (r *runner) close() {
	if r.served != nil {
		r.served.close()
	}
}

// system is what a fault acts on and the checks read: the HTTP face and the
// PostgreSQL record.
type system struct {
	api  *api                 // the operator's routes and the checks
	apis []*api               // the shoppers', one per gateway
	pool func() *pgxpool.Pool // the current pool (dev mode reopens it after a restart)
}

// one runs one fault: a crowd on a new voucher, the fault at FaultAt, then the
// checks.
func (r *runner) one(ctx context.Context, name string) (Result, error) {
	res := Result{Fault: name}
	var (
		sys    system
		inject func(ctx context.Context, c *crowd, res *Result) error
	)
	switch {
	case r.opts.System != nil:
		f := r.opts.System.Fleet
		for _, addr := range f.GatewayAddrs() {
			sys.apis = append(sys.apis, newAPI(addr, r.admin, r.opts.System.ShopperDial))
		}
		// The checks are the operator's: from the suite's own host.
		sys.api, sys.pool = newAPI(f.GatewayAddrs()[0], r.admin, nil), func() *pgxpool.Pool { return f.Pool }
		strike := r.opts.System.Faults[name]
		inject = func(ctx context.Context, c *crowd, res *Result) error { return strike(ctx, c, res) }
	case name == FaultWholeProcessKill:
		d, err := r.startDev(ctx)
		if err != nil {
			return res, err
		}
		defer d.close()
		sys = system{api: d.api, pool: d.currentPool}
		inject = d.killAndRestart
	case name == FaultFleet:
		f, err := r.startFleet(ctx)
		if err != nil {
			return res, err
		}
		defer f.Close()
		sys = system{api: f.apis[0], apis: f.apis, pool: func() *pgxpool.Pool { return f.Pool }}
		inject = f.killGatewayAndWorker
	default:
		if r.served == nil {
			s, err := r.startServed(ctx)
			if err != nil {
				return res, err
			}
			r.served = s
		}
		sys = system{api: r.served.api, pool: func() *pgxpool.Pool { return r.served.Pool }}
		inject = r.served.fault(name)
	}

	stock := int64(r.opts.Shoppers * 3 / 4)
	voucherID, err := sys.api.createVoucher(ctx, "chaos: "+name, stock)
	if err != nil {
		return res, err
	}
	if sys.apis == nil {
		sys.apis = []*api{sys.api}
	}
	c := newCrowd(sys.apis, r.tokens, voucherID, r.opts.Shoppers, r.next, r.opts.Arrive, r.opts.Patience)
	r.next += int64(r.opts.Shoppers)
	crowdDone := make(chan struct{})
	go func() { defer close(crowdDone); c.run(ctx) }()

	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(r.opts.FaultAt):
	}
	r.opts.Logf("%s: injecting (%d buys in flight)", name, c.inFlight.Load())
	if err := inject(ctx, c, &res); err != nil {
		<-crowdDone
		return res, err
	}
	faultEnd := time.Now()
	if !res.FaultEnded.IsZero() {
		faultEnd = res.FaultEnded
	}

	// Heal: the first clean comparison after the fault, watched while the
	// crowd goes on.
	var healedAt atomic.Int64
	healCtx, stopHeal := context.WithCancel(ctx)
	healDone := make(chan struct{})
	go func() {
		defer close(healDone)
		for healCtx.Err() == nil {
			if d, err := sys.api.drift(healCtx, voucherID); err == nil && d.OK {
				healedAt.Store(time.Now().UnixNano())
				return
			}
			select {
			case <-healCtx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()

	<-crowdDone
	crowdEnd := time.Now()
	accepted := c.acceptedOrders()
	res.Accepted = len(accepted)
	res.Answers = c.summary()
	res.TurnedAway = c.turnedAway()
	res.BuyP50, res.BuyP99 = Percentile(c.Answers(), 0.50), Percentile(c.Answers(), 0.99)
	res.Problems = append(res.Problems, c.problems...)

	final, last, settled := r.settle(ctx, sys, voucherID, accepted)
	settledAt := time.Now()
	res.Settled = settled
	res.Settle = settledAt.Sub(crowdEnd)
	stopHeal()
	<-healDone
	switch at := healedAt.Load(); {
	case at != 0:
		res.Healed, res.Heal = true, time.Unix(0, at).Sub(faultEnd)
	case last.OK:
		// The watcher was stopped before it saw what settle saw.
		res.Healed, res.Heal = true, settledAt.Sub(faultEnd)
	}
	if res.Aftermath != nil {
		if err := res.Aftermath(ctx, &res); err != nil {
			return res, err
		}
	}
	r.check(ctx, sys, voucherID, accepted, final, last, &res)
	return res, nil
}

// settle waits until every accepted order has a final status in PostgreSQL
// and the drift report is clean, or SettleWithin passes.
// It returns the statuses last read and the last drift report.
func (r *runner) settle(ctx context.Context, sys system, voucherID int64, accepted map[int64]int64) (map[int64]string, drift, bool) {
	ids := make([]int64, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	deadline := time.Now().Add(r.opts.SettleWithin)
	var (
		status map[int64]string
		last   drift
	)
	for {
		if s, err := statuses(ctx, sys.pool(), ids); err == nil {
			status = s
		}
		d, err := sys.api.drift(ctx, voucherID)
		if err == nil {
			last = d
		}
		if err == nil && d.clean() && countFinal(status) == len(ids) {
			return status, last, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return status, last, false
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// statuses reads the PostgreSQL status of each order that has a row.
func statuses(ctx context.Context, pool *pgxpool.Pool, ids []int64) (map[int64]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, "SELECT id, status FROM orders WHERE id = ANY($1)", ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]string, len(ids))
	for rows.Next() {
		var id int64
		var s string
		if err := rows.Scan(&id, &s); err != nil {
			return nil, err
		}
		out[id] = s
	}
	return out, rows.Err()
}

func isFinal(status string) bool {
	return status == "created" || status == "paid" || status == "cancelled" || status == "failed"
}

func countFinal(status map[int64]string) int {
	n := 0
	for _, s := range status {
		if isFinal(s) {
			n++
		}
	}
	return n
}

// check counts the outcomes and records every broken invariant.
func (r *runner) check(ctx context.Context, sys system, voucherID int64, accepted map[int64]int64, final map[int64]string, last drift, res *Result) {
	problem := func(format string, args ...any) { res.Problems = append(res.Problems, fmt.Sprintf(format, args...)) }
	var unknown []int64
	for id := range accepted {
		switch final[id] {
		case "created", "paid", "cancelled":
			res.Persisted++
		case "failed":
			res.Failed++
		default:
			unknown = append(unknown, id)
		}
	}
	res.Unknown = len(unknown)
	slices.Sort(unknown)
	for i, id := range unknown {
		if i == 5 {
			problem("... and %d more accepted orders without a final status", len(unknown)-5)
			break
		}
		token, _, _ := r.tokens.Issue(accepted[id])
		problem("accepted order %d has no final status in PostgreSQL after %v; the API says %q",
			id, r.opts.SettleWithin, sys.api.orderStatus(ctx, token, id))
	}

	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pool := sys.pool()
	err := pool.QueryRow(pctx, `
		SELECT v.stock_total, v.stock_left,
		       COALESCE(SUM(o.quantity) FILTER (WHERE o.status IN ('created', 'paid')), 0)
		FROM vouchers v LEFT JOIN orders o ON o.voucher_id = v.id
		WHERE v.id = $1 GROUP BY v.id`, voucherID).Scan(&res.Total, &res.StockLeft, &res.Sold)
	if err != nil {
		problem("read voucher %d from PostgreSQL: %v", voucherID, err)
		return
	}
	if res.Sold > res.Total {
		problem("OVERSOLD: PostgreSQL sold %d of %d", res.Sold, res.Total)
	}
	if res.StockLeft+res.Sold != res.Total {
		problem("PostgreSQL unbalanced: stock_left %d + sold %d != total %d", res.StockLeft, res.Sold, res.Total)
	}
	var overLimit int
	if err := pool.QueryRow(pctx, `
		SELECT count(*) FROM (SELECT user_id FROM orders
		WHERE voucher_id = $1 AND status IN ('created', 'paid')
		GROUP BY user_id HAVING SUM(quantity) > 1) x`, voucherID).Scan(&overLimit); err != nil {
		problem("read per-user counts: %v", err)
	} else if overLimit > 0 {
		problem("%d shoppers hold more than the per-user limit of 1", overLimit)
	}
	if !last.clean() {
		res.Drift = fmt.Sprintf("drift report still not clean after the crowd: ok=%v pending=%d in_flight=%d problems=%v",
			last.OK, last.Pending, last.InFlight, last.Problems)
	}

	// What shoppers read agrees with the record, for a sample of them.
	checked := 0
	for id, user := range accepted { // map order: a random sample
		if checked == apiSample {
			break
		}
		if !isFinal(final[id]) {
			continue
		}
		checked++
		token, _, _ := r.tokens.Issue(user)
		if got := sys.api.orderStatus(ctx, token, id); got != final[id] {
			problem("order %d: GET /api/v1/orders says %q, PostgreSQL %q", id, got, final[id])
		}
	}
}

// Percentile is the time the answers at quantile q (0 to 1) took; 0 for
// none.
func Percentile(answers []Answer, q float64) time.Duration {
	if len(answers) == 0 {
		return 0
	}
	took := make([]time.Duration, len(answers))
	for i, a := range answers {
		took[i] = a.Took
	}
	slices.Sort(took)
	return took[min(len(took)-1, int(q*float64(len(took))))]
}

// apiSample is how many accepted orders the API is asked about per fault.
const apiSample = 25
