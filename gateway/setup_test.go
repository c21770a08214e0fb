package gateway

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/auth"
	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/testlog"
)

// The in-test implementations below are of the gateway's own domain
// interfaces (Catalog, OrderReader...) and of the buy's (buy.Reserver...),
// not of Redis, PostgreSQL or Kafka: these tests are about HTTP, and the
// end-to-end tests run the real services.

const testAdminToken = "admin-token-0123456789"

var testSecret = []byte("test-secret-test-secret-test-secret!")

type fakeCatalog struct {
	mu       sync.Mutex
	vouchers map[int64]seckill.Voucher
	nextID   int64
	calls    atomic.Int64 // every method, to prove bad ids never reach it
	err      error        // returned by every call when set
	snap     *seckill.CatalogSnapshot
	dirty    bool // a change since snap was built
	changes  map[int64][]seckill.ChangeRecord
}

func (f *fakeCatalog) Create(_ context.Context, v seckill.Voucher, _ *seckill.Action) (seckill.Voucher, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return seckill.Voucher{}, f.err
	}
	f.nextID++
	v.ID = f.nextID
	v.CreatedAt = time.Now()
	v.Currency = v.CurrencyOr(seckill.DefaultCurrency) // as seckill.Catalog writes it down
	f.vouchers[v.ID] = v
	f.changedLocked()
	return v, nil
}

func (f *fakeCatalog) Voucher(_ context.Context, id int64) (seckill.Voucher, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return seckill.Voucher{}, f.err
	}
	v, ok := f.vouchers[id]
	if !ok {
		// The driver's words must never reach the client.
		return seckill.Voucher{}, fmt.Errorf("pgstore: voucher %d: no rows in result set: %w", id, apperr.ErrNotFound)
	}
	v.State = v.StateAt(time.Now())
	return v, nil
}

// Snapshot is the catalog in memory: a new snapshot after every change,
// like seckill.Catalog's.
func (f *fakeCatalog) Snapshot(_ context.Context) (*seckill.CatalogSnapshot, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if f.snap == nil || f.dirty {
		f.publishLocked()
	}
	return f.snap, nil
}

// changedLocked publishes the next snapshot at once, as the real catalog's
// refresh does, so that a socket feed waiting on Superseded sees it.
func (f *fakeCatalog) changedLocked() {
	f.dirty = true
	if f.snap != nil {
		f.publishLocked()
	}
}

func (f *fakeCatalog) publishLocked() {
	var out []seckill.Voucher
	for i := f.nextID; i >= 1; i-- {
		if v, ok := f.vouchers[i]; ok {
			v.State = ""
			out = append(out, v)
		}
	}
	if f.snap == nil {
		f.snap = seckill.NewCatalogSnapshot(out, time.Now())
	} else {
		f.snap = f.snap.Next(out, time.Now())
	}
	f.dirty = false
}

func (f *fakeCatalog) SetState(_ context.Context, id int64, st seckill.State, _ *seckill.Action) (seckill.Voucher, error) {
	return f.change(id, func(v seckill.Voucher) (seckill.Voucher, error) {
		v.Paused = st == seckill.StatePaused
		return v, nil
	})
}

func (f *fakeCatalog) Change(ctx context.Context, id int64, ch seckill.Change, _ *seckill.Action,
	inTx func(context.Context, seckill.Voucher) error) (seckill.Voucher, error) {
	v, err := f.change(id, func(v seckill.Voucher) (seckill.Voucher, error) {
		after, err := ch.Apply(v, time.Now())
		if err == nil && inTx != nil {
			err = inTx(ctx, after)
		}
		return after, err
	})
	if err == nil {
		f.mu.Lock()
		if f.changes == nil {
			f.changes = map[int64][]seckill.ChangeRecord{}
		}
		f.changes[id] = append(f.changes[id], seckill.ChangeRecord{Change: ch, At: time.Now(), StockTotal: v.StockTotal})
		f.mu.Unlock()
	}
	return v, err
}

func (f *fakeCatalog) Changes(_ context.Context, id int64) ([]seckill.ChangeRecord, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seckill.ChangeRecord(nil), f.changes[id]...), f.err
}

// change runs an operator's change of voucher id as the real catalog does:
// the record, then the memory.
func (f *fakeCatalog) change(id int64, apply func(seckill.Voucher) (seckill.Voucher, error)) (seckill.Voucher, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return seckill.Voucher{}, f.err
	}
	v, ok := f.vouchers[id]
	if !ok {
		return seckill.Voucher{}, fmt.Errorf("voucher %d: %w", id, apperr.ErrNotFound)
	}
	v, err := apply(v)
	if err != nil {
		return seckill.Voucher{}, err
	}
	f.vouchers[id] = v
	f.changedLocked()
	v.State = v.StateAt(time.Now())
	return v, nil
}

// update changes a voucher in place (stock moving, a pause) as the real
// catalog's refresh would.
func (f *fakeCatalog) update(id int64, change func(*seckill.Voucher)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.vouchers[id]
	change(&v)
	f.vouchers[id] = v
	f.changedLocked()
}

func (f *fakeCatalog) put(v seckill.Voucher) seckill.Voucher {
	if v.BeginAt.IsZero() {
		v.BeginAt, v.EndAt = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	}
	if v.StockLeft == 0 {
		v.StockLeft = v.StockTotal
	}
	v.Currency = v.CurrencyOr(seckill.DefaultCurrency)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	v.ID = f.nextID
	f.vouchers[v.ID] = v
	f.changedLocked()
	return v
}

type fakeBuyer struct {
	mu    sync.Mutex
	reqs  []seckill.BuyRequest
	calls atomic.Int64
	next  atomic.Int64
	fn    func(req seckill.BuyRequest) (seckill.ReserveResult, error) // nil: succeed
}

func (f *fakeBuyer) Buy(_ context.Context, req seckill.BuyRequest) (seckill.ReserveResult, error) {
	f.calls.Add(1)
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	fn := f.fn
	f.mu.Unlock()
	if fn != nil {
		return fn(req)
	}
	return seckill.ReserveResult{OrderID: 1_000_000 + f.next.Add(1), StockLeft: 10}, nil
}

func (f *fakeBuyer) setFn(fn func(req seckill.BuyRequest) (seckill.ReserveResult, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fn = fn
}

func (f *fakeBuyer) requests() []seckill.BuyRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seckill.BuyRequest(nil), f.reqs...)
}

type fakeSyncBuyer struct {
	calls atomic.Int64
	mu    sync.Mutex
	err   error
}

func (f *fakeSyncBuyer) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeSyncBuyer) Buy(_ context.Context, req seckill.BuyRequest) (orders.Order, bool, error) {
	f.calls.Add(1)
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return orders.Order{}, false, err
	}
	return orders.Order{ID: 777, VoucherID: req.VoucherID, UserID: req.UserID, Quantity: req.Quantity, Status: orders.StatusCreated}, false, nil
}

type fakeOrders struct {
	mu     sync.Mutex
	orders []orders.Order
	calls  atomic.Int64
}

func (f *fakeOrders) Get(_ context.Context, userID, orderID int64) (orders.Order, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range f.orders {
		if o.ID == orderID && o.UserID == userID {
			return o, nil
		}
	}
	return orders.Order{}, fmt.Errorf("order %d: %w", orderID, apperr.ErrNotFound)
}

func (f *fakeOrders) List(_ context.Context, userID int64) ([]orders.Order, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []orders.Order
	for _, o := range f.orders {
		if o.UserID == userID {
			out = append(out, o)
		}
	}
	return out, nil
}

// Page is List, newest first by id, seeking below p.Before.
func (f *fakeOrders) Page(ctx context.Context, userID int64, p orders.Page) ([]orders.Order, bool, error) {
	all, err := f.List(ctx, userID)
	if err != nil {
		return nil, false, err
	}
	slices.SortFunc(all, func(a, b orders.Order) int { return cmp.Compare(b.ID, a.ID) })
	var out []orders.Order
	for _, o := range all {
		if (p.Before == 0 || o.ID < p.Before) && (p.Status == "" || o.Status == p.Status) {
			out = append(out, o)
		}
	}
	if len(out) > p.Limit {
		return out[:p.Limit], true, nil
	}
	return out, false, nil
}

type fakeStats struct {
	calls atomic.Int64
	mu    sync.Mutex
	stats map[int64]orders.Stats
}

func (f *fakeStats) Stats(_ context.Context, id int64) (orders.Stats, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.stats[id]
	if !ok {
		return orders.Stats{}, fmt.Errorf("voucher %d: %w", id, apperr.ErrNotFound)
	}
	return st, nil
}

// memUsers is an in-test auth.UserStore, so the HTTP tests run the real
// auth.Accounts.
type memUsers struct {
	mu     sync.Mutex
	users  map[string]auth.User
	nextID int64
}

func (m *memUsers) CreateUser(_ context.Context, username, hash string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.users[username]; ok {
		return 0, fmt.Errorf("pgstore: duplicate key value violates unique constraint \"users_username_key\": %w", apperr.ErrUsernameTaken)
	}
	m.nextID++
	m.users[username] = auth.User{ID: m.nextID, Username: username, PasswordHash: hash}
	return m.nextID, nil
}

func (m *memUsers) UserByName(_ context.Context, username string) (auth.User, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.users[username]
	if !ok {
		return auth.User{}, apperr.ErrNotFound
	}
	return u, nil
}

type bundle struct {
	srv      *Server
	tokens   *auth.Tokens
	catalog  *fakeCatalog
	buyer    *fakeBuyer
	orders   *fakeOrders
	stats    *fakeStats
	users    *memUsers
	logs     *testlog.Buffer
	onSale   seckill.Voucher // a seckill voucher on sale
	shopper  string          // a token of user 42
	shopper2 string          // a token of user 43

	base   string
	client *http.Client
}

// testDeps are a test's dependencies: the gateway's, and the parts of the
// buy that setup builds into Deps.Buy once mutate has set them, as
// cmd/seckill builds it: the fake buyer sells seckill vouchers, and the
// catalog, orders and waiting room are the gateway's own.
type testDeps struct {
	Deps
	// Steps are the buy's steps; none by default.
	Steps pipe.Steps
	// SyncBuyer sells limit and common vouchers. Nil: the fake buyer sells
	// every kind.
	SyncBuyer pipe.OrderMaker
}

// pipeline builds the buy from d, with buyer for seckill vouchers.
func (d *testDeps) pipeline(buyer pipe.Reserver) (*pipe.Pipeline, error) {
	pd := pipe.Deps{Catalog: d.Catalog, Steps: d.Steps, Seckill: pipe.SeckillSeller{Buyer: buyer},
		Orders: d.Orders, Logger: d.Logger}
	if d.SyncBuyer != nil {
		pd.Sync = pipe.SyncSeller{Buyer: d.SyncBuyer}
	}
	// One room serves the queue routes and the buy's passes.
	if r, ok := d.Room.(pipe.Room); ok {
		pd.Room = r
	}
	return pipe.New(pd)
}

// setup builds a gateway over in-test dependencies; mutate may change the
// configuration and dependencies before New.
func setup(t testing.TB, mutate ...func(*Config, *testDeps)) *bundle {
	t.Helper()
	tokens, err := auth.NewTokens(testSecret, time.Hour)
	require.NoError(t, err)
	b := &bundle{
		tokens:  tokens,
		catalog: &fakeCatalog{vouchers: map[int64]seckill.Voucher{}},
		buyer:   &fakeBuyer{},
		orders:  &fakeOrders{},
		stats:   &fakeStats{stats: map[int64]orders.Stats{}},
		users:   &memUsers{users: map[string]auth.User{}},
		logs:    &testlog.Buffer{},
	}
	now := time.Now().UTC()
	b.onSale = b.catalog.put(seckill.Voucher{
		Title: "Half price", Kind: seckill.KindSeckill, PriceCents: 500, StockTotal: 100, StockLeft: 100,
		PerUserLimit: 1, BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour),
	})
	b.shopper, _, err = tokens.Issue(42)
	require.NoError(t, err)
	b.shopper2, _, err = tokens.Issue(43)
	require.NoError(t, err)

	// Registration takes a captcha only in the tests of the challenge.
	cfg := Config{AdminToken: testAdminToken, RegisterChallenge: RegisterNone}
	deps := testDeps{Deps: Deps{
		Catalog:  b.catalog,
		Orders:   b.orders,
		Stats:    b.stats,
		Accounts: auth.NewAccounts(b.users, tokens),
		Tokens:   tokens,
		Logger:   slog.New(slog.NewJSONHandler(b.logs, nil)),
	}}
	for _, m := range mutate {
		m(&cfg, &deps)
	}
	deps.Buy, err = deps.pipeline(b.buyer)
	require.NoError(t, err)
	b.srv, err = New(cfg, deps.Deps)
	require.NoError(t, err)
	b.listen(t)
	return b
}

// listen serves b.srv on a loopback port until the test ends. Tests go
// through a real listener rather than app.Test: fasthttp answers an
// oversized body and then reports an error that app.Test returns instead of
// the answer, and the real path is what clients get anyway.
func (b *bundle) listen(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- b.srv.Serve(ln) }()
	b.base = "http://" + ln.Addr().String()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	// The timeout only stops a hung test; it is no speed limit. Under the race
	// detector on a busy machine a registration (bcrypt) took over 10 s.
	b.client = &http.Client{Timeout: time.Minute, Transport: tr}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, b.srv.Shutdown(ctx))
		require.NoError(t, <-done)
	})
}

// do sends one request; headers are name, value pairs.
func (b *bundle) do(t testing.TB, method, path, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.base+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, raw
}

// declareBody sends only the head of a POST whose Content-Length is size and
// reads the answer. The server refuses a body over its limit from the head,
// without reading it, and closes the connection; a client still writing the
// body then may get a reset instead of the answer (more often on a busy
// machine), so the body is never sent. A server that waited for the body
// instead would fail the test at the read deadline.
func (b *bundle) declareBody(t testing.TB, path string, size int, auth string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, size)
	if auth != "" {
		head += "Authorization: " + auth + "\r\n"
	}
	_, err = io.WriteString(conn, head+"\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, raw
}

func bearerOf(token string) string { return "Bearer " + token }

// requireAPIError checks status, code and the exact shape of the API's error body.
func requireAPIError(t testing.TB, resp *http.Response, body []byte, status int, code string) string {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, "body: %s", body)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"), resp.Header.Get("Content-Type"))
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var e api.ErrorBody
	require.NoError(t, dec.Decode(&e), "error body must be exactly {error: {code, message}}: %s", body)
	require.Equal(t, code, e.Error.Code, "body: %s", body)
	require.NotEmpty(t, e.Error.Message)
	require.NotEmpty(t, resp.Header.Get(HeaderRequestID))
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		require.NotEmpty(t, resp.Header.Get("Retry-After"), "429 and 503 carry Retry-After")
	}
	return e.Error.Message
}

func decode[T any](t testing.TB, body []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(body, &v), "%s", body)
	return v
}
