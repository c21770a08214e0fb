// Package gateway is the platform's HTTP face.
//
// It serves the routes of gateway/openapi.yaml (the WebSocket among them),
// hands each buy to the pipeline of gateway/buy, and holds the one table that
// maps the platform's errors to HTTP. It is the only package that imports Fiber and
// the only one that knows status codes.
//
// Everything it needs comes through [Deps] as small interfaces declared here;
// cmd wires the real implementations. The buy comes whole: Deps.Buy is the
// buy.Pipeline that cmd builds with its steps (rate limits, captcha,
// breaker, sold-out flag), run in the order written on buy.Pipeline.
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
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/payment"
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
	// MaxConns caps this instance's open connections, WebSockets included:
	// one more is closed as soon as it is accepted (connlimit.go). Zero: no
	// cap. DescriptorCaps sizes it below the open-file limit.
	MaxConns int
	// MaxConnsPerAddr caps the open connections of one client address: the
	// TCP peer, an IPv6 /56 counting as one. TrustedProxies are exempt, since
	// every client behind them shares their address (MaxConns still holds).
	// Zero: DefaultMaxConnsPerAddr; negative: no cap.
	MaxConnsPerAddr int
	// RegisterChallenge is what registering an account takes beside its
	// address's budget: RegisterCaptcha (the zero value's meaning: a
	// solved captcha of Deps.Captchas), RegisterPoW (a solved proof of
	// work of Deps.Challenges) or RegisterNone.
	RegisterChallenge string
}

// The challenges of Config.RegisterChallenge.
const (
	RegisterCaptcha = "captcha"
	RegisterPoW     = "pow"
	RegisterNone    = "none"
)

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
	if c.MaxConnsPerAddr == 0 {
		c.MaxConnsPerAddr = DefaultMaxConnsPerAddr
	}
	return c
}

// Deps are what the gateway serves from. Catalog, Buy, Orders, Stats,
// Accounts and Tokens are required; the rest are optional.
type Deps struct {
	Catalog Catalog
	// Buy is the buy of POST /api/v1/vouchers/{id}/orders, whole: its
	// sellers, steps, waiting rooms and replays (gateway/buy). The gateway
	// only decodes each request into its attempt and encodes the answer; it
	// also asks the buy's captcha of a waiting room's join.
	Buy      *buy.Pipeline
	Orders   OrderReader
	Stats    StatsReader
	Accounts Accounts
	Tokens   TokenVerifier
	// Lifecycle pays and cancels orders. Nil: those routes answer 503.
	Lifecycle OrderLifecycle
	// Payments takes payments through a provider and its events, and
	// operators' refunds (orders.Lifecycle implements it). Nil: those
	// routes answer 503.
	Payments OrderPayments
	// StripeEvents checks Stripe's signed webhook deliveries
	// (orders/payment/stripepay). Nil when Stripe is not the provider: every
	// delivery is then refused as unsigned.
	StripeEvents payment.Verifier
	// PaymentMetrics counts refused webhook deliveries; may be nil.
	PaymentMetrics *orders.PaymentMetrics
	// Gates are the optional limits of the routes other than the buy.
	Gates Gates
	// Captchas serves GET /api/v1/captcha. Nil: that route answers 503.
	Captchas Captchas
	// Challenges serves GET /api/v1/challenges. Nil: that route answers
	// 503.
	Challenges Challenges
	// Breaker serves GET/PUT /api/v1/admin/breaker. Nil: those answer 503.
	Breaker BreakerAdmin
	// Checks are what /readyz asks (Redis, PostgreSQL, Kafka).
	Checks []Check
	// Static is served at / (index.html) and by file path. Nil: a
	// placeholder page. Swap in web's embedded FS here.
	Static fs.FS
	// Registerer, when set, receives the gateway's collectors (requests,
	// latency by route, buy outcomes; see metrics.go). Nil: none.
	Registerer prometheus.Registerer
	// Logger receives the access log and errors. Nil: slog.Default().
	Logger *slog.Logger
	// Tracer, when set, makes a span of every request (joined to the
	// caller's traceparent, which the answer carries back) and of every
	// step of the buy (gateway/trace.go, gateway/buy/trace.go). Nil: no
	// spans, and nothing paid for them.
	Tracer trace.Tracer
	// Live feeds GET /api/v1/ws (ws.go). No Feed: that route answers 503.
	Live Live
	// Room is the waiting rooms (queue.go). Nil: the queue routes answer
	// 503 (the buy's own room is Buy's).
	Room WaitingRoom
	// Draws is the sales by draw (queue.go). Nil: the queue routes of
	// vouchers sold by draw answer 503.
	Draws Draws
	// Holds holds draw entrants' cards (queue.go). Nil (a provider that
	// holds no money): a voucher with waiting_room.draw_hold is refused.
	Holds DrawHolds
	// Sales counts the buy attempts for the sale report. Nil: none.
	Sales SaleRecorder
	// Reminders keeps shoppers' push subscriptions and e-mail addresses
	// (reminders.go). Nil: those routes answer 503.
	Reminders Reminders
	// PushKey is the VAPID public key pages subscribe with. "": Web Push
	// is off, GET /api/v1/push/key and subscribing answer 503.
	PushKey string
	// Reports answers the sale report routes. Nil: they answer 503.
	Reports SaleReports
	// AdmitRates gives each line its rate in force, so the estimated wait
	// of a place read or joined uses an adaptive room's current rate
	// (*waitroom.Adapter implements it). Nil: the voucher's
	// admit_per_second.
	AdmitRates AdmitRates
	// Operators is the named operators' tokens, the trail of their
	// changes and the answers kept for keyed changes (operators.go). Nil:
	// only SECKILL_ADMIN_TOKEN opens the operator routes, GET
	// /api/v1/admin/actions answers 503, and a change with an
	// Idempotency-Key is refused 503.
	Operators Operators
	// Eligibility judges who may join a line or enter a draw of a voucher
	// with an entry rule, and keeps its allowlist (eligibility.go). Nil:
	// joining such a voucher answers 503.
	Eligibility Eligibility
}

// Server is one gateway instance.
type Server struct {
	cfg         Config
	deps        Deps
	log         *slog.Logger
	app         *fiber.App
	adminDigest [sha256.Size]byte
	operators   *operatorTokens               // Deps.Operators' live tokens, nil without it
	keyed       seckill.KeyTurns[keyedChange] // the keyed changes in progress here (adminonce.go)
	proxies     []netip.Prefix                // Config.TrustedProxies, parsed
	pipeline    *buy.Pipeline                 // Deps.Buy, telling its answers to the buy outcomes (metrics.go)
	ready       *Readiness
	draining    atomic.Bool
	ws          *sockets // open WebSockets (ws.go)
	// catalogCache is the catalog encoded once per change (catalog.go).
	catalogCache catalogCache
	metrics      *metrics
	conns        *connMetrics // the listener's (connlimit.go)

	mu        sync.Mutex
	closed    bool
	listeners []net.Listener
	// staticPaths are the routes of Static other than "/", which the
	// OpenAPI document does not list.
	staticPaths map[string]bool
}

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
		"Catalog": deps.Catalog == nil, "Buy": deps.Buy == nil, "Orders": deps.Orders == nil,
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
	if deps.Operators != nil {
		s.operators = &operatorTokens{src: deps.Operators}
	}
	if s.metrics, err = newMetrics(deps.Registerer); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	if s.conns, err = newConnMetrics(deps.Registerer); err != nil {
		return nil, err
	}
	if err := s.registerCatalogMetrics(deps.Registerer); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	s.pipeline = deps.Buy.WithTracer(deps.Tracer)
	if s.metrics != nil {
		s.pipeline = s.pipeline.WithOutcome(s.metrics.countBuy).WithSale(s.metrics.timeSale)
	}
	s.ready = NewReadiness(deps.Checks, cfg.ReadyTimeout, cfg.ReadyMaxAge, deps.Logger)
	s.app = fiber.New(fiber.Config{
		AppName:               "seckill",
		BodyLimit:             s.readLimit(),
		ReadBufferSize:        headLimit,
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
	s.answerOversizedBodies()
	if err := s.openSockets(); err != nil {
		return nil, err
	}
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

// Serve serves on ln until Shutdown, and then returns nil. Accept errors
// that pass by themselves, like too many open files, are waited out, and the
// connections are capped (Config.MaxConns, Config.MaxConnsPerAddr).
func (s *Server) Serve(ln net.Listener) error {
	ln = newConnListener(ln, s.log, s.conns, s.cfg.MaxConns, max(s.cfg.MaxConnsPerAddr, 0), s.trusted)
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
