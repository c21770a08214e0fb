package edge_test

// The gateway over the real stores (PostgreSQL, Redis) and the real gates:
// the limits of the login and of the signed-in routes, counted in what
// reaches PostgreSQL and Redis.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/gateway/auth"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
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

// liveGateway is a gateway serving on loopback over a database of its own,
// the shared Redis and the real gates, trusting loopback as its proxy so
// that each request may come from its own X-Forwarded-For address.
type liveGateway struct {
	base   string
	client *http.Client
	pool   *pgxpool.Pool
	tokens *auth.Tokens
}

func newLiveGateway(t *testing.T, cfg edge.Config) *liveGateway {
	t.Helper()
	pool := stack.NewDatabase(t)
	rdb := stack.Redis(t)
	store := pgstore.New(pool)
	stock := redisstock.New(rdb)
	e, _ := newEdge(t, rdb, cfg)
	tokens, err := auth.NewTokens([]byte("signedin-secret-signedin-secret-sig!"), time.Hour)
	require.NoError(t, err)
	active := orders.NewActiveCache(store, time.Second)
	srv, err := gateway.New(gateway.Config{AdminToken: catalogAdmin, TrustedProxies: []string{"127.0.0.1"}}, gateway.Deps{
		Catalog:  seckill.NewCatalog(store, stock, time.Second),
		Buyer:    nopBuyer{},
		Gates:    e.Gates(),
		Orders:   orders.NewReader(store, stock, active.IDs),
		Stats:    nopStats{},
		Accounts: auth.NewAccounts(pgUsers{store}, tokens),
		Tokens:   tokens,
		Logger:   quiet,
	})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	g := &liveGateway{base: "http://" + ln.Addr().String(), client: &http.Client{Timeout: time.Minute, Transport: tr}, pool: pool, tokens: tokens}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
		require.NoError(t, <-done)
	})
	return g
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
// bcrypt (401) and 429 for the rest; a right password gives its unit back.
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
	require.Equal(t, 100, counts[http.StatusUnauthorized]+counts[http.StatusTooManyRequests], "statuses %v", counts)
}

// redisRateLimit is a per-username login budget of burst, refilled at 10 a
// minute (the default's rate).
func redisRateLimit(burst int) redis_rate.Limit {
	return redis_rate.Limit{Rate: 10, Burst: burst, Period: time.Minute}
}
