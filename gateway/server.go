// Package gateway is the HTTP face of the platform: the routes of gateway/openapi.yaml, the
// gates in front of the buying path, and the one table that maps the
// platform's errors to HTTP. It is the only package that imports Fiber and
// the only one that knows status codes.
//
// Everything it needs comes through [Deps] as small interfaces declared here;
// cmd wires the real implementations. The buying route's gates (rate limits,
// captcha, breaker, sold-out flag) are the optional steps of [Gates], run in
// the order of the README's purchase path.
package gateway

import (
	"context"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/cors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/flashsale/seckill/seckill"
)

// Config is how the gateway serves. The zero value of a field means its
// default, except AdminToken, which is required.
type Config struct {
	// BodyLimit is the largest request body, in bytes (default 4 KiB: every
	// body of the API is a few hundred bytes). Larger bodies get 413 too_large.
	BodyLimit int
	// ReadTimeout bounds reading one request, headers and body (default 10s).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one answer (default 10s).
	WriteTimeout time.Duration
	// IdleTimeout bounds an idle keep-alive connection (default 60s).
	IdleTimeout time.Duration
	// RequestTimeout is the deadline of the context each handler passes to
	// the stores; past it the answer is 503 unavailable (default 10s).
	RequestTimeout time.Duration
	// ReadyTimeout bounds the dependency checks of /readyz (default 2s).
	ReadyTimeout time.Duration
	// ReadyMaxAge is how long a /readyz probe's result is served before the
	// dependencies are asked again (default 1s; see Readiness).
	ReadyMaxAge time.Duration
	// AdminToken is the operators' bearer token for /api/v1/admin/*.
	AdminToken string
	// AllowedOrigins are the browser origins allowed to call the API from
	// another site (CORS), like "https://shop.example". Empty: same origin only.
	AllowedOrigins []string
	// TrustedProxies are the addresses or CIDRs whose X-Forwarded-For is
	// believed for the client IP (per-IP limits). Empty: the peer address.
	TrustedProxies []string
}

// Defaults of Config.
const (
	DefaultBodyLimit      = 4 << 10
	DefaultReadTimeout    = 10 * time.Second
	DefaultWriteTimeout   = 10 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	DefaultReadyTimeout   = 2 * time.Second
	DefaultReadyMaxAge    = time.Second
	// MinAdminTokenLen is the shortest operator token accepted.
	MinAdminTokenLen = 16
)

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.BodyLimit <= 0 {
		c.BodyLimit = DefaultBodyLimit
	}
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	def(&c.RequestTimeout, DefaultRequestTimeout)
	def(&c.ReadyTimeout, DefaultReadyTimeout)
	def(&c.ReadyMaxAge, DefaultReadyMaxAge)
	return c
}

// Deps are what the gateway serves from. Catalog, Buyer, Orders, Stats,
// Accounts and Tokens are required; the rest are optional.
type Deps struct {
	Catalog  Catalog
	Buyer    Buyer
	Orders   OrderReader
	Stats    StatsReader
	Accounts Accounts
	Tokens   TokenVerifier
	// SyncBuyer sells limit and common vouchers. Nil: every kind goes to Buyer.
	SyncBuyer SyncBuyer
	// Lifecycle pays and cancels orders. Nil: those routes answer 503.
	Lifecycle OrderLifecycle
	// Gates are the optional steps in front of the buy.
	Gates Gates
	// Captchas serves GET /api/v1/captcha. Nil: that route answers 503.
	Captchas Captchas
	// Breaker serves GET/PUT /api/v1/admin/breaker. Nil: those answer 503.
	Breaker BreakerAdmin
	// Checks are what /readyz asks (Redis, PostgreSQL, Kafka).
	Checks []Check
	// Static is served at / (index.html) and by file path. Nil: a
	// placeholder page. Swap in web's embedded FS here.
	Static fs.FS
	// Metrics, when set, is served at GET /metrics (promhttp.HandlerFor).
	Metrics http.Handler
	// Registerer, when set, receives the gateway's collectors (requests,
	// latency by route, buy outcomes; see metrics.go). Nil: none.
	Registerer prometheus.Registerer
	// Logger receives the access log and errors. Nil: slog.Default().
	Logger *slog.Logger
	// Live feeds GET /api/v1/ws (ws.go). No Feed: that route answers 503.
	Live Live
	// Room is the waiting rooms (queue.go). Nil: the queue routes and the
	// buys of vouchers with a waiting room answer 503.
	Room WaitingRoom
}

// Server is one gateway instance.
type Server struct {
	cfg         Config
	deps        Deps
	log         *slog.Logger
	app         *fiber.App
	adminDigest [sha256.Size]byte
	proxies     []netip.Prefix // Config.TrustedProxies, parsed
	buyChain    BuyFunc
	ready       *Readiness
	draining    atomic.Bool
	ws          *sockets // open WebSockets (ws.go)
	// catalogCache is the catalog encoded once per change (catalog.go).
	catalogCache catalogCache
	metrics      *metrics

	mu        sync.Mutex
	closed    bool
	listeners []net.Listener
	// staticPaths are the routes of Static other than "/", which the
	// OpenAPI document does not list.
	staticPaths map[string]bool
}

//go:embed openapi.yaml
var openAPIDoc []byte

//go:embed placeholder
var placeholderFS embed.FS

// New builds the gateway. It checks the configuration and the required
// dependencies; it does not listen.
func New(cfg Config, deps Deps) (*Server, error) {
	cfg = cfg.withDefaults()
	if len(cfg.AdminToken) < MinAdminTokenLen {
		return nil, fmt.Errorf("gateway: the admin token must be at least %d characters", MinAdminTokenLen)
	}
	var missing []string
	for name, isNil := range map[string]bool{
		"Catalog": deps.Catalog == nil, "Buyer": deps.Buyer == nil, "Orders": deps.Orders == nil,
		"Stats": deps.Stats == nil, "Accounts": deps.Accounts == nil, "Tokens": deps.Tokens == nil,
	} {
		if isNil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("gateway: missing dependencies: %s", strings.Join(missing, ", "))
	}
	if err := checkOrigins(cfg.AllowedOrigins); err != nil {
		return nil, err
	}
	proxies, err := parseTrustedProxies(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	for _, ch := range deps.Checks {
		if ch.Name == "" || ch.Ping == nil {
			return nil, errors.New("gateway: every readiness check needs a name and a ping")
		}
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Static == nil {
		sub, err := fs.Sub(placeholderFS, "placeholder")
		if err != nil {
			return nil, fmt.Errorf("gateway: placeholder page: %w", err)
		}
		deps.Static = sub
	}

	s := &Server{cfg: cfg, deps: deps, log: deps.Logger, proxies: proxies, adminDigest: sha256.Sum256([]byte(cfg.AdminToken))}
	if s.metrics, err = newMetrics(deps.Registerer); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	if err := s.registerCatalogMetrics(deps.Registerer); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	s.buyChain = s.chain()
	s.ready = NewReadiness(deps.Checks, cfg.ReadyTimeout, cfg.ReadyMaxAge, deps.Logger)
	if s.metrics != nil {
		s.buyChain = s.metrics.countBuys(s.buyChain)
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "seckill",
		BodyLimit:             cfg.BodyLimit,
		ReadTimeout:           cfg.ReadTimeout,
		WriteTimeout:          cfg.WriteTimeout,
		IdleTimeout:           cfg.IdleTimeout,
		ErrorHandler:          s.fiberErrorHandler,
		DisableStartupMessage: true,
		CaseSensitive:         true,
		// No ProxyHeader: the client address is clientAddr's (proxyip.go).
	})
	s.wrapUnknownMethods()
	s.closeUnusedConnsQuietly()
	if err := s.routes(); err != nil {
		return nil, err
	}
	return s, nil
}

// checkOrigins accepts "*" alone, or origins of the form scheme://host[:port]
// with an http or https scheme. Fiber's cors.New panics on anything else,
// and a mistyped SECKILL_ALLOWED_ORIGINS must be a start-up error that names
// the value, not a stack trace.
func checkOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" {
			if len(origins) > 1 {
				return errors.New(`gateway: allowed origin "*" allows every origin and cannot be listed with others`)
			}
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			strings.ContainsAny(u.Host, "*, ") || (u.Path != "" && u.Path != "/") || u.RawQuery != "" ||
			u.Fragment != "" || u.ForceQuery {
			return fmt.Errorf(`gateway: allowed origin %q is not of the form scheme://host[:port] (like "https://shop.example") or "*" alone`, o)
		}
	}
	return nil
}

// routes registers the routes of gateway/openapi.yaml. Middleware first: observe (request id,
// deadline, recover, errors, access log), then CORS when configured.
func (s *Server) routes() error {
	app := s.app
	if s.metrics != nil {
		app.Use(s.metrics.middleware)
	}
	app.Use(s.observe)
	if len(s.cfg.AllowedOrigins) > 0 {
		app.Use(cors.New(cors.Config{
			AllowOrigins:  strings.Join(s.cfg.AllowedOrigins, ","),
			AllowMethods:  "GET,POST,PUT,DELETE,OPTIONS",
			AllowHeaders:  "Authorization,Content-Type,Idempotency-Key,Seckill-Pass,X-Request-Id",
			ExposeHeaders: "Retry-After,X-Request-Id,RateLimit-Limit,RateLimit-Remaining,RateLimit-Reset",
			MaxAge:        600,
		}))
	}

	// API answers are per user and per moment: no cache may keep them. The
	// catalog's answers say otherwise for themselves (CatalogCacheControl).
	api := app.Group("/api/v1", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.Next()
	})
	api.Post("/users", s.perAddress, s.register)
	api.Post("/sessions", s.perAddress, s.login)
	api.Get("/captcha", s.perAddress, s.newCaptcha)
	api.Get("/vouchers", s.perAddress, s.listVouchers)
	api.Get("/vouchers/:id", s.perAddress, s.getVoucher)
	api.Post("/vouchers/:id/orders", s.requireShopper, s.buy)
	api.Post("/vouchers/:id/queue", s.requireShopper, s.joinQueue)
	api.Get("/vouchers/:id/queue", s.requireShopper, s.queueStatus)
	api.Get("/orders", s.requireShopper, s.listOrders)
	api.Get("/orders/:id", s.requireShopper, s.getOrder)
	if err := s.mountWebSocket(api); err != nil {
		return err
	}
	api.Post("/orders/:id/pay", s.requireShopper, s.payOrder)
	api.Post("/orders/:id/cancel", s.requireShopper, s.cancelOrder)

	admin := api.Group("/admin", s.requireAdmin)
	s.mountPprof(admin)
	admin.Post("/vouchers", s.createVoucher)
	admin.Get("/vouchers/:id/stats", s.voucherStats)
	admin.Put("/vouchers/:id/state", s.setVoucherState)
	admin.Get("/breaker", s.breakerStatus)
	admin.Put("/breaker", s.switchBreaker)

	app.Get("/healthz", s.healthz)
	app.Get("/readyz", s.readyz)
	app.Get("/openapi.yaml", s.openAPI)
	if s.deps.Metrics != nil {
		app.Get("/metrics", adaptor.HTTPHandler(s.deps.Metrics))
	}
	return s.mountStatic(s.deps.Static)
}

// App is the Fiber app, for app.Test in tests and for later routes.
func (s *Server) App() *fiber.App { return s.app }

// Listen serves on the TCP address addr until Shutdown.
func (s *Server) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("gateway: listen: %w", err)
	}
	return s.Serve(ln)
}

// Serve serves on ln until Shutdown, and then returns nil.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	err := s.app.Listener(ln)
	if err != nil && s.isClosed() && errors.Is(err, net.ErrClosed) {
		return nil // Shutdown closed ln before fasthttp had taken it
	}
	return err
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Shutdown makes /readyz answer 503, stops accepting connections and waits
// for in-flight requests to finish, or for ctx. It may be called before, during
// or after Serve.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.mu.Lock()
	s.closed = true
	lns := s.listeners
	s.mu.Unlock()
	err := s.app.ShutdownWithContext(ctx)
	// fasthttp closes the listener it serves on; one that Serve was about to
	// hand it is closed here, so that Serve returns either way.
	for _, ln := range lns {
		_ = ln.Close()
	}
	err = errors.Join(err, s.closeSockets(ctx)) // fasthttp forgets hijacked connections
	return err
}

func (s *Server) healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

// readyz answers from Readiness: a probe at most ReadyMaxAge old, one in
// flight at a time. The failing checks are named (never their errors, which
// are logged).
func (s *Server) readyz(c *fiber.Ctx) error {
	if s.draining.Load() {
		return seckill.Public(seckill.ErrUnavailable, "shutting down")
	}
	failed, err := s.ready.Failed(c.UserContext())
	if err != nil {
		return seckill.Public(seckill.ErrUnavailable, "not ready: the readiness probe did not finish in time")
	}
	if len(failed) > 0 {
		return seckill.Public(seckill.ErrUnavailable, "not ready: "+strings.Join(failed, ", ")+" unreachable")
	}
	checks := make(fiber.Map, len(s.deps.Checks))
	for _, ch := range s.deps.Checks {
		checks[ch.Name] = "ok"
	}
	return c.JSON(fiber.Map{"status": "ready", "checks": checks})
}

func (s *Server) openAPI(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, "application/yaml")
	return c.Send(openAPIDoc)
}

// wrapUnknownMethods answers a method Fiber does not know ("FOO") with
// the API's error body. Fiber's router refuses such a request itself, before
// any middleware, with a text/plain 400; this check sits in front of it, in
// the fasthttp handler that Serve, Listen and App().Test all run.
func (s *Server) wrapUnknownMethods() {
	methods := s.app.Config().RequestMethods
	srv := s.app.Server()
	next := srv.Handler
	srv.Handler = func(rctx *fasthttp.RequestCtx) {
		m := rctx.Method()
		for _, known := range methods {
			if string(m) == known {
				next(rctx)
				return
			}
		}
		c := s.app.AcquireCtx(rctx)
		defer s.app.ReleaseCtx(c)
		_ = s.fiberErrorHandler(c, invalid("this address does not know that HTTP method"))
	}
}

// closeUnusedConnsQuietly closes, without writing a byte, a connection on
// which not one byte of a request arrived before the read timeout.
//
// fasthttp already closes an idle keep-alive connection quietly, but only
// from its second request on: on a connection that has not carried a
// request yet it hands the bare timeout to the error handler, and Fiber's
// answer to that (408, which this gateway's table makes 503 unavailable,
// Connection: close) is written on a connection nobody asked anything on.
// HTTP clients dial such connections all the time: net/http dials one for a
// request that waits, then gives the request an idle connection freed
// meanwhile and parks the new one in its pool. When the 503 lands there, the
// client logs "Unsolicited response received on idle HTTP channel", and a
// client that writes its next request at that moment reads the 503 as its
// answer. A request that timed out halfway (headers begun, body short)
// still gets its error answer: fasthttp wraps those errors, and only a
// read that got nothing at all returns the network error itself.
func (s *Server) closeUnusedConnsQuietly() {
	srv := s.app.Server()
	next := srv.ErrorHandler
	srv.ErrorHandler = func(ctx *fasthttp.RequestCtx, err error) {
		if _, nothingRead := err.(net.Error); nothingRead { //nolint:errorlint // only the bare error means nothing was read
			// Closed before fasthttp writes its answer: the write fails
			// and nothing reaches the client but the FIN.
			_ = ctx.Conn().Close()
			return
		}
		next(ctx, err)
	}
}
