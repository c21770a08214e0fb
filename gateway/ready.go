package gateway

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Readiness answers "are the dependencies reachable?" from a cached probe: a
// load balancer, a Kubernetes probe and a monitoring system each asking
// several times a second, times every instance, must not each cost a Redis
// PING, a PostgreSQL round trip and a new TCP connection to Kafka. A probe
// result is served while it is younger than MaxAge; after that the next
// caller runs one new probe and every caller arriving meanwhile waits for
// that same probe (one in flight at a time), so a burst of readiness checks
// costs one probe, whatever its size. It serves Server's /readyz, and cmd's
// health server for processes without the gateway.
type Readiness struct {
	checks  []Check
	timeout time.Duration
	maxAge  time.Duration
	log     *slog.Logger

	mu       sync.Mutex
	at       time.Time // when the last probe ended; zero before the first
	failed   []string  // names of the checks that failed in it
	inflight chan struct{}
}

// NewReadiness returns a Readiness over checks: each probe asks them all at
// once, within timeout, and its result is reused for maxAge (at most a
// second is what probes expect; a zero or negative maxAge caches nothing but
// still runs one probe at a time). log receives each failing check's error.
func NewReadiness(checks []Check, timeout, maxAge time.Duration, log *slog.Logger) *Readiness {
	return &Readiness{checks: checks, timeout: timeout, maxAge: maxAge, log: log}
}

// Failed returns the names of the checks that failed in a probe at most
// MaxAge old (nil when every check answered), or ctx's error when ctx ends
// first while waiting for the probe in flight.
func (r *Readiness) Failed(ctx context.Context) ([]string, error) {
	r.mu.Lock()
	if !r.at.IsZero() && time.Since(r.at) < r.maxAge {
		failed := r.failed
		r.mu.Unlock()
		return failed, nil
	}
	if ch := r.inflight; ch != nil {
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.failed, nil
	}
	ch := make(chan struct{})
	r.inflight = ch
	r.mu.Unlock()

	// The probe is everybody's, not this caller's: its deadline is the
	// probe's own, not the request's.
	failed := r.probe(context.WithoutCancel(ctx))
	r.mu.Lock()
	r.failed, r.at, r.inflight = failed, time.Now(), nil
	r.mu.Unlock()
	close(ch)
	return failed, nil
}

// probe asks every check at once, within the timeout, and names the ones
// that failed or did not answer in time.
func (r *Readiness) probe(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	type result struct {
		i   int
		err error
	}
	// Buffered, so a check that ignores its context cannot leak a
	// goroutine blocked on sending.
	results := make(chan result, len(r.checks))
	for i, ch := range r.checks {
		go func() { results <- result{i, ch.Ping(ctx)} }()
	}
	errs := make([]error, len(r.checks))
	for i := range errs {
		errs[i] = context.DeadlineExceeded // until it answers
	}
	for range r.checks {
		select {
		case res := <-results:
			errs[res.i] = res.err
			continue
		case <-ctx.Done():
		}
		break
	}
	var failed []string
	for i, err := range errs {
		if err != nil {
			name := r.checks[i].Name
			failed = append(failed, name)
			r.log.LogAttrs(ctx, slog.LevelWarn, "not ready", slog.String("check", name), slog.String("error", err.Error()))
		}
	}
	return failed
}

func (s *Server) healthz(c *fiber.Ctx) error {
	return c.JSON(api.Health{Status: "ok"})
}

// readyz answers from Readiness: a probe at most ReadyMaxAge old, one in
// flight at a time. The failing checks are named (never their errors, which
// are logged).
func (s *Server) readyz(c *fiber.Ctx) error {
	if s.draining.Load() {
		return apperr.Public(apperr.ErrUnavailable, "shutting down")
	}
	body, err := s.ready.answer(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(body)
}

// answer is /readyz's body when every check passed, or the error to answer
// with: the failing checks are named, never their errors (which are logged).
func (r *Readiness) answer(ctx context.Context) (api.Ready, error) {
	failed, err := r.Failed(ctx)
	if err != nil {
		return api.Ready{}, apperr.Public(apperr.ErrUnavailable, "not ready: the readiness probe did not finish in time")
	}
	if len(failed) > 0 {
		return api.Ready{}, apperr.Publicf(apperr.ErrUnavailable, "not ready: %s unreachable", strings.Join(failed, ", "))
	}
	checks := make(map[string]string, len(r.checks))
	for _, ch := range r.checks {
		checks[ch.Name] = "ok"
	}
	return api.Ready{Status: "ready", Checks: checks}, nil
}
