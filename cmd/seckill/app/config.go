package app

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashsale/seckill/notify/remind"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/eligibility"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// Config is every setting of every role. Each field is one environment
// variable; `seckill env` prints the table cmd/seckill/CONFIG.md shows.
type Config struct {
	HTTPAddr          string        `env:"SECKILL_HTTP_ADDR" default:"127.0.0.1:8080" help:"where the gateway listens (a process without the gateway serves /healthz, /readyz and /metrics here)"`
	OpsAddr           string        `env:"SECKILL_OPS_ADDR" default:"127.0.0.1:0" help:"where a gateway serves /metrics, /healthz and /readyz for Prometheus and probes, apart from the shoppers' port (which has no /metrics); the default is a free loopback port, logged at start; set host:port to scrape it"`
	RedisURL          string        `env:"SECKILL_REDIS_URL" secret:"url" help:"Redis (redis://host:port/db); unset in dev mode: a private redis-server is started"`
	RedisCluster      []string      `env:"SECKILL_REDIS_CLUSTER_ADDRS" secret:"url" help:"Redis Cluster seed nodes host:port, comma separated (or one redis://user:password@host:port?addr=host:port URL); when set, Redis is a Redis Cluster and SECKILL_REDIS_URL is not used"`
	RedisWaitReplicas string        `env:"SECKILL_REDIS_WAIT_REPLICAS" default:"auto" help:"how many replicas of the voucher's Redis master must have a buy's hold before it is answered 202 (one WAIT after each reservation call, on the master, for all the buys of the call): a master cut off from its replicas then refuses buys (503) instead of promising holds a failover loses; auto (the default) waits for 1 where the master reports connected replicas (INFO replication, read again every 5 s) and for none where it has none; 0 trusts Redis's asynchronous replication"`
	RedisWaitTimeout  time.Duration `env:"SECKILL_REDIS_WAIT_TIMEOUT" default:"100ms" help:"how long a buy waits for SECKILL_REDIS_WAIT_REPLICAS replicas before its hold is given back and the buy refused (503)"`
	ReserveBatch      int           `env:"SECKILL_RESERVE_BATCH" default:"64" help:"most buys of one voucher bucket a gateway sends to Redis in one reservation call (the buys that arrive while one is in flight go together in the next; a lone buy goes at once); 1 sends every buy in a call of its own"`
	DevRedisShards    int           `env:"SECKILL_DEV_REDIS_SHARDS" default:"1" help:"dev mode: 1 starts one private redis-server; 3 or more start a private Redis Cluster of that many masters (data under SECKILL_DATA_DIR)"`
	DatabaseURL       string        `env:"SECKILL_DATABASE_URL" secret:"url" help:"PostgreSQL (postgres://...); unset in dev mode: a private cluster is started"`
	DBGatewayConns    int32         `env:"SECKILL_DB_GATEWAY_CONNS" default:"16" help:"PostgreSQL connections of the gateway's pool: catalog refreshes, logins, order reads, synchronous buys, pay and cancel"`
	DBWorkerConns     int32         `env:"SECKILL_DB_WORKER_CONNS" default:"8" help:"PostgreSQL connections of the workers' own pool: persisting orders, the sweeper, the reconciler; a flood on the gateway never takes them"`
	DBWorkerIdleTx    time.Duration `env:"SECKILL_DB_WORKER_IDLE_TX_TIMEOUT" default:"5s" help:"PostgreSQL ends a session of the workers' pool whose transaction waits this long on its client (idle_in_transaction_session_timeout): a worker cut off mid-transaction holds its row locks, and every other worker's batch behind them, for no longer; 0 leaves the server's setting"`
	KafkaBrokers      []string      `env:"SECKILL_KAFKA_BROKERS" help:"Kafka brokers, comma separated; unset in dev mode: an in-process broker is started"`
	DevKafka          string        `env:"SECKILL_DEV_KAFKA" default:"embedded" help:"dev mode, SECKILL_KAFKA_BROKERS unset: embedded runs the in-process broker; apache runs private Apache Kafka 4.4 brokers (needs java and maven: make deps SECKILL_DEV_KAFKA=apache; data under SECKILL_DATA_DIR)"`
	DevKafkaBrokers   int           `env:"SECKILL_DEV_KAFKA_BROKERS" default:"1" help:"dev mode with SECKILL_DEV_KAFKA=apache: 1 broker, or 3 (every topic replicated 3 times, min.insync.replicas 2)"`
	KafkaTopic        string        `env:"SECKILL_KAFKA_TOPIC" default:"seckill.orders" help:"topic of accepted reservations"`
	KafkaDeadLetter   string        `env:"SECKILL_KAFKA_DEAD_LETTER_TOPIC" help:"where the workers set aside messages they cannot handle (default: the topic's name + .dlq); list and replay them with 'seckill deadletters'"`
	KafkaGroup        string        `env:"SECKILL_KAFKA_GROUP" default:"seckill-workers" help:"consumer group of the order workers"`
	KafkaPartitions   int32         `env:"SECKILL_KAFKA_PARTITIONS" default:"6" help:"partitions of the topic when the dev broker creates it"`
	JWTSecret         string        `env:"SECKILL_JWT_SECRET" secret:"true" help:"HS256 secret of shopper tokens; generated and printed in dev mode when unset"`
	AdminToken        string        `env:"SECKILL_ADMIN_TOKEN" secret:"true" help:"the root operator's bearer token (the trail records it as root; give each person a token of their own with seckill operators add); generated and printed in dev mode when unset"`
	TokenTTL          time.Duration `env:"SECKILL_TOKEN_TTL" default:"24h" help:"lifetime of a shopper token"`
	PayTimeout        time.Duration `env:"SECKILL_PAY_TIMEOUT" default:"15m" help:"time to pay an order before it is cancelled and its stock goes back on sale"`
	PaymentProvider   string        `env:"SECKILL_PAYMENT_PROVIDER" default:"demo" help:"who takes the money: demo (POST /orders/{id}/pay marks an order paid, no money moves) or stripe (orders are paid through Stripe's PaymentIntents: POST /orders/{id}/payments and Stripe's webhook; the pay route answers 409)"`
	Currency          string        `env:"SECKILL_CURRENCY" default:"CNY" help:"ISO 4217 currency of a voucher whose operator names none (and of vouchers recorded before vouchers carried one); a voucher's price and payments are in its currency's smallest unit"`
	StripeSecretKey   string        `env:"SECKILL_STRIPE_SECRET_KEY" secret:"true" help:"Stripe's API key (sk_...) when SECKILL_PAYMENT_PROVIDER=stripe; dev mode with SECKILL_DEV_PAYMENTS=stripe-mock sets one its mock server takes"`
	StripeWebhook     string        `env:"SECKILL_STRIPE_WEBHOOK_SECRET" secret:"true" help:"signing secret (whsec_...) of Stripe's webhook deliveries to POST /api/v1/payments/webhooks/stripe, checked with 300 s tolerance; generated and printed in dev mode with SECKILL_DEV_PAYMENTS=stripe-mock when unset"`
	StripeAPIBase     string        `env:"SECKILL_STRIPE_API_BASE" help:"where the Stripe SDK sends its requests instead of Stripe's API (http://host:port of Stripe's mock server); set by dev mode with SECKILL_DEV_PAYMENTS=stripe-mock"`
	DevPayments       string        `env:"SECKILL_DEV_PAYMENTS" help:"dev mode: stripe-mock starts Stripe's mock server (stripe-mock, installed into bin/ by make run) as a child process and takes payments through Stripe against it (SECKILL_PAYMENT_PROVIDER=stripe); unset keeps SECKILL_PAYMENT_PROVIDER"`
	IdempotencyWindow time.Duration `env:"SECKILL_IDEMPOTENCY_WINDOW" default:"10m" help:"how long, while a sale runs, a cancelled or failed order's Idempotency-Key keeps answering with that order (live orders keep theirs for the whole sale); after it the key is a new attempt"`
	DrandURLs         []string      `env:"SECKILL_DRAND_URLS" default:"https://api.drand.sh,https://api2.drand.sh" help:"HTTP endpoints of the drand randomness beacon the draws take their outcome from (nodes or relays), comma separated, tried in order; every round is verified against the chain's public key, so a relay need not be trusted; unset in dev mode: a private drand network is started"`
	DrandChainHash    string        `env:"SECKILL_DRAND_CHAIN_HASH" default:"52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971" help:"hash of the drand chain the draws follow (the default is the public quicknet chain); every endpoint must serve it; dev mode's private network, started when SECKILL_DRAND_URLS is unset, is followed whatever its hash"`
	StateGrace        time.Duration `env:"SECKILL_STATE_GRACE" default:"1h" help:"how long after a seckill sale ends its Redis state (holds, tombstones, request keys) is kept before it expires; PostgreSQL answers for it after that"`
	SaleCountsKeep    time.Duration `env:"SECKILL_SALE_COUNTS_RETENTION" default:"720h" help:"how long after a sale's end the sale report keeps its per-second counts; the sweeper then rolls counts older than this (attempts long after the end included) into one per figure and hour, so PostgreSQL's sale_counts holds a few rows an hour for a sale long over and its report draws hours (at least 1h)"`
	HoardLimit        int           `env:"SECKILL_HOARD_LIMIT" default:"3" help:"holds a shopper may let expire unpaid or cancel within SECKILL_HOARD_WINDOW; one more and their new holds are refused with 403 unpaid_limit until the oldest leaves the window (0: nobody is refused; paying clears nothing; 'seckill hoard' shows and clears a shopper's count)"`
	HoardWindow       time.Duration `env:"SECKILL_HOARD_WINDOW" default:"24h" help:"how long an unpaid or cancelled hold counts against its shopper (SECKILL_HOARD_LIMIT)"`
	RoomPassTTL       time.Duration `env:"SECKILL_ROOM_PASS_TTL" default:"2m" help:"how long a waiting room's admission pass is valid (a line's; a draw winner's is the voucher's draw_pass_seconds); a pass unused in time is then held for the voucher's grace_seconds (seckill/waitroom/README.md)"`
	RoomMaxLag        int64         `env:"SECKILL_ROOM_MAX_LAG" default:"1000" help:"the workers' consumer lag, in messages, above which (while not falling) adaptive waiting rooms slow down; below half of it they may speed up again (seckill/waitroom/README.md)"`
	EntryTokenKeys    string        `env:"SECKILL_ENTRY_TOKEN_KEYS" help:"the merchants' public keys that sign entry tokens (seckill/eligibility/README.md): comma-separated kid=key pairs, each key the base64 of a raw 32-byte Ed25519 public key or of its DER form (openssl pkey -pubout -outform DER | base64 -w0); a voucher with entry.token_required takes entries only with a token signed by one of them; unset: every entry token is refused"`
	RegisterChallenge string        `env:"SECKILL_REGISTER_CHALLENGE" default:"captcha" help:"what registering an account costs beside its address's budget: captcha (the default: a solved image captcha, captcha_id and captcha_answer in the body; missing or wrong is 400 challenge_invalid), pow (a solved proof of work from GET /api/v1/challenges?purpose=register, challenge_id and challenge_answer in the body; missing or wrong is 400 challenge_invalid) or none (dev mode's default when unset, so that make run takes scripted sign-ups; the system tests set none too, but for their tests of the challenge; the load tool, chaos, fleet and netlab sign their shoppers' tokens and never register)"`
	RegisterRate      int           `env:"SECKILL_REGISTER_RATE" default:"10" help:"registrations per minute allowed per client address (an IPv6 /56 is one), fleet-wide in Redis, after a burst of SECKILL_REGISTER_BURST; charged beside the budget registrations share with logins per address (20 a minute, burst 10)"`
	RegisterBurst     int           `env:"SECKILL_REGISTER_BURST" default:"5" help:"registrations one client address may make at once before SECKILL_REGISTER_RATE holds"`
	Roles             []string      `env:"SECKILL_ROLES" default:"gateway,worker,sweeper" help:"roles of this process: gateway, worker, sweeper"`
	DataDir           string        `env:"SECKILL_DATA_DIR" default:".run" help:"dev mode: where the private Redis and PostgreSQL keep their data, and dev.env (the URLs and secrets of the running dev mode, for bin/loadtest <scenario> -data-dir)"`
	AllowedOrigins    []string      `env:"SECKILL_ALLOWED_ORIGINS" help:"extra origins allowed to open the WebSocket (the page's own origin always is)"`
	TrustedProxies    []string      `env:"SECKILL_TRUSTED_PROXIES" help:"proxies whose X-Forwarded-For is believed (IPs or CIDRs); none by default (dev mode adds loopback: SECKILL_DEV_TRUST_LOOPBACK)"`
	DevTrustLoopback  bool          `env:"SECKILL_DEV_TRUST_LOOPBACK" default:"true" help:"dev mode only: believe X-Forwarded-For from 127.0.0.1 and ::1 as from SECKILL_TRUSTED_PROXIES, so that each shopper of bin/loadtest meets the per-address limits as an address of its own (loopback's connections are then not capped per address); false: only SECKILL_TRUSTED_PROXIES, as serve always"`
	GlobalRate        int           `env:"SECKILL_GLOBAL_RATE" default:"20000" help:"buy requests per second allowed for all shoppers together"`
	GlobalBurst       int           `env:"SECKILL_GLOBAL_BURST" default:"2000" help:"burst of the global limit; keep it well below the rate (GCRA admits burst + rate in the first second)"`
	UserRate          int           `env:"SECKILL_USER_RATE" default:"5" help:"buy requests per second allowed per shopper (of a seckill voucher: per shopper and voucher bucket, judged exactly inside the reservation, and per instance in memory before it)"`
	UserBurst         int           `env:"SECKILL_USER_BURST" default:"3" help:"burst of the per-shopper limit (a double click and a retry)"`
	IPRate            int           `env:"SECKILL_IP_RATE" default:"50" help:"requests per second allowed per client address (an IPv6 /56 is one) on each anonymous route: catalog, captcha, registration, login, WebSocket handshake; per gateway instance, loopback included"`
	IPBurst           int           `env:"SECKILL_IP_BURST" default:"200" help:"burst of SECKILL_IP_RATE (a shopper's page makes a handful of these requests when it opens)"`
	BuyIPRate         int           `env:"SECKILL_BUY_IP_RATE" default:"50" help:"buy requests per second allowed per client address (an IPv6 /56 is one), whatever accounts they are for; per gateway instance, charged before the per-user and global limits"`
	BuyIPBurst        int           `env:"SECKILL_BUY_IP_BURST" default:"100" help:"burst of SECKILL_BUY_IP_RATE (shoppers behind one address pressing buy at the opening second)"`
	ConnsPerAddr      int           `env:"SECKILL_CONNS_PER_ADDR" default:"256" help:"open TCP connections per client address (the TCP peer; an IPv6 /56 is one); one more is closed at once. SECKILL_TRUSTED_PROXIES are exempt (every client behind them shares their address); the total is capped below the open-file limit"`
	WSPerAddr         int           `env:"SECKILL_WS_PER_ADDR" default:"32" help:"open WebSockets without a sign-in per client address (behind SECKILL_TRUSTED_PROXIES, the forwarded client's), and as many signed-in ones; one more is 429"`
	WSSignedInPercent int           `env:"SECKILL_WS_SIGNED_IN_PERCENT" default:"25" help:"share of the instance's WebSockets (sized from the open-file limit) that only signed-in shoppers may take, so that sockets without a token cannot lock them out of their order pushes (0 to 90)"`
	WSAnonMaxAge      time.Duration `env:"SECKILL_WS_ANON_MAX_AGE" default:"10m" help:"how long a WebSocket without a token stays open before it is closed with 1000 and the page opens a new one (at least 10s)"`
	WSMsgRate         int           `env:"SECKILL_WS_MSG_RATE" default:"2" help:"messages per second one WebSocket client may send (pings, text or control, anything but the pongs that answer the server's pings), after a burst of SECKILL_WS_MSG_BURST; past that its socket is closed with 1008 (the page sends one every 10 s)"`
	WSMsgBurst        int           `env:"SECKILL_WS_MSG_BURST" default:"10" help:"messages one WebSocket client may send at once before SECKILL_WS_MSG_RATE holds"`
	ShopperRate       int           `env:"SECKILL_SHOPPER_RATE" default:"10" help:"requests per second allowed per shopper on the signed-in routes other than the buy (orders, one order, pay, cancel, the waiting room's join and read, the WebSocket's handshake with a token); per gateway instance"`
	ShopperBurst      int           `env:"SECKILL_SHOPPER_BURST" default:"30" help:"burst of SECKILL_SHOPPER_RATE (the page makes a few such requests when it opens, then listens on its socket)"`
	ShopperIPRate     int           `env:"SECKILL_SHOPPER_IP_RATE" default:"100" help:"requests per second allowed per client address (an IPv6 /56 is one) on the same signed-in routes, whatever accounts they are for; per gateway instance, charged after the per-shopper limit"`
	ShopperIPBurst    int           `env:"SECKILL_SHOPPER_IP_BURST" default:"300" help:"burst of SECKILL_SHOPPER_IP_RATE (many shoppers may share one address)"`
	PoWBaseBits       int           `env:"SECKILL_POW_BASE_BITS" default:"14" help:"difficulty, in leading zero bits of SHA-256, of a proof-of-work challenge (a voucher whose challenge is pow) when nobody is pressing: about a second of a phone's work (README, Challenges); 8 to 32"`
	PoWMaxBits        int           `env:"SECKILL_POW_MAX_BITS" default:"18" help:"the most difficulty load may raise a challenge to (at least SECKILL_POW_BASE_BITS, at most 32)"`
	PoWWindow         time.Duration `env:"SECKILL_POW_WINDOW" default:"1m" help:"sliding window over which the challenges one client address, and one voucher, asked for are counted to raise the difficulty"`
	PoWAddressFree    int           `env:"SECKILL_POW_ADDRESS_FREE" default:"20" help:"challenges one client address may ask for within SECKILL_POW_WINDOW at the base difficulty; each doubling past it adds one bit"`
	PoWVoucherFree    int           `env:"SECKILL_POW_VOUCHER_FREE" default:"10000" help:"challenges all clients together may ask for one voucher within SECKILL_POW_WINDOW at the base difficulty; each doubling past it adds one bit"`
	PoWTTL            time.Duration `env:"SECKILL_POW_TTL" default:"2m" help:"how long a proof-of-work challenge may be answered; single use"`
	ShutdownTimeout   time.Duration `env:"SECKILL_SHUTDOWN_TIMEOUT" default:"15s" help:"how long in-flight work may take to finish on SIGTERM"`
	LogLevel          string        `env:"SECKILL_LOG_LEVEL" default:"info" help:"debug, info, warn or error (anything else is refused at start)"`
	LogFormat         string        `env:"SECKILL_LOG_FORMAT" default:"text" help:"text or json (anything else is refused at start)"`
	DemoVoucher       bool          `env:"SECKILL_DEMO_VOUCHER" default:"true" help:"dev mode: create a demo voucher that is on sale now"`
	// A worker's batch waits up to SECKILL_WORKER_LINGER after its first
	// message to fill. With kafkaq's own 5 ms the workers persisted
	// batches of ~14 orders in a flash crowd, and their per-transaction
	// cost took a quarter of the accepted rate from the gateways on the
	// same machine; at 50 ms the batches are 33-46 orders and 202 ->
	// created stays well under a second at p99. A sweep of 10 to 100 ms
	// and of batches of 50 to 200 found no setting with a better accepted
	// rate (deploy/tools/bench/README.md, "The workers' batch and linger").
	WorkerBatch  int           `env:"SECKILL_WORKER_BATCH" default:"100" help:"most reservations a worker persists in one PostgreSQL transaction (1 to 1000)"`
	WorkerLinger time.Duration `env:"SECKILL_WORKER_LINGER" default:"50ms" help:"how long a worker's batch waits to fill after its first message (above 0, at most 5s): longer means fewer, larger transactions and a later 'created'"`
	// Tracing (seckill/tracing): off unless an OTLP endpoint is set, and
	// then every buy records its spans while the sampling decides which
	// are exported.
	OTLPEndpoint     string        `env:"SECKILL_OTLP_ENDPOINT" help:"OTLP/HTTP collector spans are exported to (host:port, or a URL; /v1/traces is added to a URL without a path); unset: OTEL_EXPORTER_OTLP_ENDPOINT, and when both are unset tracing is off and costs nothing (in dev mode SECKILL_DEV_TRACING=jaeger sets it)"`
	TraceSampleRatio float64       `env:"SECKILL_TRACE_SAMPLE_RATIO" default:"0.01" help:"share of new traces exported (0 to 1); a caller's sampled traceparent is always followed, and a trace with a failed span or a root slower than SECKILL_TRACE_SLOW is exported whatever the ratio (each process decides for its part)"`
	TraceSlow        time.Duration `env:"SECKILL_TRACE_SLOW" default:"500ms" help:"a trace whose request, message or batch took this long is exported whatever SECKILL_TRACE_SAMPLE_RATIO says (0: none for being slow)"`
	DevTracing       string        `env:"SECKILL_DEV_TRACING" help:"dev mode: jaeger starts a private Jaeger (bin/jaeger, built by make deps SECKILL_DEV_TRACING=jaeger) on loopback, exports every trace to it (ratio 1 unless SECKILL_TRACE_SAMPLE_RATIO is set) and logs its UI's address; unset: no tracing unless SECKILL_OTLP_ENDPOINT is set"`
	// Reminders of a shopper's turn while their tab is closed
	// (notify/remind/README.md): Web Push where VAPID keys are set, e-mail
	// where an SMTP server is.
	VAPIDPublicKey  string        `env:"SECKILL_VAPID_PUBLIC_KEY" help:"the VAPID public key of Web Push reminders (base64url of an uncompressed P-256 point; pages subscribe with it, so keep it for good); with SECKILL_VAPID_PRIVATE_KEY turns on push, else it is off; dev mode makes a pair once and keeps it in SECKILL_DATA_DIR/vapid.json"`
	VAPIDPrivateKey string        `env:"SECKILL_VAPID_PRIVATE_KEY" secret:"true" help:"the VAPID private key (base64url of the 32-byte P-256 scalar) that signs every push"`
	VAPIDSubject    string        `env:"SECKILL_VAPID_SUBJECT" default:"mailto:ops@localhost" help:"the contact push services may reach the operator at: mailto:address or an https: URL"`
	SMTPURL         string        `env:"SECKILL_SMTP_URL" secret:"url" help:"SMTP server of e-mail reminders, smtp://user:password@host:port (STARTTLS when offered; credentials are sent only over TLS or to localhost); unset: no e-mail; dev mode with SECKILL_DEV_MAIL=mailpit sets it"`
	MailFrom        string        `env:"SECKILL_MAIL_FROM" default:"seckill@localhost" help:"the From address of e-mail reminders"`
	DevMail         string        `env:"SECKILL_DEV_MAIL" help:"dev mode: mailpit starts a private mailpit (bin/mailpit, built by make deps SECKILL_DEV_MAIL=mailpit) as the SMTP server and logs its web page, where every reminder can be read; unset: dev mode sends no e-mail unless SECKILL_SMTP_URL is set"`
	PublicURL       string        `env:"SECKILL_PUBLIC_URL" help:"the shopper page's address as shoppers reach it (https://shop.example/), which reminders link to; unset: http:// and SECKILL_HTTP_ADDR"`
	RemindDelay     time.Duration `env:"SECKILL_REMIND_DELAY" default:"20s" help:"how long after a turn came a reminder goes, if the pass is then still unused (a shopper with the page open has usually bought by then); keep it well under the pass's lifetime (1s to 1h)"`
	RemindQueue     int           `env:"SECKILL_REMIND_QUEUE" default:"10000" help:"reminders one gateway holds at once (waiting for the delay, a worker or a retry); more are dropped and counted in seckill_remind_turns_total{outcome=\"dropped\"}"`
	RemindWorkers   int           `env:"SECKILL_REMIND_WORKERS" default:"4" help:"reminders one gateway sends at once"`
	RemindAttempts  int           `env:"SECKILL_REMIND_ATTEMPTS" default:"4" help:"times one reminder is tried before it is given up (never past the turn's end)"`
	RemindBackoff   time.Duration `env:"SECKILL_REMIND_BACKOFF" default:"2s" help:"wait before a failed reminder's second try, doubled before each later one"`
}

// The log levels and formats newLogger knows; anything else is refused at
// start rather than quietly logged at info as text.
var (
	logLevels  = []string{"debug", "info", "warn", "error"}
	logFormats = []string{"text", "json"}
)

// devTracingJaeger is SECKILL_DEV_TRACING's one value.
const devTracingJaeger = "jaeger"

// devMailMailpit is SECKILL_DEV_MAIL's one value.
const devMailMailpit = "mailpit"

// Bounds of the workers' batches. A batch is one PostgreSQL transaction
// whose row locks every other batch on the same voucher waits for, and the
// linger delays every order of a quiet moment by up to its length: beyond
// these, a setting is a typo rather than a tuning.
const (
	maxWorkerBatch  = 1000
	maxWorkerLinger = 5 * time.Second
	// Past 90% the pages of visitors not signed in would share a tenth of
	// the sockets; below 10s they would reconnect all the time.
	maxWSSignedInPercent = 90
	minWSAnonMaxAge      = 10 * time.Second
)

// The registration challenges SECKILL_REGISTER_CHALLENGE names.
const (
	registerCaptcha = "captcha"
	registerPoW     = "pow"
	registerNone    = "none"
)

// DeadLetterTopic is the dead-letter topic of the workers.
func (c Config) DeadLetterTopic() string {
	if c.KafkaDeadLetter != "" {
		return c.KafkaDeadLetter
	}
	return c.KafkaTopic + kafkaq.DeadLetterSuffix
}

// LoadConfig reads every field from getenv, falling back to its default.
func LoadConfig(getenv func(string) string) (Config, error) {
	var cfg Config
	v := reflect.ValueOf(&cfg).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		raw := strings.TrimSpace(getenv(f.Tag.Get("env")))
		if raw == "" {
			raw = f.Tag.Get("default")
		}
		if err := setField(v.Field(i), raw); err != nil {
			if f.Tag.Get("secret") != "" {
				return Config{}, fmt.Errorf("config: %s: %w", f.Tag.Get("env"), err)
			}
			return Config{}, fmt.Errorf("config: %s=%q: %w", f.Tag.Get("env"), raw, err)
		}
	}
	if cfg.OTLPEndpoint == "" {
		// The standard variable of every OpenTelemetry SDK.
		cfg.OTLPEndpoint = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	return cfg, cfg.validate()
}

func setField(field reflect.Value, raw string) error {
	switch field.Interface().(type) {
	case string:
		field.SetString(raw)
	case []string:
		var items []string
		for item := range strings.SplitSeq(raw, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		field.Set(reflect.ValueOf(items))
	case time.Duration:
		d, err := time.ParseDuration(raw)
		if err != nil {
			return fmt.Errorf("not a duration (examples: 15m, 30s): %w", err)
		}
		field.SetInt(int64(d))
	case bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("not true or false: %w", err)
		}
		field.SetBool(b)
	case float64:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Errorf("not a number: %w", err)
		}
		field.SetFloat(f)
	case int, int32, int64:
		n, err := strconv.ParseInt(raw, 10, field.Type().Bits())
		if err != nil {
			return fmt.Errorf("not a whole number: %w", err)
		}
		field.SetInt(n)
	default:
		return fmt.Errorf("unsupported config type %s", field.Type())
	}
	return nil
}

func (c Config) validate() error {
	if c.VAPIDPublicKey != "" && c.VAPIDPrivateKey != "" {
		if err := remind.CheckVAPID(c.VAPIDPublicKey, c.VAPIDPrivateKey); err != nil {
			return fmt.Errorf("config: SECKILL_VAPID_PUBLIC_KEY and SECKILL_VAPID_PRIVATE_KEY are not one key pair (%w); `seckill vapid` makes one", err)
		}
	}
	switch {
	case !slices.Contains(logLevels, strings.ToLower(c.LogLevel)):
		return fmt.Errorf("config: SECKILL_LOG_LEVEL must be one of %s, got %q; set SECKILL_LOG_LEVEL=info (the default) or leave it unset", strings.Join(logLevels, ", "), c.LogLevel)
	case !slices.Contains(logFormats, strings.ToLower(c.LogFormat)):
		return fmt.Errorf("config: SECKILL_LOG_FORMAT must be text or json, got %q; set SECKILL_LOG_FORMAT=text (the default) or json", c.LogFormat)
	case c.PaymentProvider != paymentDemo && c.PaymentProvider != paymentStripe:
		return fmt.Errorf("config: SECKILL_PAYMENT_PROVIDER must be demo or stripe, got %q", c.PaymentProvider)
	case !isCurrency(c.Currency):
		return fmt.Errorf("config: SECKILL_CURRENCY must be an active ISO 4217 code in capitals (CNY, USD, JPY), got %q", c.Currency)
	case c.DevMail != "" && c.DevMail != devMailMailpit:
		return fmt.Errorf("config: SECKILL_DEV_MAIL must be mailpit or unset, got %q", c.DevMail)
	case (c.VAPIDPublicKey == "") != (c.VAPIDPrivateKey == ""):
		return fmt.Errorf("config: set both SECKILL_VAPID_PUBLIC_KEY and SECKILL_VAPID_PRIVATE_KEY for Web Push reminders, or neither")
	case c.RemindDelay < time.Second || c.RemindDelay > time.Hour:
		return fmt.Errorf("config: SECKILL_REMIND_DELAY must be between 1s and 1h, got %s", c.RemindDelay)
	case c.RemindQueue < 1 || c.RemindWorkers < 1 || c.RemindAttempts < 1 || c.RemindBackoff <= 0:
		return fmt.Errorf("config: SECKILL_REMIND_QUEUE, _WORKERS and _ATTEMPTS must be at least 1 and SECKILL_REMIND_BACKOFF positive")
	case c.DevPayments != "" && c.DevPayments != devPaymentsStripeMock:
		return fmt.Errorf("config: SECKILL_DEV_PAYMENTS must be stripe-mock or unset, got %q", c.DevPayments)
	case c.PayTimeout <= 0:
		return fmt.Errorf("config: SECKILL_PAY_TIMEOUT must be positive")
	case c.IdempotencyWindow < time.Minute:
		return fmt.Errorf("config: SECKILL_IDEMPOTENCY_WINDOW must be at least 1m (a retried request must still find its key), got %s", c.IdempotencyWindow)
	case c.StateGrace < time.Minute:
		return fmt.Errorf("config: SECKILL_STATE_GRACE must be at least 1m, got %s", c.StateGrace)
	case c.SaleCountsKeep < time.Hour:
		return fmt.Errorf("config: SECKILL_SALE_COUNTS_RETENTION must be at least 1h (a sale's report is read second by second for a while after it), got %s", c.SaleCountsKeep)
	case c.RegisterChallenge != registerCaptcha && c.RegisterChallenge != registerPoW && c.RegisterChallenge != registerNone:
		return fmt.Errorf("config: SECKILL_REGISTER_CHALLENGE must be captcha, pow or none, got %q; set it to captcha (the default) or pow in production", c.RegisterChallenge)
	case c.RegisterRate < 1 || c.RegisterBurst < 1:
		return fmt.Errorf("config: SECKILL_REGISTER_RATE and SECKILL_REGISTER_BURST must be positive, got %d and %d", c.RegisterRate, c.RegisterBurst)
	case c.RoomPassTTL < time.Second:
		return fmt.Errorf("config: SECKILL_ROOM_PASS_TTL must be at least 1s (a shopper needs the time to buy), got %s", c.RoomPassTTL)
	case c.RoomMaxLag < 1:
		return fmt.Errorf("config: SECKILL_ROOM_MAX_LAG must be at least 1, got %d", c.RoomMaxLag)
	case c.WaitReplicas() == badWaitReplicas:
		return fmt.Errorf("config: SECKILL_REDIS_WAIT_REPLICAS must be auto or a number of replicas, 0 or more (0 waits for none), got %q", c.RedisWaitReplicas)
	case c.ReserveBatch < 1:
		return fmt.Errorf("config: SECKILL_RESERVE_BATCH must be at least 1 (1 sends every buy on its own), got %d", c.ReserveBatch)
	case c.RedisWaitTimeout <= 0:
		return fmt.Errorf("config: SECKILL_REDIS_WAIT_TIMEOUT must be positive, got %s", c.RedisWaitTimeout)
	case c.HoardLimit < 0:
		return fmt.Errorf("config: SECKILL_HOARD_LIMIT must not be negative (0 refuses nobody), got %d", c.HoardLimit)
	case c.PoWBaseBits < 8 || c.PoWMaxBits < c.PoWBaseBits || c.PoWMaxBits > 32:
		return fmt.Errorf("config: SECKILL_POW_BASE_BITS must be 8 to 32 and SECKILL_POW_MAX_BITS between it and 32, got %d and %d", c.PoWBaseBits, c.PoWMaxBits)
	case c.PoWWindow <= 0 || c.PoWTTL <= 0:
		return fmt.Errorf("config: SECKILL_POW_WINDOW and SECKILL_POW_TTL must be positive, got %s and %s", c.PoWWindow, c.PoWTTL)
	case c.HoardWindow <= 0:
		return fmt.Errorf("config: SECKILL_HOARD_WINDOW must be positive, got %s", c.HoardWindow)
	case c.TokenTTL <= 0:
		return fmt.Errorf("config: SECKILL_TOKEN_TTL must be positive")
	case c.KafkaPartitions <= 0:
		return fmt.Errorf("config: SECKILL_KAFKA_PARTITIONS must be positive")
	case c.DevRedisShards < 1 || c.DevRedisShards == 2:
		return fmt.Errorf("config: SECKILL_DEV_REDIS_SHARDS must be 1 (one redis-server) or at least 3 (a Redis Cluster needs 3 masters), got %d", c.DevRedisShards)
	case c.DevKafka != devKafkaEmbedded && c.DevKafka != devKafkaApache:
		return fmt.Errorf("config: SECKILL_DEV_KAFKA must be embedded or apache, got %q", c.DevKafka)
	case c.DevKafkaBrokers != 1 && c.DevKafkaBrokers != 3:
		return fmt.Errorf("config: SECKILL_DEV_KAFKA_BROKERS must be 1 or 3 (three survive the loss of one), got %d", c.DevKafkaBrokers)
	case c.DevKafkaBrokers != 1 && c.DevKafka != devKafkaApache:
		return fmt.Errorf("config: SECKILL_DEV_KAFKA_BROKERS=%d needs SECKILL_DEV_KAFKA=apache (the in-process broker is one broker)", c.DevKafkaBrokers)
	case c.DBGatewayConns <= 0 || c.DBWorkerConns <= 0:
		return fmt.Errorf("config: SECKILL_DB_GATEWAY_CONNS and SECKILL_DB_WORKER_CONNS must be positive, got %d and %d", c.DBGatewayConns, c.DBWorkerConns)
	case c.WorkerBatch < 1 || c.WorkerBatch > maxWorkerBatch:
		return fmt.Errorf("config: SECKILL_WORKER_BATCH must be between 1 and %d reservations per transaction, got %d; set it to 100 (the default) unless make bench shows better", maxWorkerBatch, c.WorkerBatch)
	case c.ConnsPerAddr < 1 || c.WSPerAddr < 1 || c.WSPerAddr > c.ConnsPerAddr:
		return fmt.Errorf("config: SECKILL_CONNS_PER_ADDR and SECKILL_WS_PER_ADDR must be positive, and a WebSocket is a connection: SECKILL_WS_PER_ADDR (%d) may not exceed SECKILL_CONNS_PER_ADDR (%d)", c.WSPerAddr, c.ConnsPerAddr)
	case c.WSSignedInPercent < 0 || c.WSSignedInPercent > maxWSSignedInPercent:
		return fmt.Errorf("config: SECKILL_WS_SIGNED_IN_PERCENT must be between 0 and %d, got %d", maxWSSignedInPercent, c.WSSignedInPercent)
	case c.WSAnonMaxAge < minWSAnonMaxAge:
		return fmt.Errorf("config: SECKILL_WS_ANON_MAX_AGE must be at least %s (every page without a sign-in reconnects that often), got %s", minWSAnonMaxAge, c.WSAnonMaxAge)
	case c.DBWorkerIdleTx < 0:
		return fmt.Errorf("config: SECKILL_DB_WORKER_IDLE_TX_TIMEOUT must not be negative (0 leaves the server's setting), got %s", c.DBWorkerIdleTx)
	case c.TraceSampleRatio < 0 || c.TraceSampleRatio > 1:
		return fmt.Errorf("config: SECKILL_TRACE_SAMPLE_RATIO must be between 0 and 1, got %v", c.TraceSampleRatio)
	case c.TraceSlow < 0:
		return fmt.Errorf("config: SECKILL_TRACE_SLOW must not be negative, got %s", c.TraceSlow)
	case c.DevTracing != "" && c.DevTracing != devTracingJaeger:
		return fmt.Errorf("config: SECKILL_DEV_TRACING must be empty or %s, got %q", devTracingJaeger, c.DevTracing)
	case c.WorkerLinger <= 0 || c.WorkerLinger > maxWorkerLinger:
		return fmt.Errorf("config: SECKILL_WORKER_LINGER must be above 0 and at most %s (every order waits up to it before it is created), got %s; set it to 50ms (the default) unless make bench shows better", maxWorkerLinger, c.WorkerLinger)
	}
	if _, err := eligibility.ParseKeys(c.EntryTokenKeys); err != nil {
		return fmt.Errorf("config: SECKILL_ENTRY_TOKEN_KEYS: %w", err)
	}
	for name, n := range map[string]int{
		"SECKILL_GLOBAL_RATE": c.GlobalRate, "SECKILL_GLOBAL_BURST": c.GlobalBurst,
		"SECKILL_USER_RATE": c.UserRate, "SECKILL_USER_BURST": c.UserBurst,
		"SECKILL_IP_RATE": c.IPRate, "SECKILL_IP_BURST": c.IPBurst,
		"SECKILL_BUY_IP_RATE": c.BuyIPRate, "SECKILL_BUY_IP_BURST": c.BuyIPBurst,
		"SECKILL_SHOPPER_RATE": c.ShopperRate, "SECKILL_SHOPPER_BURST": c.ShopperBurst,
		"SECKILL_SHOPPER_IP_RATE": c.ShopperIPRate, "SECKILL_SHOPPER_IP_BURST": c.ShopperIPBurst,
		"SECKILL_WS_MSG_RATE": c.WSMsgRate, "SECKILL_WS_MSG_BURST": c.WSMsgBurst,
		"SECKILL_POW_ADDRESS_FREE": c.PoWAddressFree, "SECKILL_POW_VOUCHER_FREE": c.PoWVoucherFree,
	} {
		if n <= 0 {
			return fmt.Errorf("config: %s must be positive, got %d", name, n)
		}
	}
	for _, r := range c.Roles {
		if r != RoleGateway && r != RoleWorker && r != RoleSweeper {
			return fmt.Errorf("config: SECKILL_ROLES: unknown role %q (known: gateway, worker, sweeper)", r)
		}
	}
	return nil
}

// WaitReplicas is SECKILL_REDIS_WAIT_REPLICAS as redisstock.Config takes
// it (redisstock.WaitReplicasAuto for auto), or badWaitReplicas.
func (c Config) WaitReplicas() int {
	if c.RedisWaitReplicas == "auto" {
		return redisstock.WaitReplicasAuto
	}
	n, err := strconv.Atoi(c.RedisWaitReplicas)
	if err != nil || n < 0 {
		return badWaitReplicas
	}
	return n
}

// badWaitReplicas is WaitReplicas' answer for a value validate refuses.
const badWaitReplicas = -2

// HasRole reports whether this process plays role.
func (c Config) HasRole(role string) bool {
	for _, r := range c.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// Brokers dev mode can run (SECKILL_DEV_KAFKA).
const (
	devKafkaEmbedded = "embedded" // the in-process kfake broker
	devKafkaApache   = "apache"   // private Apache Kafka brokers, child processes
)

// Roles a process can play.
const (
	RoleGateway = "gateway"
	RoleWorker  = "worker"
	RoleSweeper = "sweeper"
)

// fillDevSecrets generates the secrets dev mode may leave unset. It reports
// which it generated, so they can be shown once.
func (c *Config) fillDevSecrets() (generatedAdmin, generatedJWT bool) {
	if c.JWTSecret == "" {
		c.JWTSecret = randomHex(32)
		generatedJWT = true
	}
	if c.AdminToken == "" {
		c.AdminToken = randomHex(16)
		generatedAdmin = true
	}
	return generatedAdmin, generatedJWT
}

// The payment providers of SECKILL_PAYMENT_PROVIDER, and dev mode's mock
// server.
const (
	paymentDemo           = "demo"
	paymentStripe         = "stripe"
	devPaymentsStripeMock = "stripe-mock"
)

func isCurrency(c string) bool { return seckill.ValidCurrency(c) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms.
	return hex.EncodeToString(b)
}

// printable returns each variable with its value, secrets masked, for the
// start-up log.
func (c Config) printable() [][2]string {
	v := reflect.ValueOf(c)
	t := v.Type()
	rows := make([][2]string, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		rows = append(rows, [2]string{f.Tag.Get("env"), maskedValue(f.Tag.Get("secret"), v.Field(i))})
	}
	return rows
}

func maskedValue(secret string, field reflect.Value) string {
	var s string
	switch x := field.Interface().(type) {
	case []string:
		if secret == "url" {
			masked := make([]string, len(x))
			for i, u := range x {
				masked[i] = maskURL(u)
			}
			x = masked
		}
		s = strings.Join(x, ",")
	default:
		s = fmt.Sprint(x)
	}
	switch {
	case s == "":
		return "(unset)"
	case secret == "true":
		return "****"
	case secret == "url":
		return maskURL(s)
	}
	return s
}

// writeEnvTable prints every variable with its default and meaning.
func writeEnvTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	t := reflect.TypeOf(Config{})
	for i := range t.NumField() {
		f := t.Field(i)
		def := f.Tag.Get("default")
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Tag.Get("env"), def, f.Tag.Get("help"))
	}
	return tw.Flush()
}
