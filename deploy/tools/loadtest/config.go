package loadtest

// A sale's configuration: Config, its defaults, its checks and its flags.
// The file is long by the number of knobs (a field, a check and a flag
// each), not by logic, and a reader looks one knob up at a time.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Environment variables the tool reads, the same ones the server reads, so
// one environment drives both.
const (
	EnvAdminToken = "SECKILL_ADMIN_TOKEN"
	EnvJWTSecret  = "SECKILL_JWT_SECRET"
	// EnvURL overrides the default base URL (the -url flag still wins).
	EnvURL = "SECKILL_LOADTEST_URL"
	// EnvMetricsURL is the gateway's ops listener (the -metrics-url flag
	// still wins).
	EnvMetricsURL = "SECKILL_LOADTEST_METRICS_URL"
)

// Config is one flash sale to reproduce. DefaultConfig gives sensible
// values; ParseFlags fills it from a command line.
type Config struct {
	// BaseURL is where the system under test answers, e.g. http://127.0.0.1:8080.
	// The tool's own calls (the clock, the voucher, the checks) go there.
	BaseURL string
	// Targets are the base URLs of every gateway the sale's buys and the
	// ceiling's requests are spread over, in turn, as a load balancer
	// would; BaseURL is the first. Empty means BaseURL alone.
	Targets []string
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
	// Shards is the voucher's shards (buckets of its stock in Redis, 1 to
	// seckill.MaxShards); 0 leaves it to the server's default.
	Shards int
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
	// PauseBeforeChecks is a quiet stretch between the crowd's last answer
	// and the tool's own reads (the persistence wait and the checks), so
	// that a reader of the services' counters (make bench's cost table)
	// can tell what the crowd cost from what the checking costs.
	PauseBeforeChecks time.Duration
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

	// Churn, when set, replaces the flash sale by a soak: buy then cancel,
	// again and again, for this long, with Redis's memory sampled (RunChurn).
	Churn time.Duration
	// RedisURL is the Redis whose memory the churn mode reads.
	RedisURL string

	// Ceiling, when set, is a path (like /healthz) to load instead of
	// selling: RunCeiling measures the trivial route's rate with the
	// crowd's shape, for Concurrency workers during Duration.
	Ceiling string

	// Crowd runs the real crowd (RunCrowd) instead of a sale: page visits
	// that read the catalog and hold sockets open, honest shoppers who buy
	// once, and bots. The fields below are its own; Stock, PerUserLimit,
	// Kind, PriceCents, Concurrency, OpenIn, Timeout and Seed apply too.
	Crowd bool
	// CatalogReads is the catalog phase's GETs: half the list, half single
	// vouchers, on Concurrency connections; GET /healthz gets as many as
	// each half, on the same connections, as the yardstick.
	CatalogReads int
	// FreshShare is the share (0..1) of catalog reads sent without
	// If-None-Match, as from new visitors; the others revalidate the ETag
	// their page was given, as a browser or a CDN does.
	FreshShare float64
	// CatalogSize is how many vouchers the catalog should list; the tool
	// creates on-sale vouchers until it does.
	CatalogSize int
	// Sockets is how many WebSockets the open pages hold during the sale.
	Sockets int
	// Buyers is how many honest shoppers buy once each, at random moments
	// spread over CrowdFor.
	Buyers int
	// Bots is how many bot accounts, each on one address, send buys as
	// fast as BotConns connections allow for all of CrowdFor.
	Bots     int
	BotConns int
	// Visitors is how many pages keep reading the catalog during the sale.
	Visitors int
	// CrowdFor is how long the sale's crowd lasts.
	CrowdFor time.Duration
	// DatabaseURL is where PostgreSQL's transaction counters are read; when
	// empty, the private cluster of a `seckill dev` running on DataDir.
	DatabaseURL string
	DataDir     string
	// DevEnv is the devstack.EnvFile ParseFlags took unset settings from, if any.
	DevEnv string
	// PGSettle is how long the tool waits before reading the counters after
	// a phase: PostgreSQL publishes an idle backend's counts within 10 s.
	PGSettle time.Duration
	// OneAddress sends everything from the machine's default address
	// instead of one loopback address per client (crowd), and the sale's
	// shoppers without the address of their own that they otherwise name
	// in X-Forwarded-For (shopperAddr): the per-address limits then meet
	// the whole crowd as one client.
	OneAddress bool

	// MetricsURL is the base URL of the gateway's ops listener
	// (SECKILL_OPS_ADDR), where the room run reads the gateway's own
	// figures from /metrics; the shoppers' port serves none. Empty: those
	// figures are not read.
	MetricsURL string
	// Room, when above 0, runs the waiting-room scenario (room.go) instead
	// of a sale: that many shoppers join a voucher's line.
	Room int
	// RoomRate is the voucher's admit_per_second.
	RoomRate int64
	// RoomPrequeue is the share of shoppers joining before begin_at.
	RoomPrequeue float64
	// RoomBots are bots buying without, with forged, stolen and reused passes.
	RoomBots int
	// RoomSockets are shoppers watching their place on a WebSocket.
	RoomSockets int
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

		CatalogReads: 20_000,
		CatalogSize:  40,
		FreshShare:   0.1,
		Sockets:      1000,
		Buyers:       100,
		Bots:         1,
		BotConns:     16,
		Visitors:     4,
		CrowdFor:     5 * time.Second,
		DataDir:      ".run",
		PGSettle:     11 * time.Second,

		RoomRate:     1000,
		RoomPrequeue: 0.5,
		RoomBots:     20,
		RoomSockets:  200,
	}
}

// Validate reports what is wrong with c, wrapping apperr.ErrInvalidInput.
func (c Config) Validate() error {
	flags, env := c.problems(false)
	return problemsError(append(flags, env...))
}

// problemsError is the error of a list of problems; nil for none.
func problemsError(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("loadtest: %w: %s", apperr.ErrInvalidInput, strings.Join(problems, "; "))
}

// problems lists what is wrong with c in two lists, by who can right it:
// flags, what the command line sets; env, what only the environment or a
// dev.env gives: the secrets, and the base URL when urlFromEnv. A command
// line is refused with its usage (UsageError); a missing secret is a
// failure of the setting, as seckill's configuration errors are.
func (c Config) problems(urlFromEnv bool) (flags, env []string) {
	var problems []string
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad := fmt.Sprintf("url %q must be http(s)://host[:port]", c.BaseURL)
		if urlFromEnv {
			env = append(env, bad)
		} else {
			problems = append(problems, bad)
		}
	}
	for _, t := range c.Targets {
		if u, err := url.Parse(t); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Sprintf("target %q must be host:port or http(s)://host[:port]", t))
		}
	}
	if c.Shards < 0 || c.Shards > seckill.MaxShards {
		problems = append(problems, fmt.Sprintf("shards must be 1 to %d", seckill.MaxShards))
	}
	if c.AdminToken == "" && c.Ceiling == "" {
		env = append(env, EnvAdminToken+" is not set"+c.notInDevEnv())
	}
	if c.JWTSecret == "" && c.Ceiling == "" {
		env = append(env, EnvJWTSecret+" is not set"+c.notInDevEnv())
	}
	if c.Ceiling != "" && !strings.HasPrefix(c.Ceiling, "/") {
		problems = append(problems, "ceiling must be a path starting with /")
	}
	if c.Room < 0 || (c.Room > 0 && (c.RoomRate < 1 || c.RoomPrequeue < 0 || c.RoomPrequeue > 1 || c.RoomBots < 0 || c.RoomSockets < 0)) {
		problems = append(problems, "room needs room-rate at least 1, room-prequeue 0..1, room-bots and room-sockets 0 or more")
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
	if c.PauseBeforeChecks < 0 {
		problems = append(problems, "pause-before-checks must not be negative")
	}
	if c.Timeout <= 0 {
		problems = append(problems, "timeout must be positive")
	}
	if c.Crowd {
		switch {
		case c.CatalogReads < 2:
			problems = append(problems, "catalog-reads must be at least 2")
		case c.FreshShare < 0 || c.FreshShare > 1:
			problems = append(problems, "fresh must be between 0 and 1")
		case c.CatalogSize < 1:
			problems = append(problems, "catalog-size must be at least 1")
		case c.Sockets < 0 || c.Visitors < 0 || c.Bots < 0:
			problems = append(problems, "sockets, visitors and bots must not be negative")
		case c.Buyers < 1:
			problems = append(problems, "buyers must be at least 1")
		case c.BotConns < 1:
			problems = append(problems, "bot-conns must be at least 1")
		case c.CrowdFor <= 0:
			problems = append(problems, "crowd-for must be positive")
		case c.PGSettle < 0:
			problems = append(problems, "pg-settle must not be negative")
		}
	}
	return problems, env
}

// UsageError is a command line the load tool refuses before anything runs:
// an unknown scenario, a flag that does not parse or whose value is out of
// range, an argument too many. cmd/loadtest tells it on stderr with the
// usage of Scenario (the tool's own when "") and exits 2, as seckill does;
// a secret missing from the environment is no usage error. It is an
// apperr.ErrInvalidInput, as every input the project refuses is.
type UsageError struct {
	Scenario Scenario
	Err      error
}

func (e *UsageError) Error() string {
	if e.Scenario.valid() {
		return "loadtest " + string(e.Scenario) + ": " + e.Err.Error()
	}
	return "loadtest: " + e.Err.Error()
}

// Unwrap gives errors.Is and errors.As both the kind and the cause.
func (e *UsageError) Unwrap() []error { return []error{apperr.ErrInvalidInput, e.Err} }

// usagef is scenario s's UsageError with a message.
func usagef(s Scenario, format string, args ...any) error {
	return &UsageError{Scenario: s, Err: fmt.Errorf(format, args...)}
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

// Scenario is one of the load tool's runs, each a subcommand of
// deploy/tools/cmd/loadtest with its own flags.
type Scenario string

// The scenarios.
const (
	// ScenarioSale is one flash sale and its invariants (Run).
	ScenarioSale Scenario = "sale"
	// ScenarioCrowd is the real crowd (RunCrowd).
	ScenarioCrowd Scenario = "crowd"
	// ScenarioRoom is the waiting room (RunRoom).
	ScenarioRoom Scenario = "room"
	// ScenarioChurn is the buy-then-cancel soak (RunChurn).
	ScenarioChurn Scenario = "churn"
	// ScenarioCeiling is a trivial route's rate (RunCeiling).
	ScenarioCeiling Scenario = "ceiling"
)

// Scenarios returns every scenario in the order help lists them.
func Scenarios() []Scenario {
	return []Scenario{ScenarioSale, ScenarioCrowd, ScenarioRoom, ScenarioChurn, ScenarioCeiling}
}

// summary is the scenario's one line in the tool's help.
func (s Scenario) summary() string {
	switch s {
	case ScenarioSale:
		return "a flash sale at the opening second, then its invariants"
	case ScenarioCrowd:
		return "the real crowd: catalog beside /healthz, sockets, honest shoppers, bots"
	case ScenarioRoom:
		return "the waiting room: a line admitted at a rate, passes, bots"
	case ScenarioChurn:
		return "a soak: buy then cancel again and again, Redis's memory before and after"
	case ScenarioCeiling:
		return "a trivial route's rate with the crowd's shape (this machine's ceiling)"
	}
	return ""
}

// valid says whether s is one of Scenarios.
func (s Scenario) valid() bool { return s.summary() != "" }

// Defaults of the scenarios' own run lengths and counts.
const (
	defaultChurnFor    = time.Minute
	defaultRoomPeople  = 2000
	defaultCeilingPath = "/healthz"
)

// scenarioConfig is DefaultConfig with s chosen: the field that makes Run
// take s's path set to its default.
func scenarioConfig(s Scenario) Config {
	cfg := DefaultConfig()
	switch s {
	case ScenarioCrowd:
		cfg.Crowd = true
	case ScenarioRoom:
		cfg.Room = defaultRoomPeople
	case ScenarioChurn:
		cfg.Churn = defaultChurnFor
	case ScenarioCeiling:
		cfg.Ceiling = defaultCeilingPath
	}
	return cfg
}

// flagSet binds the flags of scenario s to fields of cfg; a flag a scenario
// does not read is not in its set, so -h lists only what matters to it.
func flagSet(cfg *Config, s Scenario) *flag.FlagSet {
	fs := flag.NewFlagSet("loadtest "+string(s), flag.ContinueOnError)
	in := func(of ...Scenario) bool { return slices.Contains(of, s) }
	sale, crowd, room, churn, ceiling := ScenarioSale, ScenarioCrowd, ScenarioRoom, ScenarioChurn, ScenarioCeiling

	fs.StringVar(&cfg.BaseURL, "url", cfg.BaseURL, "base URL of the running system (env "+EnvURL+")")
	if in(sale, ceiling) {
		fs.Func("target", "gateways to spread the sale's buys and the ceiling's requests over, in turn: host:port or URLs, comma separated (the tool's own calls go to the first; instead of -url)", func(v string) error {
			cfg.Targets = parseTargets(v)
			if len(cfg.Targets) == 0 {
				return errors.New("no address")
			}
			return nil
		})
	}
	if in(sale, crowd, room, churn) {
		fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "SECKILL_DATA_DIR of the `seckill dev` under test, whose "+devstack.EnvFile+" fills what the environment leaves unset (env "+EnvDataDir+")")
	}
	if in(sale, churn) {
		fs.IntVar(&cfg.Shoppers, "shoppers", cfg.Shoppers, "distinct shoppers in the crowd")
	}
	if in(room) {
		fs.IntVar(&cfg.Room, "shoppers", cfg.Room, "shoppers who join the voucher's line (pre-queue and late), admitted at -room-rate, buying with passes")
	}
	if in(sale, crowd, room, churn) {
		fs.Int64Var(&cfg.FirstUserID, "first-user", cfg.FirstUserID, "user id of the first shopper (the others follow)")
		fs.Int64Var(&cfg.Stock, "stock", cfg.Stock, "stock of the voucher the tool creates")
		fs.Int64Var(&cfg.PerUserLimit, "limit", cfg.PerUserLimit, "per-user limit of the voucher")
		fs.Int64Var(&cfg.PriceCents, "price", cfg.PriceCents, "unit price in cents")
	}
	if in(sale) {
		fs.IntVar(&cfg.Attempts, "attempts", cfg.Attempts, "buy requests per shopper")
	}
	if in(sale, crowd) {
		fs.StringVar(&cfg.Kind, "kind", cfg.Kind, "voucher kind: seckill, limit or common")
	}
	if in(sale) {
		fs.IntVar(&cfg.Shards, "shards", cfg.Shards, "shards of the voucher: buckets its stock is spread over in Redis (seckill only); 0 = the server's default")
		fs.Var(&cfg.Quantities, "qty", `quantity mix, "quantity:weight,...", e.g. "1:80,2:20"`)
		fs.Float64Var(&cfg.ReplayShare, "replay", cfg.ReplayShare, "share (0..1) of later attempts that replay an earlier Idempotency-Key of the same shopper")
	}
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "requests in flight at most (and warm connections)")
	if in(sale, churn) {
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "target requests (churn: cycles) per second; 0 = as fast as the concurrency allows")
	}
	if in(sale, room, ceiling) {
		fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "cap on the crowd phase (ceiling: how long the route is loaded); nothing new is sent after it")
	}
	if in(sale, crowd, room) {
		fs.DurationVar(&cfg.OpenIn, "open-in", cfg.OpenIn, "the voucher opens this long after it is created (at least 1s)")
	}
	if in(sale, room) {
		fs.DurationVar(&cfg.PersistWait, "persist-wait", cfg.PersistWait, "how long to wait for accepted orders to be persisted")
	}
	if in(sale) {
		fs.DurationVar(&cfg.PauseBeforeChecks, "pause-before-checks", cfg.PauseBeforeChecks, "send nothing for this long after the crowd's last answer, before polling and checking (a reader of the services' counters tells the crowd's cost from the checks')")
	}
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "timeout of each HTTP request")
	if in(sale, crowd, room) {
		fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "random seed of the request mix; 0 = from the clock")
	}
	fs.BoolVar(&cfg.JSON, "json", cfg.JSON, "print the report as JSON on stdout")
	if in(sale) {
		fs.StringVar(&cfg.HTMLFile, "html", cfg.HTMLFile, "also write a self-contained HTML report with charts to this file")
		fs.BoolVar(&cfg.NoProgress, "no-progress", cfg.NoProgress, "no progress line, even on a terminal")
		fs.BoolVar(&cfg.OneAddress, "one-address", cfg.OneAddress, "every shopper as the tool's own address, without an address of its own in X-Forwarded-For (which seckill dev believes from loopback, serve only from SECKILL_TRUSTED_PROXIES): the per-address limits meet the whole crowd as one client")
	}
	if in(churn) {
		fs.DurationVar(&cfg.Churn, "for", cfg.Churn, "how long the soak lasts")
		fs.StringVar(&cfg.RedisURL, "redis", cfg.RedisURL, "Redis URL the soak reads INFO memory from (env "+EnvRedisURL+")")
	}
	if in(ceiling) {
		fs.StringVar(&cfg.Ceiling, "path", cfg.Ceiling, "the route loaded, a path starting with /")
	}
	if in(crowd) {
		fs.IntVar(&cfg.CatalogReads, "catalog-reads", cfg.CatalogReads, "catalog GETs of the catalog phase (half list, half single vouchers)")
		fs.Float64Var(&cfg.FreshShare, "fresh", cfg.FreshShare, "share (0..1) of catalog reads without If-None-Match (new visitors); the others revalidate their ETag")
		fs.IntVar(&cfg.CatalogSize, "catalog-size", cfg.CatalogSize, "vouchers the catalog should list (the tool creates the missing ones)")
		fs.IntVar(&cfg.Sockets, "sockets", cfg.Sockets, "WebSockets held open during the sale")
		fs.IntVar(&cfg.Buyers, "buyers", cfg.Buyers, "honest shoppers, each buying once at a random moment of -crowd-for")
		fs.IntVar(&cfg.Bots, "bots", cfg.Bots, "bot accounts, each on one address, buying as fast as they can")
		fs.IntVar(&cfg.BotConns, "bot-conns", cfg.BotConns, "connections of each bot")
		fs.IntVar(&cfg.Visitors, "visitors", cfg.Visitors, "pages reading the catalog during the sale")
		fs.DurationVar(&cfg.CrowdFor, "crowd-for", cfg.CrowdFor, "how long the sale's crowd lasts")
		fs.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "PostgreSQL whose transactions are counted (env "+EnvDatabaseURL+", which keeps a password out of process listings); default: the cluster of `seckill dev` on -data-dir")
		fs.DurationVar(&cfg.PGSettle, "pg-settle", cfg.PGSettle, "wait before reading PostgreSQL's counters after a phase (PostgreSQL publishes idle backends' counts within 10s)")
		fs.BoolVar(&cfg.OneAddress, "one-address", cfg.OneAddress, "every client from the default address instead of one loopback address each")
	}
	if in(room) {
		fs.StringVar(&cfg.MetricsURL, "metrics-url", cfg.MetricsURL, "base URL of the gateway's ops listener (SECKILL_OPS_ADDR), whose /metrics gives the gateway's line moves and frames (env "+EnvMetricsURL+")")
		fs.Int64Var(&cfg.RoomRate, "room-rate", cfg.RoomRate, "the voucher's admit_per_second")
		fs.Float64Var(&cfg.RoomPrequeue, "room-prequeue", cfg.RoomPrequeue, "share (0..1) of the shoppers who join in the pre-queue, before begin_at (-open-in must leave them time)")
		fs.IntVar(&cfg.RoomBots, "room-bots", cfg.RoomBots, "bots buying without a pass, with forged, stolen and reused passes")
		fs.IntVar(&cfg.RoomSockets, "room-sockets", cfg.RoomSockets, "shoppers watching their place on a WebSocket (push delay)")
	}
	return fs
}

// ParseFlags builds the Config of scenario s from its subcommand's
// arguments (without the subcommand's name) and the environment (os.Getenv,
// or a map's lookup in tests; nil means an empty environment). The admin
// token and the JWT secret come only from the environment, never from
// flags, so they stay out of process listings. On -h it returns
// flag.ErrHelp; print Usage then. A command line it refuses is a
// *UsageError; a setting the environment lacks, another error; both wrap
// apperr.ErrInvalidInput.
func ParseFlags(s Scenario, args []string, env func(string) string) (Config, error) {
	if !s.valid() {
		return Config{}, usagef("", "unknown scenario %q (want one of %v)", s, Scenarios())
	}
	if env == nil {
		env = func(string) string { return "" }
	}
	cfg := scenarioConfig(s)
	cfg.AdminToken = env(EnvAdminToken)
	cfg.JWTSecret = env(EnvJWTSecret)
	if v := env(EnvURL); v != "" {
		cfg.BaseURL = v
	}
	if v := env(EnvDataDir); v != "" {
		cfg.DataDir = v
	}
	if s == ScenarioCrowd {
		cfg.DatabaseURL = env(EnvDatabaseURL)
	}
	if s == ScenarioChurn {
		cfg.RedisURL = env(EnvRedisURL)
	}
	if s == ScenarioRoom {
		cfg.MetricsURL = env(EnvMetricsURL)
	}
	fs := flagSet(&cfg, s)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, &UsageError{Scenario: s, Err: err}
	}
	if fs.NArg() > 0 {
		return cfg, usagef(s, "unexpected argument %q", fs.Arg(0))
	}
	urlSet := false
	fs.Visit(func(f *flag.Flag) { urlSet = urlSet || f.Name == "url" })
	if len(cfg.Targets) > 0 {
		if urlSet {
			return cfg, usagef(s, "-url and -target: give one of them")
		}
		cfg.BaseURL = cfg.Targets[0]
	}
	urlFromFlags := urlSet || len(cfg.Targets) > 0
	if s != ScenarioCeiling {
		var err error
		if cfg.DevEnv, err = fillFromDevEnv(&cfg, urlFromFlags || env(EnvURL) != ""); err != nil {
			return cfg, err
		}
	}
	if s == ScenarioRoom && cfg.Room < 1 {
		return cfg, usagef(s, "shoppers must be at least 1")
	}
	if s == ScenarioChurn && cfg.Churn <= 0 {
		return cfg, usagef(s, "-for must be positive")
	}
	if s == ScenarioCeiling && cfg.Ceiling == "" {
		return cfg, usagef(s, "-path must be a path starting with /")
	}
	flags, fromEnv := cfg.problems(!urlFromFlags)
	if len(flags) > 0 {
		// The command line first; what the environment lacks too, so
		// that one try tells everything.
		return cfg, usagef(s, "%s", strings.Join(append(flags, fromEnv...), "; "))
	}
	return cfg, problemsError(fromEnv)
}

// parseTargets splits a -target list; an entry without a scheme is http.
func parseTargets(v string) []string {
	var out []string
	for t := range strings.SplitSeq(v, ",") {
		t = strings.TrimRight(strings.TrimSpace(t), "/")
		if t == "" {
			continue
		}
		if !strings.Contains(t, "://") {
			t = "http://" + t
		}
		out = append(out, t)
	}
	return out
}

// bases are the base URLs requests are spread over: Targets, or BaseURL.
func (c Config) bases() []string {
	if len(c.Targets) == 0 {
		return []string{strings.TrimRight(c.BaseURL, "/")}
	}
	return c.Targets
}

// notInDevEnv says where else a secret was looked for.
func (c Config) notInDevEnv() string {
	if c.DataDir == "" {
		return ""
	}
	return fmt.Sprintf(" (nor in %s, which a running `seckill dev` with SECKILL_DATA_DIR=%s writes)", filepath.Join(c.DataDir, devstack.EnvFile), c.DataDir)
}

// Usage writes the tool's help to w: with s "", the list of scenarios;
// otherwise s's own description and flags.
func Usage(w io.Writer, s Scenario) {
	if !s.valid() {
		fmt.Fprintf(w, "usage: loadtest <scenario> [flags]\n\nRuns one scenario against a running system over HTTP and checks what it sold.\nExits 1 when a check fails or the run cannot be made, 2 when the command line\nis wrong.\n\nScenarios:\n")
		for _, sc := range Scenarios() {
			fmt.Fprintf(w, "  %-8s %s\n", sc, sc.summary())
		}
		fmt.Fprintf(w, "\nloadtest <scenario> -h lists the scenario's flags.\n")
		return
	}
	cfg := scenarioConfig(s)
	fs := flagSet(&cfg, s)
	fs.SetOutput(w)
	fmt.Fprintf(w, "usage: loadtest %s [flags]\n\n%s.\n\n", s, scenarioHelp(s))
	switch s {
	case ScenarioCeiling:
		fmt.Fprintf(w, "Environment: %s (optional base URL).\n", EnvURL)
	case ScenarioCrowd:
		fmt.Fprintf(w, "Environment: %s (required), %s (required), %s (optional base URL),\n%s or %s (where PostgreSQL's counters are read).\n",
			EnvJWTSecret, EnvAdminToken, EnvURL, EnvDatabaseURL, EnvDataDir)
	default:
		fmt.Fprintf(w, "Environment: %s (required), %s (required), %s (optional base URL).\n",
			EnvJWTSecret, EnvAdminToken, EnvURL)
	}
	if s != ScenarioCeiling {
		fmt.Fprintf(w, "Against `seckill dev` (make run) none is needed: what the environment leaves\nunset is read from the %s that dev mode keeps in its data folder (-data-dir).\n", devstack.EnvFile)
	}
	fmt.Fprintf(w, "\nFlags:\n")
	fs.PrintDefaults()
}

// scenarioHelp is the paragraph of s's help.
func scenarioHelp(s Scenario) string {
	switch s {
	case ScenarioSale:
		return `Reproduces a flash sale and checks that it sold honestly. It creates its own
voucher opening -open-in later, mints shopper tokens with ` + EnvJWTSecret + `,
releases the crowd at the opening second of the server's clock, waits until
every accepted order is persisted, then checks the invariants through the API.
Each shopper names an address of its own in X-Forwarded-For (10.0.0.0/8),
believed by a system that trusts the tool's address as a proxy (seckill dev
does from loopback); the checks' reads wait out 429 and 503 as Retry-After says`
	case ScenarioCrowd:
		return `The real crowd: GET /healthz, the catalog list and single vouchers (with
If-None-Match) measured side by side, PostgreSQL's transactions during the
catalog reads, then a sale with open sockets, honest shoppers buying once and
bots buying as fast as they can, reporting the honest shoppers' share of
answers that are not 429, the stock pushes' delay and every 5xx`
	case ScenarioRoom:
		return `The waiting room: -shoppers join a voucher's line, -room-prequeue of them
before begin_at; the room admits -room-rate a second; admitted shoppers buy
with their pass, bots try without, with forged and with stolen passes. It
checks that no bot bought, the admission rate and the sale's invariants`
	case ScenarioChurn:
		return `A soak: -concurrency workers buy one unit and cancel it as soon as the order
exists, again and again for -for, while Redis's used_memory is sampled every
second; it reports the cycle rate and the memory before and after`
	case ScenarioCeiling:
		return `Loads -path for -duration on -concurrency connections, with the crowd's
client, and reports its rate of 2xx answers: the machine's ceiling beside
which the sale's figures read`
	}
	return ""
}
