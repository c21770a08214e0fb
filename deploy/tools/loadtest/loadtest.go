// Package loadtest reproduces a flash sale against a running system and
// checks that it sold honestly.
//
// It speaks only HTTP (gateway/openapi.yaml), never Redis or PostgreSQL: it creates its own
// voucher opening a few seconds later, mints shopper tokens with the JWT
// secret, warms one connection per worker, learns the server's clock from its
// Date headers, and releases the whole crowd at the opening second, the way
// shoppers waiting on a countdown do. It then waits until every accepted
// order is persisted and checks the invariants through the API: nothing
// oversold, nobody over the per-user limit, every accepted reservation
// persisted exactly once, replays answered with the same order, and the
// voucher's stock figures agreeing with what was sold.
//
// RunCrowd (`loadtest crowd`) is the real crowd instead of one sale: pages that read
// the catalog (revalidating with If-None-Match) and hold WebSockets open,
// honest shoppers who buy once, and bots that buy as fast as they can. It
// measures the catalog's rate beside GET /healthz, PostgreSQL's transactions
// (the one thing it reads outside HTTP: pg_stat_database's counters), the
// honest shoppers' share of answers that are not 429, and the delay of the
// stock pushes, and says plainly what the server does not do.
//
// deploy/tools/cmd/loadtest is ParseFlags plus Run, one subcommand per Scenario.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"
)

// Outcome is how the system answered one buy request.
type Outcome string

// The outcomes the report counts. Anything not listed (other 4xx, 5xx other
// than 503, a transport failure, a 2xx without an order id) is OutcomeError.
const (
	OutcomeAccepted      Outcome = "accepted"       // 2xx with an order id
	OutcomeSoldOut       Outcome = "sold_out"       // 409 sold_out
	OutcomeLimitExceeded Outcome = "limit_exceeded" // 409 limit_exceeded
	OutcomeRateLimited   Outcome = "rate_limited"   // 429
	OutcomeUnavailable   Outcome = "unavailable"    // 503
	OutcomeNotStarted    Outcome = "not_started"    // 409 not_started
	OutcomeError         Outcome = "error"
)

// Outcomes returns every outcome in report order.
func Outcomes() []Outcome {
	return []Outcome{OutcomeAccepted, OutcomeSoldOut, OutcomeLimitExceeded, OutcomeRateLimited,
		OutcomeUnavailable, OutcomeNotStarted, OutcomeError}
}

// index is the outcome's slot in counters.
func (o Outcome) index() int {
	switch o {
	case OutcomeAccepted:
		return 0
	case OutcomeSoldOut:
		return 1
	case OutcomeLimitExceeded:
		return 2
	case OutcomeRateLimited:
		return 3
	case OutcomeUnavailable:
		return 4
	case OutcomeNotStarted:
		return 5
	}
	return 6
}

const numOutcomes = 7

// Names of the invariant checks, as they appear in reports and errors.
const (
	CheckNoOversell   = "no-oversell"
	CheckPerUserLimit = "per-user-limit"
	CheckPersisted    = "persisted"
	CheckExactlyOnce  = "exactly-once"
	CheckReplays      = "replays"
	CheckStockLeft    = "stock-left"
	CheckAdminStats   = "admin-stats"
)

// Check is the verdict of one invariant.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Problems names what broke the invariant: the first few of
	// ProblemCount.
	Problems     []string `json:"problems,omitempty"`
	ProblemCount int      `json:"problem_count,omitempty"`
}

// InvariantError is Run's error when the system did not sell honestly. It
// names every failed check with its first problems.
type InvariantError struct {
	Failed []Check
}

func (e *InvariantError) Error() string {
	parts := make([]string, len(e.Failed))
	for i, c := range e.Failed {
		s := c.Name + ": " + c.Detail
		if shown := c.Problems[:min(3, len(c.Problems))]; len(shown) > 0 {
			s += " (" + strings.Join(shown, "; ")
			if more := c.ProblemCount - len(shown); more > 0 {
				s += fmt.Sprintf("; %d more", more)
			}
			s += ")"
		}
		parts[i] = s
	}
	return "loadtest: invariants failed: " + strings.Join(parts, " | ")
}

// LatencyStats summarises durations, in milliseconds.
type LatencyStats struct {
	Count int     `json:"count"`
	P50MS float64 `json:"p50_ms"`
	P90MS float64 `json:"p90_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

// PersistReport is how the accepted orders reached PostgreSQL.
type PersistReport struct {
	// Orders is how many distinct accepted orders were awaited.
	Orders int `json:"orders"`
	// Persisted is how many left "reserved" within the wait.
	Persisted int `json:"persisted"`
	// StillReserved is how many were still "reserved" when the wait ended.
	StillReserved int `json:"still_reserved"`
	// ByStatus counts the awaited orders by their last seen status.
	ByStatus map[string]int `json:"by_status"`
	// WaitedMS is how long the wait took.
	WaitedMS float64 `json:"waited_ms"`
	// Delay is from the 202 to "created".
	Delay LatencyStats `json:"delay"`
	// Method says how Delay was measured: the order's created_at, the time
	// the tool first saw it persisted, or both.
	Method string `json:"method"`
}

// Bucket is one slice of the timeline, for the charts.
type Bucket struct {
	// AtMS is where the bucket starts, since the opening.
	AtMS float64 `json:"at_ms"`
	// Sent counts requests started in the bucket.
	Sent int `json:"sent"`
	// Answers counts answers received in the bucket, by outcome.
	Answers map[Outcome]int `json:"answers,omitempty"`
	// Latency of the requests started in the bucket.
	Latency LatencyStats `json:"latency"`
}

// Report is everything a run measured and concluded.
type Report struct {
	BaseURL string `json:"base_url"`
	// Targets are the gateways the buys were spread over, when more than
	// one; ByTarget counts each one's answers by outcome.
	Targets      []string                   `json:"targets,omitempty"`
	ByTarget     map[string]map[Outcome]int `json:"by_target,omitempty"`
	VoucherID    string                     `json:"voucher_id"`
	Kind         string                     `json:"kind"`
	Shards       int                        `json:"shards,omitempty"`
	Stock        int64                      `json:"stock"`
	PerUserLimit int64                      `json:"per_user_limit"`
	PriceCents   int64                      `json:"price_cents"`
	Shoppers     int                        `json:"shoppers"`
	FirstUserID  int64                      `json:"first_user_id"`
	Attempts     int                        `json:"attempts_per_shopper"`
	Concurrency  int                        `json:"concurrency"`
	TargetRate   float64                    `json:"target_rate,omitempty"`
	Quantities   string                     `json:"quantity_mix"`
	ReplayShare  float64                    `json:"replay_share"`
	Seed         int64                      `json:"seed"`
	// ShopperAddresses says each shopper named an address of its own in
	// X-Forwarded-For (false with -one-address).
	ShopperAddresses bool `json:"shopper_addresses"`

	// OpensAt is the voucher's begin_at (server clock).
	OpensAt time.Time `json:"opens_at"`
	Clock   ClockSync `json:"clock"`
	// WarmConnections is how many connections were open before the opening.
	WarmConnections int `json:"warm_connections"`
	// ReleaseLateMS is how long after the opening (as the tool reckons it)
	// the crowd was released.
	ReleaseLateMS float64 `json:"release_late_ms"`

	// Planned is Shoppers × Attempts; Sent is what went out before the cap.
	Planned     int `json:"planned"`
	Sent        int `json:"sent"`
	ReplaysSent int `json:"replays_sent"`
	// ElapsedMS is from the first request sent to the last answer.
	ElapsedMS         float64                 `json:"elapsed_ms"`
	RequestsPerSecond float64                 `json:"requests_per_second"`
	Outcomes          map[Outcome]int         `json:"outcomes"`
	Latency           map[string]LatencyStats `json:"latency"`
	// Errors counts the error outcome by what went wrong.
	Errors map[string]int `json:"errors,omitempty"`
	// SoldOutAfterMS is when, after the opening, the first sold_out answer
	// came after the last accepted one; null when the sale did not sell out.
	SoldOutAfterMS *float64 `json:"sold_out_after_ms"`

	AcceptedOrders int           `json:"accepted_orders"`
	AcceptedUnits  int64         `json:"accepted_units"`
	Persist        PersistReport `json:"persist"`
	// Sold is the units of this voucher's created and paid orders.
	Sold int64 `json:"sold"`
	// ReadWaits counts the 429 and 503 answers that the tool's own reads
	// (the polling and the checks) waited out as their Retry-After said.
	ReadWaits int `json:"read_waits"`
	// StockLeft is the voucher's stock_left after the run, when read.
	StockLeft *int64  `json:"stock_left"`
	Checks    []Check `json:"checks"`
	Passed    bool    `json:"passed"`

	// BucketMS is the width of each timeline bucket.
	BucketMS float64  `json:"bucket_ms"`
	Timeline []Bucket `json:"timeline"`
}

// Run reproduces one flash sale as cfg describes and checks it. The report
// goes to stdout (a table, or JSON with cfg.JSON) and to cfg.HTMLFile when
// set; notes and the progress line (only on a terminal) go to stderr. The
// error is an *InvariantError when the system sold dishonestly, and another
// error when the run itself could not be made. The Report is returned filled
// as far as the run got, also with an error.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) (Report, error) {
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	if cfg.DevEnv != "" {
		fmt.Fprintf(stderr, "loadtest: against %s, with what the environment left unset read from %s\n", cfg.BaseURL, cfg.DevEnv)
	}
	if cfg.Ceiling != "" {
		_, err := RunCeiling(ctx, cfg, stdout)
		return Report{}, err
	}
	if cfg.Crowd {
		_, err := RunCrowd(ctx, cfg, stdout, stderr)
		return Report{}, err
	}
	if cfg.Room > 0 {
		_, err := RunRoom(ctx, cfg, stdout)
		return Report{}, err
	}
	if cfg.Churn > 0 {
		_, err := RunChurn(ctx, cfg, stdout)
		return Report{}, err
	}
	r := newRunner(cfg, stderr)
	defer r.transport.CloseIdleConnections()
	rep, err := r.run(ctx)
	if rep.Sent == 0 {
		return rep, err
	}
	if outErr := writeReports(cfg, rep, stdout); outErr != nil {
		err = errors.Join(err, outErr)
	}
	return rep, err
}

func writeReports(cfg Config, rep Report, stdout io.Writer) error {
	var errs []error
	if cfg.JSON {
		errs = append(errs, WriteJSON(stdout, rep))
	} else {
		errs = append(errs, WriteText(stdout, rep))
	}
	if cfg.HTMLFile != "" {
		f, err := os.Create(cfg.HTMLFile)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("html report: %w", err))...)
		}
		errs = append(errs, WriteHTML(f, rep))
		if err := f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("html report: %w", err))
		}
	}
	return errors.Join(errs...)
}

// runner is the state of one run.
type runner struct {
	cfg       Config
	stderr    io.Writer
	tty       bool
	transport *http.Transport
	// client carries the crowd and the checks; every request is bounded by
	// cfg.Timeout.
	client *http.Client
	api    *apiClient
	rng    *rand.Rand
	seed   int64

	offset      time.Duration // server clock − local clock
	paused      time.Duration // the pause before the checks (-pause-before-checks)
	clockMethod string        // how offset was learned (ClockSync.Method)
	voucher     apiVoucher
	// openWall is the opening in local wall-clock time; openMono the same
	// instant with a monotonic reading, for measuring.
	openWall time.Time
	openMono time.Time

	shoppers []shopper
	attempts []attempt
	results  []result
	counts   counters
}

// shopper is one user of the crowd.
type shopper struct {
	userID int64
	uid    string // decimal user id, as in the API
	auth   string // "Bearer <token>"
	// addr is the client address the shopper's requests stand for in
	// X-Forwarded-For (shopperAddr); "" with Config.OneAddress.
	addr string
}

// attempt is one prepared buy request.
type attempt struct {
	shopper  int
	round    int
	qty      int64
	key      string // Idempotency-Key
	replayOf int    // index of the attempt whose key this re-sends, or -1
	target   int    // index in Config.bases() of the gateway it goes to
	req      *http.Request
}

// result is what one attempt got.
type result struct {
	sent    bool
	start   time.Duration // since the opening
	latency time.Duration
	outcome Outcome
	status  int
	detail  string // for OutcomeError
	orderID string
}

func newRunner(cfg Config, stderr io.Writer) *runner {
	tr := newTransport(cfg.Concurrency)
	client := &http.Client{Transport: tr, Timeout: cfg.Timeout}
	seed := cfg.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	return &runner{
		cfg:       cfg,
		stderr:    stderr,
		tty:       !cfg.NoProgress && isTerminal(stderr),
		transport: tr,
		client:    client,
		api: &apiClient{
			base:   strings.TrimRight(cfg.BaseURL, "/"),
			admin:  cfg.AdminToken,
			http:   client,
			secret: []byte(cfg.JWTSecret),
		},
		rng:  rand.New(rand.NewPCG(uint64(seed), 0x5ec_ca11)),
		seed: seed,
	}
}

// isTerminal reports whether w is a character device (a terminal), where a
// progress line that rewrites itself makes sense.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (r *runner) note(format string, args ...any) {
	fmt.Fprintf(r.stderr, "loadtest: "+format+"\n", args...)
}

func (r *runner) run(ctx context.Context) (Report, error) {
	cfg := r.cfg
	rep := Report{
		BaseURL: r.api.base, Kind: cfg.Kind, Shards: cfg.Shards, Stock: cfg.Stock, PerUserLimit: cfg.PerUserLimit,
		PriceCents: cfg.PriceCents, Shoppers: cfg.Shoppers, FirstUserID: cfg.FirstUserID,
		Attempts: cfg.Attempts, Concurrency: cfg.Concurrency, TargetRate: cfg.Rate,
		Quantities: cfg.Quantities.String(), ReplayShare: cfg.ReplayShare, Seed: r.seed,
		Planned: cfg.Shoppers * cfg.Attempts, ShopperAddresses: !cfg.OneAddress,
	}
	if len(cfg.Targets) > 1 {
		rep.Targets = cfg.Targets
	}

	offset, clock, err := syncClock(ctx, r.client, r.api.base)
	if err != nil {
		return rep, fmt.Errorf("loadtest: %w", err)
	}
	r.offset, r.clockMethod, rep.Clock = offset, clock.Method, clock

	// The window opens on a whole second of the server's clock, like a
	// countdown on a shop page, and stays open well past the crowd.
	begin := wholeSecondUp(time.Now().Add(offset).Add(cfg.OpenIn).UTC())
	end := begin.Add(cfg.Duration + 10*time.Minute)
	v, err := r.api.createVoucher(ctx, newVoucher{
		Title:        "loadtest " + begin.Format(time.RFC3339),
		Kind:         cfg.Kind,
		PriceCents:   cfg.PriceCents,
		Stock:        cfg.Stock,
		PerUserLimit: cfg.PerUserLimit,
		BeginAt:      begin,
		EndAt:        end,
		Shards:       cfg.Shards,
	})
	if err != nil {
		return rep, fmt.Errorf("loadtest: %w", err)
	}
	r.voucher = v
	rep.VoucherID, rep.OpensAt = v.ID, begin

	if err := r.prepare(ctx, end.Add(cfg.PersistWait+30*time.Minute)); err != nil {
		return rep, fmt.Errorf("loadtest: %w", err)
	}
	rep.WarmConnections = r.warm(ctx, min(cfg.Concurrency, len(r.attempts)))
	r.openWall = begin.Add(-offset)
	r.note("voucher %s (%s, stock %d, limit %d) opens %s by the server clock (%s); %d requests of %d shoppers ready on %d warm connections",
		v.ID, cfg.Kind, cfg.Stock, cfg.PerUserLimit, begin.Format(time.RFC3339), clock.Method,
		len(r.attempts), cfg.Shoppers, rep.WarmConnections)
	if time.Now().After(r.openWall) {
		r.note("preparing took longer than -open-in; the crowd starts late (raise -open-in)")
	}

	late, err := r.crowd(ctx)
	rep.ReleaseLateMS = ms(late)
	r.summarize(&rep)
	if err != nil {
		return rep, fmt.Errorf("loadtest: crowd: %w", err)
	}

	acc := r.acceptances()
	rep.AcceptedOrders = len(acc)
	for _, a := range acc {
		rep.AcceptedUnits += a.qty
	}
	if d := cfg.PauseBeforeChecks; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		r.paused = d
	}
	obs, persist := r.awaitPersisted(ctx, acc)
	rep.Persist = persist
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("loadtest: waiting for persistence: %w", err)
	}
	err = r.check(ctx, &rep, acc, obs)
	rep.ReadWaits = int(r.api.waits.Load())
	return rep, err
}
