package edge_test

// The gateway over the real stores (PostgreSQL, Redis) and the real gates:
// the limits of the login and of the signed-in routes, counted in what
// reaches PostgreSQL and Redis.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/go-redis/redis_rate/v10"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/gateway/auth"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/orderid"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// pgUsers adapts the PostgreSQL store to the accounts, as cmd/seckill does.
type pgUsers struct{ store *pgstore.Store }

func (u pgUsers) CreateUser(ctx context.Context, username, hash string) (int64, error) {
	return u.store.CreateUser(ctx, username, hash)
}

func (u pgUsers) UserByName(ctx context.Context, username string) (auth.User, error) {
	usr, err := u.store.UserByName(ctx, username)
	return auth.User{ID: usr.ID, Username: usr.Username, PasswordHash: usr.PasswordHash}, err
}

// countedStore is the real PostgreSQL store, with a count of the queries the
// order reader makes of it.
type countedStore struct {
	*pgstore.Store
	queries atomic.Int64
}

func (c *countedStore) Order(ctx context.Context, id int64) (orders.Order, error) {
	c.queries.Add(1)
	return c.Store.Order(ctx, id)
}

func (c *countedStore) OrdersByUser(ctx context.Context, userID int64, limit int) ([]orders.Order, error) {
	c.queries.Add(1)
	return c.Store.OrdersByUser(ctx, userID, limit)
}

func (c *countedStore) Voucher(ctx context.Context, id int64) (seckill.Voucher, error) {
	c.queries.Add(1)
	return c.Store.Voucher(ctx, id)
}

func (c *countedStore) ActiveSeckillVoucherIDs(ctx context.Context, since time.Time) ([]int64, error) {
	c.queries.Add(1)
	return c.Store.ActiveSeckillVoucherIDs(ctx, since)
}

// liveGateway is a gateway serving on loopback over a database of its own,
// the shared Redis and the real gates, trusting loopback as its proxy so
// that each request may come from its own X-Forwarded-For address.
type liveGateway struct {
	base   string
	client *http.Client
	pool   *pgxpool.Pool
	tokens *auth.Tokens
	reads  *countedStore // what the order reader asked PostgreSQL
}

func newLiveGateway(t *testing.T, cfg edge.Config, mutate ...func(*gateway.Config, *gateway.Deps)) *liveGateway {
	t.Helper()
	pool := stack.NewDatabase(t)
	rdb := stack.Redis(t)
	store := pgstore.New(pool)
	stock := redisstock.New(redisstock.Config{Redis: rdb})
	e, _ := newEdge(t, rdb, cfg)
	tokens, err := auth.NewTokens([]byte("signedin-secret-signedin-secret-sig!"), time.Hour)
	require.NoError(t, err)
	reads := &countedStore{Store: store}
	active := orders.NewActiveCache(reads, time.Second)
	catalog := seckill.NewCatalog(seckill.CatalogConfig{Store: store, Stock: stock})
	reader := orders.NewReader(orders.ReaderConfig{Record: reads, Stock: stock, Active: active.IDs})
	hub := runHub(t, rdb)
	gcfg := gateway.Config{AdminToken: catalogAdmin, TrustedProxies: []string{"127.0.0.1"}, RegisterChallenge: gateway.RegisterNone}
	deps := gateway.Deps{
		Catalog:    catalog,
		Buy:        nopPipeline(t, catalog, e.Steps(), reader),
		Gates:      e.Gates(),
		Captchas:   e.Captchas,
		Challenges: e.Challenges,
		Orders:     reader,
		Stats:      nopStats{},
		Accounts:   auth.NewAccounts(pgUsers{store}, tokens),
		Tokens:     tokens,
		Logger:     quiet,
		Live:       gateway.Live{Feed: hub},
	}
	for _, m := range mutate {
		m(&gcfg, &deps)
	}
	srv, err := gateway.New(gcfg, deps)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	g := &liveGateway{base: "http://" + ln.Addr().String(), client: &http.Client{Timeout: time.Minute, Transport: tr}, pool: pool, tokens: tokens, reads: reads}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
		require.NoError(t, <-done)
	})
	return g
}

// runHub runs the live feed's hub on rdb until the test ends.
func runHub(t *testing.T, rdb redis.UniversalClient) *notify.Hub {
	t.Helper()
	hub, err := notify.NewHub(notify.HubConfig{Redis: rdb, Log: quiet})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hub.Run(ctx) }()
	<-hub.Ready()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return hub
}

// do sends one request from the client address addr; it returns the status,
// the headers and the body.
func (g *liveGateway) do(t *testing.T, method, path, body, token, addr string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.base+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if addr != "" {
		req.Header.Set("X-Forwarded-For", addr)
	}
	resp, err := g.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(raw)
}

// A hundred wrong passwords for one username sent at once, each from its
// own address, get at most the burst of the username's budget through to
// bcrypt (401), and the rest are asked for a captcha (400 captcha_invalid);
// a right password gives its unit back, and past the budget the owner gets
// in with a solved captcha.
func TestConcurrentWrongLoginsGetOnlyTheBurst(t *testing.T) {
	t.Parallel()
	const burst = 5
	g := newLiveGateway(t, edge.Config{LoginNameLimit: redisRateLimit(burst)})
	name := "victim_" + fmt.Sprint(rand.Int64N(1<<40))
	status, _, body := g.do(t, http.MethodPost, "/api/v1/users", `{"username":"`+name+`","password":"correct-horse"}`, "", "10.9.0.1")
	require.Equal(t, http.StatusCreated, status, body)

	// Successes first: each takes a unit and gives it back.
	for i := range 2 * burst {
		status, _, body := g.do(t, http.MethodPost, "/api/v1/sessions", `{"username":"`+name+`","password":"correct-horse"}`, "", fmt.Sprintf("10.9.1.%d", i+1))
		require.Equal(t, http.StatusOK, status, "a right password is never charged: %s", body)
	}

	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			status, _, _ := g.do(t, http.MethodPost, "/api/v1/sessions", `{"username":"`+name+`","password":"wrong-horse"}`, "",
				fmt.Sprintf("10.9.%d.%d", 2+i/200, 1+i%200))
			mu.Lock()
			counts[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.LessOrEqual(t, counts[http.StatusUnauthorized], burst, "statuses %v", counts)
	require.Positive(t, counts[http.StatusUnauthorized], "statuses %v", counts)
	require.Equal(t, 100, counts[http.StatusUnauthorized]+counts[http.StatusBadRequest], "statuses %v", counts)

	status, _, body = g.do(t, http.MethodGet, "/api/v1/captcha", "", "", "10.9.9.1")
	require.Equal(t, http.StatusOK, status, body)
	var c struct {
		ID string `json:"captcha_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &c))
	answer, err := stack.Redis(t).Get(context.Background(), edge.CaptchaKeyPrefix+c.ID).Result()
	require.NoError(t, err)
	status, _, body = g.do(t, http.MethodPost, "/api/v1/sessions",
		`{"username":"`+name+`","password":"correct-horse","captcha_id":"`+c.ID+`","captcha_answer":"`+answer+`"}`, "", "10.9.9.1")
	require.Equal(t, http.StatusOK, status, "the owner with a solved captcha, past a hundred guesses: %s", body)
}

// redisRateLimit is a per-username login budget of burst, refilled at 10 a
// minute (the default's rate).
func redisRateLimit(burst int) redis_rate.Limit {
	return redis_rate.Limit{Rate: 10, Burst: burst, Period: time.Minute}
}

// token signs user in.
func (g *liveGateway) token(t *testing.T, user int64) string {
	t.Helper()
	tok, _, err := g.tokens.Issue(user)
	require.NoError(t, err)
	return tok
}

// 300 lookups of order ids that carry the current time, sent at once by
// one shopper: each one that gets through costs PostgreSQL queries (the
// order, a fresh list of active vouchers, the order again), so the
// shopper's budget answers 429 past its burst, with Retry-After and the
// RateLimit headers, and the queries stay bounded by what it let through.
// Another shopper at the same moment is served from their own budget.
func TestFreshOrderLookupsAreLimitedPerShopper(t *testing.T) {
	t.Parallel()
	const rate, burst = 1, 20
	g := newLiveGateway(t, edge.Config{ShopperRate: rate, ShopperBurst: burst})
	tok := g.token(t, 42)
	ids, err := orderid.New(7)
	require.NoError(t, err)
	before := g.reads.queries.Load()
	start := time.Now()
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for range 300 {
		id := ids.Next()
		wg.Go(func() {
			status, h, body := g.do(t, http.MethodGet, "/api/v1/orders/"+strconv.FormatInt(id, 10), "", tok, "10.7.0.1")
			if status == http.StatusTooManyRequests {
				if h.Get("Retry-After") == "" || h.Get("RateLimit-Limit") != strconv.Itoa(rate) ||
					h.Get("RateLimit-Remaining") != "0" || !strings.Contains(body, `"rate_limited"`) {
					t.Errorf("a 429 without its headers or code: %v %s", h, body)
				}
			}
			mu.Lock()
			counts[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	queries := g.reads.queries.Load() - before
	passed := counts[http.StatusNotFound]
	// GCRA admits at most burst + rate·t in t seconds.
	require.LessOrEqual(t, passed, burst+rate*int(elapsed/time.Second+1), "statuses %v", counts)
	require.Equal(t, 300, passed+counts[http.StatusTooManyRequests], "statuses %v", counts)
	// Three queries a lookup let through, plus the few of a periodic
	// refresh that may land in the window (one extra was seen once).
	require.LessOrEqual(t, queries, int64(3*passed+3), "queries %d for %d lookups let through", queries, passed)
	t.Logf("300 lookups: statuses %v, %d PostgreSQL queries", counts, queries)

	status, h, body := g.do(t, http.MethodGet, "/api/v1/orders", "", g.token(t, 43), "10.7.0.2")
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, strconv.Itoa(rate), h.Get("RateLimit-Limit"))
}

// Every signed-in route other than the buy is behind the shopper's budget.
func TestEverySignedInRouteIsLimitedPerShopper(t *testing.T) {
	t.Parallel()
	g := newLiveGateway(t, edge.Config{ShopperRate: 1, ShopperBurst: 1})
	tok := g.token(t, 44)
	status, _, body := g.do(t, http.MethodGet, "/api/v1/orders", "", tok, "10.6.0.1")
	require.Equal(t, http.StatusOK, status, body)
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/orders"},
		{http.MethodGet, "/api/v1/orders/1"},
		{http.MethodPost, "/api/v1/orders/1/pay"},
		{http.MethodPost, "/api/v1/orders/1/cancel"},
		{http.MethodGet, "/api/v1/vouchers/1/queue"},
		{http.MethodPost, "/api/v1/vouchers/1/queue"},
	} {
		status, h, body := g.do(t, r.method, r.path, "", tok, "10.6.0.1")
		require.Equal(t, http.StatusTooManyRequests, status, "%s %s: %s", r.method, r.path, body)
		require.NotEmpty(t, h.Get("Retry-After"), "%s %s", r.method, r.path)
	}
	// The address's budget: many accounts from one address.
	g = newLiveGateway(t, edge.Config{ShopperAddressRate: 1, ShopperAddressBurst: 3})
	refused := 0
	for u := int64(100); u < 110; u++ {
		if status, _, _ := g.do(t, http.MethodGet, "/api/v1/orders", "", g.token(t, u), "10.6.0.9"); status == http.StatusTooManyRequests {
			refused++
		}
	}
	require.GreaterOrEqual(t, refused, 6, "ten accounts from one address share its budget")
	status, _, body = g.do(t, http.MethodGet, "/api/v1/orders", "", g.token(t, 200), "10.6.0.10")
	require.Equal(t, http.StatusOK, status, body)
}

// dialWS opens token's socket from the client address addr and closes it at
// once; it returns the handshake's status and headers.
func (g *liveGateway) dialWS(t *testing.T, token, addr string) (int, http.Header) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: time.Minute}
	if token != "" {
		d.Subprotocols = []string{"bearer", token}
	}
	conn, resp, err := d.Dial("ws"+strings.TrimPrefix(g.base, "http")+"/api/v1/ws", http.Header{"X-Forwarded-For": {addr}})
	if conn != nil {
		require.NoError(t, conn.Close())
	}
	require.NotNil(t, resp, "no answer to the handshake: %v", err)
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// The signed-in handshake of GET /api/v1/ws reads the shopper's orders from
// PostgreSQL for its snapshot, so it is behind the shopper's budget of the
// other signed-in routes, charged before that read: thirty handshakes of
// one shopper, each from its own address (so no per-address cap stops
// them), get the burst through and 429 with Retry-After past it, and
// PostgreSQL is read only for those let through. Another shopper connects
// from their own budget, and a socket without a token is not charged.
func TestSignedInHandshakeIsLimitedPerShopper(t *testing.T) {
	t.Parallel()
	const rate, burst = 1, 5
	g := newLiveGateway(t, edge.Config{ShopperRate: rate, ShopperBurst: burst})
	tok := g.token(t, 46)
	before := g.reads.queries.Load()
	start := time.Now()
	counts := map[int]int{}
	for i := range 30 {
		status, h := g.dialWS(t, tok, fmt.Sprintf("10.5.0.%d", i+1))
		if status == http.StatusTooManyRequests {
			require.NotEmpty(t, h.Get("Retry-After"), "a 429 tells when to come back")
			require.Equal(t, strconv.Itoa(rate), h.Get("RateLimit-Limit"))
		}
		counts[status]++
	}
	elapsed := time.Since(start)
	opened := counts[http.StatusSwitchingProtocols]
	require.Equal(t, 30, opened+counts[http.StatusTooManyRequests], "statuses %v", counts)
	// GCRA admits at most burst + rate·t in t seconds.
	require.LessOrEqual(t, opened, burst+rate*int(elapsed/time.Second+1), "statuses %v", counts)
	// One list of orders per socket opened, plus the active vouchers' list,
	// read again at most once a second.
	queries := g.reads.queries.Load() - before
	require.LessOrEqual(t, queries, int64(opened)+int64(elapsed/time.Second)+2,
		"%d PostgreSQL queries for %d sockets opened", queries, opened)
	t.Logf("30 handshakes of one shopper: statuses %v, %d PostgreSQL queries", counts, queries)

	status, h := g.dialWS(t, g.token(t, 47), "10.5.1.1")
	require.Equal(t, http.StatusSwitchingProtocols, status, "another shopper has a budget of their own")
	require.Equal(t, strconv.Itoa(rate), h.Get("RateLimit-Limit"), "the 101 carries the budget, as every signed-in answer does")
	status, _ = g.dialWS(t, "", "10.5.1.2")
	require.Equal(t, http.StatusSwitchingProtocols, status, "a socket without a token")
}
