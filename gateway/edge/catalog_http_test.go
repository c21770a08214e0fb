package edge_test

// The gateway over a real Catalog (PostgreSQL + Redis): the error rows that
// depend on what the stores wrap.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/gateway/auth"
	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

type nopBuyer struct{}

func (nopBuyer) Buy(context.Context, seckill.BuyRequest) (seckill.ReserveResult, error) {
	return seckill.ReserveResult{OrderID: 1}, nil
}

// nopPipeline is the buy over catalog and steps whose seller is nopBuyer,
// wired as cmd/seckill wires it.
func nopPipeline(t testing.TB, catalog pipe.Catalog, steps pipe.Steps, orders pipe.OrderStatus) *pipe.Pipeline {
	t.Helper()
	p, err := pipe.New(pipe.Deps{Catalog: catalog, Steps: steps, Seckill: pipe.SeckillSeller{Buyer: nopBuyer{}},
		Orders: orders, Logger: quiet})
	require.NoError(t, err)
	return p
}

type nopOrders struct{}

func (nopOrders) Get(context.Context, int64, int64) (orders.Order, error) {
	return orders.Order{}, apperr.ErrNotFound
}
func (nopOrders) List(context.Context, int64) ([]orders.Order, error) { return nil, nil }
func (nopOrders) Page(context.Context, int64, orders.Page) ([]orders.Order, bool, error) {
	return nil, false, nil
}

type nopStats struct{}

func (nopStats) Stats(context.Context, int64) (orders.Stats, error) {
	return orders.Stats{}, apperr.ErrNotFound
}

const catalogAdmin = "admin-token-0123456789"

func catalogGateway(t *testing.T, pool *pgxpool.Pool) (*gateway.Server, *auth.Tokens) {
	t.Helper()
	tokens, err := auth.NewTokens([]byte("catalog-secret-catalog-secret-catal!"), time.Hour)
	require.NoError(t, err)
	catalog := seckill.NewCatalog(seckill.CatalogConfig{Store: pgstore.New(pool), Stock: redisstock.New(redisstock.Config{Redis: stack.Redis(t)})})
	srv, err := gateway.New(gateway.Config{AdminToken: catalogAdmin}, gateway.Deps{
		Catalog: catalog, Buy: nopPipeline(t, catalog, pipe.Steps{}, nopOrders{}), Orders: nopOrders{}, Stats: nopStats{},
		Accounts: auth.NewAccounts(nil, tokens), Tokens: tokens, Logger: quiet,
	})
	require.NoError(t, err)
	return srv, tokens
}

func send(t *testing.T, srv *gateway.Server, method, path, auth, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := srv.App().Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return resp.StatusCode, e.Error.Code
}

// A title with a NUL character is valid JSON, but PostgreSQL refuses it
// (22021): it must be the operator's 400 invalid_input, not 500 internal for
// their own input.
func TestVoucherTitleWithNULIsInvalidInput(t *testing.T) {
	t.Parallel()
	srv, _ := catalogGateway(t, stack.NewDatabase(t))
	status, code := send(t, srv, http.MethodPost, "/api/v1/admin/vouchers", catalogAdmin,
		`{"title":"a\u0000b","kind":"limit","price_cents":1,"stock":1,"per_user_limit":1,`+
			`"begin_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z"}`)
	require.Equal(t, http.StatusBadRequest, status, code)
	require.Equal(t, "invalid_input", code)
}

// PostgreSQL down is "dependency down" (the error table: 503 unavailable with
// Retry-After), not 500 internal: on the catalog, and on the BUYING path
// too, whose voucher step reads Catalog.Cached (PostgreSQL once its 1 s copy
// is stale) before the breaker.
func TestPostgresDownIsUnavailable(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/nothing?connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	srv, tokens := catalogGateway(t, pool)
	tok, _, err := tokens.Issue(42)
	require.NoError(t, err)

	list, listCode := send(t, srv, http.MethodGet, "/api/v1/vouchers", "", "")
	buy, buyCode := send(t, srv, http.MethodPost, "/api/v1/vouchers/1/orders", tok, `{}`)
	require.Equal(t, [2]int{503, 503}, [2]int{list, buy}, "list %s, buy %s", listCode, buyCode)
}
