package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/cmd/seckill/app"
	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/deploy/tools/apitest"
	"github.com/flashsale/seckill/gateway/auth"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill/pause"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/flashsale/seckill/seckill/testlog"
)

// testSystem is one running process of every role on the package's
// services, reached over real HTTP.
type testSystem struct {
	base   string
	ops    string // where /metrics is served (opsBase)
	cfg    app.Config
	pool   *pgxpool.Pool
	rdb    redis.UniversalClient
	tokens *auth.Tokens
	client *http.Client
}

// startSystem runs newSystem + run on a fresh database and topic, the way
// `seckill serve` does, and stops it when the test ends. The topic is on the
// package's three-node Apache Kafka (see newKafkaTopic). Unless env names
// a Redis (SECKILL_REDIS_URL or SECKILL_REDIS_CLUSTER_ADDRS), the system
// gets a redis-server of its own: what is fleet-wide in Redis (the
// breaker's ops switch, the count of gateways, the order events' channels,
// the per-user limits) is then the test's alone, and it may run in
// parallel with others (see main_test.go).
func startSystem(t testing.TB, env map[string]string) *testSystem {
	t.Helper()
	brokers, topic := newKafkaTopic(t, 6)
	dbURL := stack.NewDatabaseURL(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	pgstoretest.SpreadVoucherIDs(t, pool) // some tests share a Redis

	_, namedURL := env["SECKILL_REDIS_URL"]
	_, namedCluster := env["SECKILL_REDIS_CLUSTER_ADDRS"]
	redisURL := ""
	if !namedURL && !namedCluster {
		srv, _ := stacktest.PrivateRedis(t)
		redisURL = srv.URL
	}

	vars := map[string]string{
		"SECKILL_REDIS_URL":      redisURL,
		"SECKILL_DATABASE_URL":   dbURL,
		"SECKILL_KAFKA_BROKERS":  brokers,
		"SECKILL_KAFKA_TOPIC":    topic,
		"SECKILL_KAFKA_GROUP":    "g-" + strconv.FormatInt(rand.Int64(), 36),
		"SECKILL_JWT_SECRET":     "test-secret-0123456789abcdefghijklmnopqrstuvwxyz-" + strconv.FormatInt(rand.Int64(), 36),
		"SECKILL_ADMIN_TOKEN":    "admin-" + strconv.FormatInt(rand.Int64(), 36),
		"SECKILL_USER_RATE":      "1000",
		"SECKILL_USER_BURST":     "1000",
		"SECKILL_GLOBAL_RATE":    "1000000",
		"SECKILL_GLOBAL_BURST":   "1000000",
		"SECKILL_IP_RATE":        "1000000",
		"SECKILL_IP_BURST":       "1000000",
		"SECKILL_BUY_IP_RATE":    "1000000",
		"SECKILL_BUY_IP_BURST":   "1000000",
		"SECKILL_CONNS_PER_ADDR": "1000000",
		"SECKILL_WS_PER_ADDR":    "1000000",
		"SECKILL_LOG_LEVEL":      "warn",
		// No test reaches the public beacon: a test that draws passes
		// drandEnv (the package's private drand network); the others'
		// draws find nothing listening here.
		"SECKILL_DRAND_URLS": "http://127.0.0.1:1",

		// The tests register accounts freely; the tests of the challenge
		// (TestRegisterTakesAChallenge, TestBrowserRegisterCaptcha) set
		// captcha, production's default.
		"SECKILL_REGISTER_CHALLENGE": "none",
		"SECKILL_REGISTER_RATE":      "1000000", "SECKILL_REGISTER_BURST": "1000000",

		// A shopper's unpaid strikes are fleet-wide, not per sale, and the
		// tests share one Redis and reuse user ids: the holds one test lets
		// expire would refuse another's shoppers. TestHoardingCostsTheHoarder
		// sets its own limit.
		"SECKILL_HOARD_LIMIT": "0",

		// The signed-in routes' budgets: tests poll orders and places.
		"SECKILL_SHOPPER_RATE": "1000", "SECKILL_SHOPPER_BURST": "1000",
		"SECKILL_SHOPPER_IP_RATE": "1000000", "SECKILL_SHOPPER_IP_BURST": "1000000",
	}
	for k, v := range env {
		vars[k] = v
	}
	// The listeners' ports are chosen free, but another test's service may
	// take one before the system binds it (the tests run in parallel):
	// then the system is started again on new ones.
	var cfg app.Config
	for attempt := 1; ; attempt++ {
		vars["SECKILL_HTTP_ADDR"], vars["SECKILL_OPS_ADDR"] = freeAddr(t), freeAddr(t)
		cfg, err = app.LoadConfig(func(k string) string { return vars[k] })
		require.NoError(t, err)
		stop, err := startInstance(t, cfg)
		if err == nil {
			t.Cleanup(stop)
			break
		}
		require.False(t, !errors.Is(err, syscall.EADDRINUSE) || attempt == 3, "the system did not start: %v", err)
	}
	addr := cfg.HTTPAddr

	tokens, err := auth.NewTokens([]byte(cfg.JWTSecret), time.Hour)
	require.NoError(t, err)
	ts := &testSystem{
		base:   "http://" + addr,
		ops:    opsBase(cfg),
		cfg:    cfg,
		pool:   pool,
		rdb:    redisOf(t, cfg),
		tokens: tokens,
		client: apiClient(t, "http://"+addr, 256),
	}
	// Cleanups run last-in first-out: the client lets go of its idle
	// connections before the server shuts down under them.
	t.Cleanup(ts.client.CloseIdleConnections)
	ts.waitReady(t)
	return ts
}

// redisOf is a client of the Redis cfg's system runs on, closed when the
// test ends.
func redisOf(t testing.TB, cfg app.Config) redis.UniversalClient {
	t.Helper()
	if len(cfg.RedisCluster) > 0 {
		return stack.Client(t, stacktest.RedisShape{ClusterAddrs: cfg.RedisCluster})
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// apiClient is the client of the tests for the API at base: every answer it
// gets is checked against gateway/openapi.yaml (deploy/tools/apitest), failing the
// test on a mismatch, so a test that passes cannot hide a contract break.
func apiClient(t testing.TB, base string, idle int) *http.Client {
	t.Helper()
	return apitest.Wrap(t, &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: idle}}, base)
}

// newKafkaTopic creates a topic of its own for the test on the package's
// Apache Kafka cluster of three nodes (started by the first test that asks),
// the production shape of docker-compose.yml: replication factor 3,
// min.insync.replicas 2, so an order is accepted only once two brokers hold
// it, and the consumer group, its offsets and the dead-letter topic the
// workers create are the real broker's. It returns the brokers as
// SECKILL_KAFKA_BROKERS takes them, and the topic. The tests that hold a
// produce request through the in-process broker's hooks set
// SECKILL_KAFKA_BROKERS and SECKILL_KAFKA_TOPIC to it instead (the room pass
// tests); the faults of the brokers themselves are deploy/tools/chaos's.
func newKafkaTopic(t testing.TB, partitions int32) (brokers, topic string) {
	t.Helper()
	k := stack.ApacheKafka(t, 3)
	return strings.Join(k.Brokers, ","), stack.NewApacheTopic(t, k, partitions)
}

// runInstance runs one process of the system on cfg, as `seckill serve`
// does, and returns what stops it (idempotent), checking it shut down
// cleanly.
func runInstance(t testing.TB, cfg app.Config) (stop func()) {
	t.Helper()
	stop, err := startInstance(t, cfg)
	require.NoError(t, err)
	return stop
}

// startInstance is runInstance, but a process that ends at once (its
// listeners could not be bound) is an error, with nothing left running.
func startInstance(t testing.TB, cfg app.Config) (stop func(), err error) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = testlog.Logger(t, slog.LevelWarn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sys, err := app.NewSystem(ctx, cfg, log)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	done := make(chan error, 1)
	go func() { done <- sys.Run(ctx) }()
	// Run binds its listeners first: one it could not bind ends it at
	// once, before anything answers on its addresses.
	if err := awaitAnswer(cfg, done); err != nil {
		cancel()
		sys.Close()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Error("system did not shut down within 30s")
			}
			sys.Close()
		})
	}, nil
}

// awaitAnswer waits until the process of cfg answers /healthz on its
// listener (30 s at most) and returns the error Run ended with if it ended
// first; a process that answers is still checked once for having ended, as
// another test's process may hold the address it failed to bind.
func awaitAnswer(cfg app.Config, done chan error) error {
	url := opsBase(cfg) + "/healthz"
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-done:
			done <- err // for the stop that may still read it
			return fmt.Errorf("the system ended as it started: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return nil // waitReady says what is missing
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			select {
			case err := <-done:
				done <- err
				return fmt.Errorf("the system ended as it started: %w", err)
			case <-time.After(50 * time.Millisecond):
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// opsBase is where a process of cfg serves /metrics: the ops listener of a
// gateway, the one listener of a process without it.
func opsBase(cfg app.Config) string {
	if cfg.HasRole(app.RoleGateway) {
		return "http://" + cfg.OpsAddr
	}
	return "http://" + cfg.HTTPAddr
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func (ts *testSystem) waitReady(t testing.TB) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := ts.client.Get(ts.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "gateway never became ready")
}

// answer is one HTTP exchange with its decoded body.
type answer struct {
	status int
	header http.Header
	body   map[string]any
	list   []map[string]any
	raw    []byte
}

func (a answer) errorCode() string {
	e, _ := a.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func (ts *testSystem) do(t testing.TB, method, path, token string, body any, header map[string]string) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, ts.base+path, rd)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := ts.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && raw[0] == '[' {
		require.NoError(t, json.Unmarshal(raw, &a.list), "body: %s", raw)
	} else if len(raw) > 0 && raw[0] == '{' {
		require.NoError(t, json.Unmarshal(raw, &a.body), "body: %s", raw)
	}
	return a
}

func (ts *testSystem) shopper(t testing.TB, userID int64) string {
	t.Helper()
	tok, _, err := ts.tokens.Issue(userID)
	require.NoError(t, err)
	return tok
}

// createVoucher makes a seckill voucher through the admin API.
func (ts *testSystem) createVoucher(t testing.TB, stock, limit int, begin, end time.Time) string {
	t.Helper()
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "test voucher", "kind": "seckill", "price_cents": 250, "stock": stock,
		"per_user_limit": limit, "begin_at": begin.UTC().Format(time.RFC3339), "end_at": end.UTC().Format(time.RFC3339),
		"captcha_required": false,
	}, nil)
	require.Equal(t, http.StatusCreated, a.status, "create voucher: %s", a.raw)
	id, ok := a.body["id"].(string)
	require.True(t, ok, "voucher id must be a JSON string: %s", a.raw)
	return id
}

// createKindVoucher makes a voucher of kind on sale now, for an hour,
// through the admin API.
func (ts *testSystem) createKindVoucher(t testing.TB, kind string, stock, limit int, captcha bool) string {
	t.Helper()
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": kind + " voucher", "kind": kind, "price_cents": 100, "stock": stock, "per_user_limit": limit,
		"begin_at": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
		"end_at":   time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "captcha_required": captcha,
	}, nil)
	require.Equal(t, http.StatusCreated, a.status, "create voucher: %s", a.raw)
	return a.body["id"].(string)
}

// waitCatalogStock waits until the public catalog shows the voucher with
// want units left, and returns that answer. The catalog reads the stock on
// its own refresh (every 100 ms), so right after a sale it may lag a moment
// on a loaded machine; a catalog that never catches up fails the test.
func (ts *testSystem) waitCatalogStock(t *testing.T, vid string, want int64) answer {
	t.Helper()
	var v answer
	require.Eventually(t, func() bool {
		v = ts.do(t, http.MethodGet, "/api/v1/vouchers/"+vid, "", nil, nil)
		return v.status == http.StatusOK && v.body["stock_left"] == float64(want)
	}, 30*time.Second, 50*time.Millisecond, "the catalog shows %d left", want)
	return v
}

// crowdBuy is one buy of a crowd: who sends it, with which key, for how many.
type crowdBuy struct {
	user  int64
	token string
	key   string
	qty   int
}

// ordersByKey checks a crowd's answers, answers[i] being the answer to
// buys[i]: each is a 202 or a 409 sold_out or limit_exceeded, every send of
// a key got the same order, and no two keys got one order. It returns the
// order id of each accepted key and the buy behind each order.
func ordersByKey(t *testing.T, buys []crowdBuy, answers []answer) (orderOfKey map[string]string, buyOfOrder map[string]crowdBuy) {
	t.Helper()
	orderOfKey, buyOfOrder = map[string]string{}, map[string]crowdBuy{}
	for i, a := range answers {
		b := buys[i]
		switch a.status {
		case http.StatusAccepted:
			id := a.body["order_id"].(string)
			if prev, ok := orderOfKey[b.key]; ok {
				require.Equal(t, prev, id, "a replayed Idempotency-Key must return the first order")
			}
			orderOfKey[b.key] = id
			if other, ok := buyOfOrder[id]; ok {
				require.Equal(t, other.key, b.key, "two keys got one order")
			}
			buyOfOrder[id] = b
		case http.StatusConflict:
			require.Contains(t, []string{"sold_out", "limit_exceeded"}, a.errorCode(), "body: %s", a.raw)
		default:
			t.Fatalf("unexpected answer %d: %s", a.status, a.raw)
		}
	}
	return orderOfKey, buyOfOrder
}

// retryingShopper is one shopper of a crowd under a fault. It sends its buy
// with key until try calls the answer final, retrying the same key every
// 200 ms as a shopper does after a 503. A final 202 goes to onAccepted, and
// then a second buy with a new key must be refused (the per-user limit): a
// 202 to it is counted in limitBroken. A final refusal ends the shopper.
func retryingShopper(ctx context.Context, key string, try func(key string) (final bool, a answer),
	onAccepted func(answer), limitBroken *atomic.Int64) {
	for ctx.Err() == nil {
		final, a := try(key)
		if final {
			if a.status != http.StatusAccepted {
				return
			}
			onAccepted(a)
			break
		}
		_ = pause.For(ctx, 200*time.Millisecond)
	}
	for ctx.Err() == nil {
		final, a := try(key + "-again")
		if final {
			if a.status == http.StatusAccepted {
				limitBroken.Add(1)
			}
			return
		}
		_ = pause.For(ctx, 200*time.Millisecond)
	}
}

func (ts *testSystem) buy(t testing.TB, voucherID, token string, qty int, key string) answer {
	t.Helper()
	h := map[string]string{}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return ts.do(t, http.MethodPost, "/api/v1/vouchers/"+voucherID+"/orders", token, map[string]any{"quantity": qty}, h)
}

// buyRetrying is a shopper's buy in a crowd: a 503 (Redis slow to answer
// on a busy machine, the breaker open after it) is sent again with the same
// Idempotency-Key after a pause, as the page does, until another answer or
// 30 s. A crowd's checks are about what is sold, not how fast the machine
// answers, and a 503 is an honest answer that sells nothing.
func (ts *testSystem) buyRetrying(t testing.TB, voucherID, token string, qty int, key string) answer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := ts.buy(t, voucherID, token, qty, key)
		if a.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return a
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitPersisted waits until PostgreSQL holds n orders of the voucher in a
// final or created state, and Redis has no pending reservation left. A buy
// whose Kafka write went unacknowledged (a busy machine slows the three
// brokers' replication past the buy's timeout) keeps its hold until its
// message is persisted or, lost, the reconciler ends it after its 30 s
// grace: hence the generous bound, which a healthy run never nears.
func (ts *testSystem) waitPersisted(t *testing.T, voucherID string, n int) {
	t.Helper()
	vid, err := strconv.ParseInt(voucherID, 10, 64)
	require.NoError(t, err)
	stock := redisstock.New(redisstock.Config{Redis: ts.rdb})
	require.Eventually(t, func() bool {
		var got int
		err := ts.pool.QueryRow(context.Background(), `SELECT count(*) FROM orders WHERE voucher_id = $1`, vid).Scan(&got)
		if err != nil || got != n {
			return false
		}
		snap, err := stock.Snapshot(context.Background(), vid)
		return err == nil && snap.Pending == 0
	}, 2*time.Minute, 50*time.Millisecond, "orders never all persisted")
}

// checkInvariants asserts the rules of seckill/RULES.md for one voucher once
// nothing is in flight: sold + left == total in PostgreSQL, Redis agrees,
// nobody above the limit, one order per request key.
func (ts *testSystem) checkInvariants(t *testing.T, voucherID string, limit int) (sold int64) {
	t.Helper()
	ctx := context.Background()
	vid, err := strconv.ParseInt(voucherID, 10, 64)
	require.NoError(t, err)
	var total, left int64
	require.NoError(t, ts.pool.QueryRow(ctx, `SELECT stock_total, stock_left FROM vouchers WHERE id = $1`, vid).Scan(&total, &left))
	require.NoError(t, ts.pool.QueryRow(ctx,
		`SELECT coalesce(sum(quantity), 0) FROM orders WHERE voucher_id = $1 AND status IN ('created', 'paid')`, vid).Scan(&sold))
	require.Equal(t, total, sold+left, "PostgreSQL: sold + left must equal the total")

	snap, err := redisstock.New(redisstock.Config{Redis: ts.rdb}).Snapshot(ctx, vid)
	require.NoError(t, err)
	require.True(t, snap.Balanced(), "Redis must balance: %+v", snap)
	require.Equal(t, left, snap.Left, "Redis and PostgreSQL must agree on what is left")
	require.Equal(t, sold, snap.Held, "Redis holds must be exactly the sold orders")

	var over int
	require.NoError(t, ts.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT user_id FROM orders
		WHERE voucher_id = $1 AND status IN ('created', 'paid') GROUP BY user_id HAVING sum(quantity) > $2) o`, vid, limit).Scan(&over))
	require.Zero(t, over, "nobody may hold more than the per-user limit")
	var buyersMismatch int
	require.NoError(t, ts.pool.QueryRow(ctx, `SELECT count(*) FROM voucher_buyers b FULL JOIN (
		SELECT user_id, sum(quantity) q FROM orders WHERE voucher_id = $1 AND status IN ('created', 'paid') GROUP BY user_id) o
		ON o.user_id = b.user_id AND b.voucher_id = $1
		WHERE (b.voucher_id = $1 OR b.voucher_id IS NULL) AND coalesce(b.quantity, 0) <> coalesce(o.q, 0)`, vid).Scan(&buyersMismatch))
	require.Zero(t, buyersMismatch, "voucher_buyers must equal the created and paid orders per user")
	return sold
}

// shapeEnv is the configuration that runs the system on shape: the plain
// shape on a redis-server of the system's own (startSystem's default), the
// cluster on the package's Redis Cluster.
func shapeEnv(shape stacktest.RedisShape) map[string]string {
	if len(shape.ClusterAddrs) > 0 {
		return map[string]string{"SECKILL_REDIS_URL": "", "SECKILL_REDIS_CLUSTER_ADDRS": strings.Join(shape.ClusterAddrs, ",")}
	}
	return map[string]string{}
}

// onEveryShape runs test once on one plain redis-server and once on a
// Redis Cluster of three masters, the two side by side: each on a system
// and vouchers of its own.
func onEveryShape(t *testing.T, test func(t *testing.T, env map[string]string)) {
	for _, shape := range stack.RedisShapes(t) {
		t.Run(shape.Name, func(t *testing.T) {
			t.Parallel()
			test(t, shapeEnv(shape))
		})
	}
}

func TestThousandBuyersOfAHundredItems(t *testing.T) {
	t.Parallel()
	onEveryShape(t, testThousandBuyersOfAHundredItems)
}

func testThousandBuyersOfAHundredItems(t *testing.T, env map[string]string) {
	ts := startSystem(t, env)
	vid := ts.createVoucher(t, 100, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))

	const buyers = 1000
	tokens := make([]string, buyers)
	for i := range tokens {
		tokens[i] = ts.shopper(t, int64(500_000+i))
	}
	codes := make([]answer, buyers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range buyers {
		wg.Go(func() {
			<-start
			codes[i] = ts.buyRetrying(t, vid, tokens[i], 1, fmt.Sprintf("k-%d", i))
		})
	}
	close(start)
	wg.Wait()

	accepted := map[string]bool{}
	for _, a := range codes {
		switch a.status {
		case http.StatusAccepted:
			require.Equal(t, "reserved", a.body["status"])
			id := a.body["order_id"].(string)
			require.False(t, accepted[id], "order id %s handed out twice", id)
			accepted[id] = true
		case http.StatusConflict:
			require.Equal(t, "sold_out", a.errorCode(), "body: %s", a.raw)
		default:
			t.Fatalf("unexpected answer %d: %s", a.status, a.raw)
		}
	}
	require.Len(t, accepted, 100, "exactly the stock must be accepted")

	ts.waitPersisted(t, vid, 100)
	require.EqualValues(t, 100, ts.checkInvariants(t, vid, 1))

	ts.waitCatalogStock(t, vid, 0)
	stats := ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/stats", ts.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, stats.status, "%s", stats.raw)
	require.EqualValues(t, 100, stats.body["created"])
	require.EqualValues(t, 0, stats.body["stock_left"])
	drift := stats.body["drift"].(map[string]any)
	require.Equal(t, true, drift["ok"], "Redis and PostgreSQL agree once nothing is in flight: %v", drift["problems"])
	require.EqualValues(t, 0, drift["pending"])
}

func TestReplaysAndQuantities(t *testing.T) {
	t.Parallel()
	onEveryShape(t, testReplaysAndQuantities)
}

func testReplaysAndQuantities(t *testing.T, env map[string]string) {
	ts := startSystem(t, env)
	const stock, limit, buyers = 100, 3, 300
	vid := ts.createVoucher(t, stock, limit, time.Now().Add(-time.Second), time.Now().Add(time.Hour))

	var attempts []crowdBuy
	for i := range buyers {
		u := int64(700_000 + i)
		tok := ts.shopper(t, u)
		// Each shopper sends its key three times at once (a double click and
		// a retry), and some send a second purchase with a new key.
		a := crowdBuy{user: u, token: tok, key: fmt.Sprintf("k-%d-a", u), qty: 1 + i%3}
		attempts = append(attempts, a, a, a)
		if i%4 == 0 {
			attempts = append(attempts, crowdBuy{user: u, token: tok, key: fmt.Sprintf("k-%d-b", u), qty: 1})
		}
	}
	rand.Shuffle(len(attempts), func(i, j int) { attempts[i], attempts[j] = attempts[j], attempts[i] })
	answers := make([]answer, len(attempts))
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Go(func() { answers[i] = ts.buyRetrying(t, vid, attempts[i].token, attempts[i].qty, attempts[i].key) })
	}
	wg.Wait()

	orderOfKey, _ := ordersByKey(t, attempts, answers)
	ts.waitPersisted(t, vid, len(orderOfKey))
	sold := ts.checkInvariants(t, vid, limit)
	require.LessOrEqual(t, sold, int64(stock))
	require.Greater(t, sold, int64(stock-limit), "the crowd is big enough to sell out up to the last few items")

	// Each accepted key is exactly one row with that key.
	var rows int
	require.NoError(t, ts.pool.QueryRow(context.Background(),
		`SELECT count(DISTINCT request_key) FROM orders WHERE request_key IS NOT NULL`).Scan(&rows))
	require.Equal(t, len(orderOfKey), rows)

	// A replay after the sale is persisted still returns the same order.
	for key, id := range orderOfKey {
		for _, at := range attempts {
			if at.key == key {
				a := ts.buy(t, vid, at.token, at.qty, at.key)
				require.Equal(t, http.StatusAccepted, a.status, "%s", a.raw)
				require.Equal(t, id, a.body["order_id"])
				return
			}
		}
	}
}

// A process whose address another took ends as it starts, and
// startInstance says so with the bind's error (startSystem then tries new
// addresses) and leaves nothing running.
func TestStartInstanceRefusesATakenAddress(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	cfg := ts.cfg
	cfg.HTTPAddr, cfg.OpsAddr = freeAddr(t), taken.Addr().String()
	stop, err := startInstance(t, cfg)
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	require.Nil(t, stop)
	_, err = http.Get("http://" + cfg.HTTPAddr + "/healthz")
	require.Error(t, err, "its other listener is closed")
}
