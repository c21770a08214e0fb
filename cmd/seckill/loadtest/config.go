package loadtest

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/seckill/seckill"
)

// Environment variables the tool reads, the same ones the server reads, so
// one environment drives both.
const (
	EnvAdminToken = "SECKILL_ADMIN_TOKEN"
	EnvJWTSecret  = "SECKILL_JWT_SECRET"
	// EnvURL overrides the default base URL (the -url flag still wins).
	EnvURL = "SECKILL_LOADTEST_URL"
)

// Config is one flash sale to reproduce. DefaultConfig gives sensible
// values; ParseFlags fills it from a command line.
type Config struct {
	// BaseURL is where the system under test answers, e.g. http://127.0.0.1:8080.
	BaseURL string
	// AdminToken creates the voucher and reads its stats.
	AdminToken string
	// JWTSecret signs the shopper tokens the tool mints for itself.
	JWTSecret string

	// Shoppers is how many distinct users take part.
	Shoppers int
	// FirstUserID is the user id of the first shopper; the others follow.
	FirstUserID int64
	// Attempts is how many buy requests each shopper sends.
	Attempts int
	// Stock is what the voucher puts on sale.
	Stock int64
	// PerUserLimit is the voucher's per-user limit.
	PerUserLimit int64
	// Kind is the voucher kind: seckill, limit or common.
	Kind string
	// PriceCents is the voucher's unit price.
	PriceCents int64
	// Quantities is the mix of quantities the shoppers ask for.
	Quantities QuantityMix
	// ReplayShare is the share (0..1) of attempts after a shopper's first
	// that re-send one of that shopper's earlier Idempotency-Keys.
	ReplayShare float64

	// Concurrency is the number of requests in flight at most, and the
	// number of warm connections prepared before the opening.
	Concurrency int
	// Rate paces the crowd to this many requests per second; 0 sends as fast
	// as Concurrency allows.
	Rate float64
	// Duration caps the crowd phase: nothing new is sent after it.
	Duration time.Duration
	// OpenIn is how long after its creation the voucher opens.
	OpenIn time.Duration
	// PersistWait bounds the wait for accepted orders to be persisted.
	PersistWait time.Duration
	// Timeout bounds every single HTTP request.
	Timeout time.Duration
	// Seed makes the request mix reproducible; 0 picks one from the clock.
	Seed int64

	// JSON prints the report as JSON instead of a table.
	JSON bool
	// HTMLFile, when set, is where the HTML report with charts is written.
	HTMLFile string
	// NoProgress silences the progress line even on a terminal.
	NoProgress bool

	// Ceiling, when set, is a path (like /healthz) to load instead of
	// selling: RunCeiling measures the trivial route's rate with the
	// crowd's shape, for Concurrency workers during Duration.
	Ceiling string
}

// DefaultConfig returns a small sale that sells out: 2000 shoppers, two
// attempts each, for 100 units.
func DefaultConfig() Config {
	return Config{
		BaseURL:      "http://127.0.0.1:8080",
		Shoppers:     2000,
		FirstUserID:  1_000_000,
		Attempts:     2,
		Stock:        100,
		PerUserLimit: 1,
		Kind:         string(seckill.KindSeckill),
		PriceCents:   100,
		Quantities:   QuantityMix{{Quantity: 1, Weight: 1}},
		ReplayShare:  0.1,
		Concurrency:  64,
		Duration:     60 * time.Second,
		OpenIn:       3 * time.Second,
		PersistWait:  30 * time.Second,
		Timeout:      10 * time.Second,
	}
}

// Validate reports what is wrong with c, wrapping seckill.ErrInvalidInput.
func (c Config) Validate() error {
	var problems []string
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problems = append(problems, fmt.Sprintf("url %q must be http(s)://host[:port]", c.BaseURL))
	}
	if c.AdminToken == "" && c.Ceiling == "" {
		problems = append(problems, EnvAdminToken+" is not set")
	}
	if c.JWTSecret == "" && c.Ceiling == "" {
		problems = append(problems, EnvJWTSecret+" is not set")
	}
	if c.Ceiling != "" && !strings.HasPrefix(c.Ceiling, "/") {
		problems = append(problems, "ceiling must be a path starting with /")
	}
	if c.Shoppers < 1 {
		problems = append(problems, "shoppers must be at least 1")
	}
	if c.FirstUserID < 1 {
		problems = append(problems, "first-user must be at least 1")
	}
	if c.Attempts < 1 {
		problems = append(problems, "attempts must be at least 1")
	}
	if c.Stock < 1 {
		problems = append(problems, "stock must be at least 1")
	}
	if c.PerUserLimit < 1 {
		problems = append(problems, "limit must be at least 1")
	}
	if !seckill.Kind(c.Kind).Valid() {
		problems = append(problems, "kind must be seckill, limit or common")
	}
	if c.PriceCents < 0 {
		problems = append(problems, "price must not be negative")
	}
	if err := c.Quantities.validate(); err != nil {
		problems = append(problems, err.Error())
	}
	if c.ReplayShare < 0 || c.ReplayShare > 1 {
		problems = append(problems, "replay must be between 0 and 1")
	}
	if c.Concurrency < 1 {
		problems = append(problems, "concurrency must be at least 1")
	}
	if c.Rate < 0 {
		problems = append(problems, "rate must not be negative")
	}
	if c.Duration <= 0 {
		problems = append(problems, "duration must be positive")
	}
	// The tool needs the time to learn the server clock (up to a second),
	// create the voucher and warm the connections before the opening.
	if c.OpenIn < time.Second {
		problems = append(problems, "open-in must be at least 1s")
	}
	if c.PersistWait < 0 {
		problems = append(problems, "persist-wait must not be negative")
	}
	if c.Timeout <= 0 {
		problems = append(problems, "timeout must be positive")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: loadtest: %s", seckill.ErrInvalidInput, strings.Join(problems, "; "))
	}
	return nil
}

// QuantityShare is one quantity of the mix and its relative weight.
type QuantityShare struct {
	Quantity int64
	Weight   int
}

// QuantityMix is the quantities shoppers ask for, written "1:80,2:20"
// (quantity:weight, weights relative). A bare "1" means always 1.
type QuantityMix []QuantityShare

// String writes the mix back in the flag's syntax.
func (m QuantityMix) String() string {
	parts := make([]string, len(m))
	for i, s := range m {
		parts[i] = fmt.Sprintf("%d:%d", s.Quantity, s.Weight)
	}
	return strings.Join(parts, ",")
}

// Set parses the flag's syntax; it implements flag.Value.
func (m *QuantityMix) Set(s string) error {
	mix, err := ParseQuantityMix(s)
	if err != nil {
		return err
	}
	*m = mix
	return nil
}

// ParseQuantityMix parses "1:80,2:20" or "1".
func ParseQuantityMix(s string) (QuantityMix, error) {
	var mix QuantityMix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		q, w, hasWeight := strings.Cut(part, ":")
		qty, err := strconv.ParseInt(strings.TrimSpace(q), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("quantity mix %q: bad quantity %q", s, q)
		}
		weight := 1
		if hasWeight {
			weight, err = strconv.Atoi(strings.TrimSpace(w))
			if err != nil {
				return nil, fmt.Errorf("quantity mix %q: bad weight %q", s, w)
			}
		}
		mix = append(mix, QuantityShare{Quantity: qty, Weight: weight})
	}
	if err := mix.validate(); err != nil {
		return nil, err
	}
	return mix, nil
}

func (m QuantityMix) validate() error {
	if len(m) == 0 {
		return errors.New("quantity mix is empty")
	}
	for _, s := range m {
		if s.Quantity < 1 || s.Weight < 1 {
			return fmt.Errorf("quantity mix %q: quantities and weights must be at least 1", m.String())
		}
	}
	return nil
}

// pick maps u in [0,1) to a quantity by weight.
func (m QuantityMix) pick(u float64) int64 {
	total := 0
	for _, s := range m {
		total += s.Weight
	}
	x := u * float64(total)
	for _, s := range m {
		x -= float64(s.Weight)
		if x < 0 {
			return s.Quantity
		}
	}
	return m[len(m)-1].Quantity
}

// flagSet binds every flag to a field of cfg.
func flagSet(cfg *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.StringVar(&cfg.BaseURL, "url", cfg.BaseURL, "base URL of the running system (env "+EnvURL+")")
	fs.IntVar(&cfg.Shoppers, "shoppers", cfg.Shoppers, "distinct shoppers in the crowd")
	fs.Int64Var(&cfg.FirstUserID, "first-user", cfg.FirstUserID, "user id of the first shopper (the others follow)")
	fs.IntVar(&cfg.Attempts, "attempts", cfg.Attempts, "buy requests per shopper")
	fs.Int64Var(&cfg.Stock, "stock", cfg.Stock, "stock of the voucher the tool creates")
	fs.Int64Var(&cfg.PerUserLimit, "limit", cfg.PerUserLimit, "per-user limit of the voucher")
	fs.StringVar(&cfg.Kind, "kind", cfg.Kind, "voucher kind: seckill, limit or common")
	fs.Int64Var(&cfg.PriceCents, "price", cfg.PriceCents, "unit price in cents")
	fs.Var(&cfg.Quantities, "qty", `quantity mix, "quantity:weight,...", e.g. "1:80,2:20"`)
	fs.Float64Var(&cfg.ReplayShare, "replay", cfg.ReplayShare, "share (0..1) of later attempts that replay an earlier Idempotency-Key of the same shopper")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "requests in flight at most (and warm connections)")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "target requests per second; 0 = as fast as the concurrency allows")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "cap on the crowd phase; nothing new is sent after it")
	fs.DurationVar(&cfg.OpenIn, "open-in", cfg.OpenIn, "the voucher opens this long after it is created (at least 1s)")
	fs.DurationVar(&cfg.PersistWait, "persist-wait", cfg.PersistWait, "how long to wait for accepted orders to be persisted")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "timeout of each HTTP request")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "random seed of the request mix; 0 = from the clock")
	fs.BoolVar(&cfg.JSON, "json", cfg.JSON, "print the report as JSON on stdout")
	fs.StringVar(&cfg.HTMLFile, "html", cfg.HTMLFile, "also write a self-contained HTML report with charts to this file")
	fs.BoolVar(&cfg.NoProgress, "no-progress", cfg.NoProgress, "no progress line, even on a terminal")
	fs.StringVar(&cfg.Ceiling, "ceiling", cfg.Ceiling, "instead of a sale, load this path (e.g. /healthz) for -duration on -concurrency connections and report its rate")
	return fs
}

// ParseFlags builds a Config from the subcommand's arguments (without the
// subcommand name) and the environment (os.Getenv, or a map's lookup in
// tests; nil means an empty environment). The admin token and the JWT secret
// come only from the environment, never from flags, so they stay out of
// process listings. On -h it returns flag.ErrHelp; print Usage then.
func ParseFlags(args []string, env func(string) string) (Config, error) {
	if env == nil {
		env = func(string) string { return "" }
	}
	cfg := DefaultConfig()
	cfg.AdminToken = env(EnvAdminToken)
	cfg.JWTSecret = env(EnvJWTSecret)
	if v := env(EnvURL); v != "" {
		cfg.BaseURL = v
	}
	fs := flagSet(&cfg)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, fmt.Errorf("%w: loadtest: %w (see -h)", seckill.ErrInvalidInput, err)
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("%w: loadtest: unexpected argument %q (see -h)", seckill.ErrInvalidInput, fs.Arg(0))
	}
	return cfg, cfg.Validate()
}

// Usage writes the subcommand's help to w.
func Usage(w io.Writer) {
	cfg := DefaultConfig()
	fs := flagSet(&cfg)
	fs.SetOutput(w)
	fmt.Fprintf(w, `usage: seckill loadtest [flags]

Reproduces a flash sale against a running system over HTTP and checks that it
sold honestly. It creates its own voucher opening -open-in later, mints shopper
tokens with %s, releases the crowd at the opening second of the server's
clock, waits until every accepted order is persisted, then checks the
invariants through the API. Exits non-zero when one fails.

Environment: %s (required), %s (required), %s (optional base URL).

Flags:
`, EnvJWTSecret, EnvAdminToken, EnvJWTSecret, EnvURL)
	fs.PrintDefaults()
}
