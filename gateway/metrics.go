package gateway

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/gateway/i18n"
)

// Names of the gateway's metric families (the Grafana dashboard in deploy/
// reads them).
const (
	metricHTTPRequests = "seckill_http_requests_total"
	metricHTTPDuration = "seckill_http_request_duration_seconds"
	metricBuyOutcomes  = "seckill_buy_outcomes_total"
)

// The seller's measures (buy.Pipeline.WithSale), by path ("redis": the
// reservation script and the Kafka hand-off; "postgresql"): what the back
// end costs an attempt that passed every limit, apart from the refusals of
// the steps before it, which cost the back end nothing. The fleet's health
// (and so the waiting rooms' adaptive rate) reads these, not the route's.
const (
	MetricSellDuration = "seckill_sell_duration_seconds"
	MetricSellFailures = "seckill_sell_failures_total"
)

// OutcomeAccepted is the buy outcome of an attempt that got its order; every
// other outcome is the error code (gateway/openapi.yaml) the attempt was answered with
// (sold_out, limit_exceeded, rate_limited, captcha_invalid, unavailable...),
// and "error" for an internal failure.
const OutcomeAccepted = "accepted"

// routeUnmatched labels requests that matched no route (404 and 405 from the
// router), so that scanners cannot mint a label value per path.
const routeUnmatched = "unmatched"

// routeUnrouted labels answers given before the router ran (a body over the
// limit, refused while it was read): the path is the client's, not a route.
const routeUnrouted = "unrouted"

// unroutedKey marks, in a request's locals, an answer given before routing.
type unroutedKey struct{}

// routeOf is the route pattern that answered c, or routeUnrouted.
func routeOf(c *fiber.Ctx) string {
	if c.Locals(unroutedKey{}) != nil {
		return routeUnrouted
	}
	return c.Route().Path
}

// httpBuckets are the latency buckets, in seconds: dense below 50 ms, where
// the buying path's p99 target is, and up to the request timeout.
var httpBuckets = []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10}

// metrics are the gateway's collectors. The hot path never builds a label
// set: every (route, method, status) it has seen is resolved once into its
// counter and its route's histogram, and found again in a read-only map
// with one lookup and no allocation.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	outcomes *prometheus.CounterVec

	// sellTime and sellFailed are the seller's measures, by path, resolved
	// once (two paths).
	sellTime   map[string]prometheus.Observer
	sellFailed map[string]prometheus.Counter

	// series is replaced, never changed, so readers need no lock; mu
	// serialises the writers that add a series (a handful per route).
	series atomic.Pointer[map[seriesKey]series]
	mu     sync.Mutex

	// byCode is every buy outcome, resolved at construction; read only.
	byCode map[string]prometheus.Counter

	// endpoints are the routes that answer ("METHOD path"), set by
	// learnRoutes before the server serves; read only after.
	endpoints map[string]bool
}

type seriesKey struct {
	route, method string
	status        int
}

type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// newMetrics registers the gateway's collectors on reg. A nil reg means no
// metrics (nil *metrics), and the gateway adds no middleware.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricHTTPRequests,
			Help: "HTTP requests answered, by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricHTTPDuration,
			Help:    "Time from the request's arrival at the gateway to its answer being written, by route pattern.",
			Buckets: httpBuckets,
		}, []string{"route"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricBuyOutcomes,
			Help: `Buy requests, by outcome: "accepted", or the API error code they were answered with ("error" for internal failures).`,
		}, []string{"outcome"}),
		byCode:     map[string]prometheus.Counter{},
		sellTime:   map[string]prometheus.Observer{},
		sellFailed: map[string]prometheus.Counter{},
	}
	sellTime := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    MetricSellDuration,
		Help:    "Time of the seller's call of a buy that passed every limit, the captcha, the breaker and the sold-out flag, by path: redis is the reservation script and the Kafka hand-off, postgresql the synchronous kinds' transaction.",
		Buckets: httpBuckets,
	}, []string{"path"})
	sellFailed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricSellFailures,
		Help: "Seller calls that failed for the back end's sake (answered 5xx: a dependency down or too slow, an internal error), by path; a refusal of the sale's own (sold out, limit exceeded) is not one.",
	}, []string{"path"})
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.outcomes, sellTime, sellFailed} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	empty := map[seriesKey]series{}
	m.series.Store(&empty)
	// Every outcome exists from the start (at zero), so a rate() over a
	// sale's first seconds has a series to work on.
	m.byCode[OutcomeAccepted] = m.outcomes.WithLabelValues(OutcomeAccepted)
	for _, row := range errorTable {
		m.byCode[row.code] = m.outcomes.WithLabelValues(row.code)
	}
	m.byCode[internalRow.code] = m.outcomes.WithLabelValues("error")
	m.byCode["not_found"] = m.outcomes.WithLabelValues("not_found")
	for _, path := range []string{buy.PathRedis, buy.PathPostgreSQL} {
		m.sellTime[path], m.sellFailed[path] = sellTime.WithLabelValues(path), sellFailed.WithLabelValues(path)
	}
	return m, nil
}

// timeSale records one seller's call (buy.Pipeline.WithSale). A failure is
// what the error table answers with a 5xx: the back end's, not the
// shopper's.
func (m *metrics) timeSale(path string, took time.Duration, err error) {
	o, ok := m.sellTime[path]
	if !ok {
		return
	}
	o.Observe(took.Seconds())
	// A buyer who went away cancels the call; that says nothing of the
	// back end.
	if err != nil && !errors.Is(err, context.Canceled) && classify(err, i18n.English).row.status >= fiber.StatusInternalServerError {
		m.sellFailed[path].Inc()
	}
}

// middleware counts and times every request. It wraps observe, so it sees
// the answer observe wrote for an error, and its clock includes the access
// log. c.Route() after Next is the route that answered.
func (m *metrics) middleware(c *fiber.Ctx) error { return m.measure(c, c.Next) }

// measure counts and times run, which writes c's answer.
func (m *metrics) measure(c *fiber.Ctx, run func() error) error {
	start := time.Now()
	err := run()
	status := c.Response().StatusCode()
	route, method := routeOf(c), c.Route().Method
	if route == routeUnrouted {
		method = c.Method()
	}
	s := m.lookup(route, method, status)
	s.requests.Inc()
	s.duration.Observe(time.Since(start).Seconds())
	return err
}

// lookup returns the series of one answer, creating it the first time.
// route and method may point into fasthttp's buffers: they are only copied
// when a new series is stored.
func (m *metrics) lookup(route, method string, status int) series {
	k := seriesKey{route: route, method: method, status: status}
	if s, ok := (*m.series.Load())[k]; ok {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.series.Load()
	if s, ok := old[k]; ok {
		return s
	}
	label := route
	switch {
	case (status == fiber.StatusNotFound || status == fiber.StatusMethodNotAllowed) && route == "/":
		// The router found nothing; the route is observe's own "/".
		label = routeUnmatched
	case status >= fiber.StatusBadRequest && route != routeUnrouted && m.endpoints != nil && !m.endpoints[method+" "+route]:
		// A refusal by a group's middleware, before any endpoint matched:
		// /api/v1's for a path under it that no route has, /api/v1/admin's
		// for a request without the operator token. The prefix is not
		// what was asked for.
		label = routeUnmatched
	}
	k.route, k.method = strings.Clone(route), strings.Clone(method)
	s := series{
		requests: m.requests.WithLabelValues(label, k.method, strconv.Itoa(status)),
		duration: m.duration.WithLabelValues(label),
	}
	next := make(map[seriesKey]series, len(old)+1)
	for key, v := range old {
		next[key] = v
	}
	next[k] = s
	m.series.Store(&next)
	return s
}

// countBuy counts an attempt once, by the answer it gets (buy.Pipeline.WithOutcome).
func (m *metrics) countBuy(err error) { m.buyOutcome(err).Inc() }

// learnRoutes records the endpoints of routes (fiber's, without the
// middleware of app.Use and groups), so that lookup can tell an answer of
// one from a refusal by a group's middleware.
func (m *metrics) learnRoutes(routes []fiber.Route) {
	m.endpoints = make(map[string]bool, len(routes))
	for _, r := range routes {
		m.endpoints[r.Method+" "+r.Path] = true
	}
}

// chainReachedKey holds, in the context of a buy request, whether the
// attempt reached the pipeline.
type chainReachedKey struct{}

// countRefusedBuys is the buying route's first handler: a buy refused before
// it reaches the gate chain (no valid sign-in, a bad id, body or quantity)
// is counted by the code it is answered with, as countBuy counts the rest,
// so that every buy request counts once.
func (m *metrics) countRefusedBuys(c *fiber.Ctx) error {
	reached := new(bool)
	c.SetUserContext(context.WithValue(c.UserContext(), chainReachedKey{}, reached))
	err := c.Next()
	if err != nil && !*reached {
		m.buyOutcome(err).Inc()
	}
	return err
}

// reachedPipeline marks, in the context of a buy request, that the attempt
// reached the pipeline, which counts it itself (countBuy).
func reachedPipeline(ctx context.Context) {
	if reached, ok := ctx.Value(chainReachedKey{}).(*bool); ok {
		*reached = true
	}
}

// buyOutcome is the counter of an attempt's answer: the code of the error
// table's row, as the client reads it.
func (m *metrics) buyOutcome(err error) prometheus.Counter {
	if err == nil {
		return m.byCode[OutcomeAccepted]
	}
	code := internalRow.code
	if row, ok := lookup(err); ok {
		code = row.code
	}
	if c, ok := m.byCode[code]; ok {
		return c
	}
	return m.byCode[internalRow.code]
}
