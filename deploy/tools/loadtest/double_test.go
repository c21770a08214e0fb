package loadtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// fault is the bug a gateway double is built with.
type fault int

const (
	honest        fault = iota
	oversell            // accepts past the stock
	doubleOrder         // persists every accepted order twice
	ignoreLimit         // lets shoppers past the per-user limit
	forgetReplay        // treats a replayed Idempotency-Key as a new attempt
	frozenCatalog       // the public voucher read keeps the stock it was created with
)

// gateway is a test double of the system under test of the load tool: just
// enough of the HTTP contract (admin voucher create, buy, orders get/list, voucher get,
// admin stats, healthz), in memory, with one deliberate fault or none. It
// proves the checker catches what it claims; it stands in for nothing of the
// platform's own tests.
type gateway struct {
	secret, admin string
	fault         fault
	// skew is how far the double's clock is ahead of the real one; its Date
	// header and sale window both use it.
	skew time.Duration
	// persistAfter is how long a reservation stays "reserved".
	persistAfter time.Duration
	// createdLag is what the double stamps as created_at: the reservation's
	// time plus createdLag, whatever the real persist took. A figure no
	// machine's speed can blur, so a test can check that the tool measures
	// 202 → created from created_at.
	createdLag time.Duration
	// catalogLag is how far the public voucher read trails the live stock:
	// it shows stock_left as it was catalogLag ago, as the gateway's
	// catalog, refreshed from Redis every so often, does (the admin stats
	// read the live figure).
	catalogLag time.Duration
	// handler serves the double; another puts it on more addresses.
	handler http.Handler

	mu       sync.Mutex
	nextID   int64
	vouchers map[int64]*dVoucher
	orders   map[int64]*dOrder
	reqs     map[string]int64 // voucher/user/key -> order id
}

type dVoucher struct {
	id                        int64
	title, kind               string
	price, total, left, limit int64
	begin, end                time.Time
	held                      map[int64]int64 // user -> units reserved or bought
	// history is every change of left, oldest first (catalogLag).
	history []leftAt
}

// leftAt is stock_left from a moment on.
type leftAt struct {
	at   time.Time
	left int64
}

// take sells q units of v.
func (v *dVoucher) take(q int64) {
	v.left -= q
	v.history = append(v.history, leftAt{time.Now(), v.left})
}

// shownLeft is stock_left as the public voucher read shows it at now: the
// figure of catalogLag ago, or the stock at creation under frozenCatalog.
func (g *gateway) shownLeft(v *dVoucher, now time.Time) int64 {
	if g.fault == frozenCatalog {
		return v.total
	}
	left := v.total
	for _, h := range v.history {
		if h.at.After(now.Add(-g.catalogLag)) {
			break
		}
		left = h.left
	}
	return left
}

type dOrder struct {
	id, voucher, user, qty, amount int64
	status                         string
	created, deadline              time.Time
}

func newGateway(t *testing.T, f fault, skew time.Duration) (*gateway, *httptest.Server) {
	t.Helper()
	g := &gateway{
		secret: "test-secret-" + t.Name(), admin: "test-admin-" + t.Name(),
		fault: f, skew: skew, persistAfter: 30 * time.Millisecond, createdLag: time.Hour,
		nextID: 1000, vouchers: map[int64]*dVoucher{}, orders: map[int64]*dOrder{}, reqs: map[string]int64{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("POST /api/v1/admin/vouchers", g.createVoucher)
	mux.HandleFunc("GET /api/v1/vouchers/{id}", g.getVoucher)
	mux.HandleFunc("GET /api/v1/admin/vouchers/{id}/stats", g.stats)
	mux.HandleFunc("POST /api/v1/vouchers/{id}/orders", g.buy)
	mux.HandleFunc("GET /api/v1/orders/{id}", g.getOrder)
	mux.HandleFunc("GET /api/v1/orders", g.listOrders)
	g.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", g.now().UTC().Format(http.TimeFormat))
		mux.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(g.handler)
	t.Cleanup(srv.Close)
	return g, srv
}

// another serves g's one state on another address, as a second gateway of
// one fleet, and counts the requests it got.
func (g *gateway) another(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		g.handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func (g *gateway) now() time.Time { return time.Now().Add(g.skew) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": code}})
}

func (g *gateway) isAdmin(r *http.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+g.admin
}

// user verifies a shopper token as gateway/openapi.yaml says: HS256 only, exp required.
func (g *gateway) user(r *http.Request) (int64, bool) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return 0, false
	}
	tok, err := jwt.ParseWithClaims(raw, &jwt.RegisteredClaims{}, func(*jwt.Token) (any, error) { return []byte(g.secret), nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
	if err != nil {
		return 0, false
	}
	id, err := strconv.ParseInt(tok.Claims.(*jwt.RegisteredClaims).Subject, 10, 64)
	return id, err == nil && id > 0
}

func (v *dVoucher) json() map[string]any {
	return map[string]any{
		"id": strconv.FormatInt(v.id, 10), "title": v.title, "kind": v.kind, "price_cents": v.price,
		"stock_total": v.total, "stock_left": v.left, "per_user_limit": v.limit,
		"begin_at": v.begin, "end_at": v.end, "captcha_required": false,
	}
}

func (o *dOrder) json() map[string]any {
	m := map[string]any{
		"order_id": strconv.FormatInt(o.id, 10), "voucher_id": strconv.FormatInt(o.voucher, 10),
		"user_id": strconv.FormatInt(o.user, 10), "quantity": o.qty, "amount_cents": o.amount,
		"status": o.status, "created_at": o.created, "pay_deadline": nil,
	}
	if !o.deadline.IsZero() {
		m["pay_deadline"] = o.deadline
	}
	return m
}

func pathID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id, err == nil
}

func (g *gateway) createVoucher(w http.ResponseWriter, r *http.Request) {
	if !g.isAdmin(r) {
		writeErr(w, http.StatusUnauthorized, "unauthenticated")
		return
	}
	var in struct {
		Title        string    `json:"title"`
		Kind         string    `json:"kind"`
		PriceCents   int64     `json:"price_cents"`
		Stock        int64     `json:"stock"`
		PerUserLimit int64     `json:"per_user_limit"`
		BeginAt      time.Time `json:"begin_at"`
		EndAt        time.Time `json:"end_at"`
		Captcha      bool      `json:"captcha_required"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || in.Stock < 1 || in.PerUserLimit < 1 || !in.EndAt.After(in.BeginAt) {
		writeErr(w, http.StatusBadRequest, "invalid_input")
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextID++
	v := &dVoucher{id: g.nextID, title: in.Title, kind: in.Kind, price: in.PriceCents, total: in.Stock, left: in.Stock,
		limit: in.PerUserLimit, begin: in.BeginAt, end: in.EndAt, held: map[int64]int64{}}
	g.vouchers[v.id] = v
	writeJSON(w, http.StatusCreated, v.json())
}

func (g *gateway) getVoucher(w http.ResponseWriter, r *http.Request) {
	id, _ := pathID(r)
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vouchers[id]
	if !ok {
		writeErr(w, http.StatusNotFound, "not_found")
		return
	}
	out := v.json()
	out["stock_left"] = g.shownLeft(v, time.Now())
	writeJSON(w, http.StatusOK, out)
}

func (g *gateway) stats(w http.ResponseWriter, r *http.Request) {
	if !g.isAdmin(r) {
		writeErr(w, http.StatusUnauthorized, "unauthenticated")
		return
	}
	id, _ := pathID(r)
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vouchers[id]
	if !ok {
		writeErr(w, http.StatusNotFound, "not_found")
		return
	}
	count := map[string]int64{}
	for _, o := range g.orders {
		if o.voucher == id {
			count[o.status]++
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"voucher_id": strconv.FormatInt(id, 10), "stock_total": v.total, "stock_left": v.left,
		"reserved": count["reserved"], "created": count["created"], "paid": count["paid"],
		"cancelled": count["cancelled"], "failed": count["failed"],
	})
}

func (g *gateway) buy(w http.ResponseWriter, r *http.Request) {
	user, ok := g.user(r)
	if !ok {
		writeErr(w, http.StatusUnauthorized, "unauthenticated")
		return
	}
	id, _ := pathID(r)
	in := struct {
		Quantity int64 `json:"quantity"`
	}{Quantity: 1}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Quantity < 1 || in.Quantity > 100 {
		writeErr(w, http.StatusBadRequest, "invalid_input")
		return
	}
	key := r.Header.Get("Idempotency-Key")
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vouchers[id]
	switch now := g.now(); {
	case !ok:
		writeErr(w, http.StatusNotFound, "not_found")
		return
	case now.Before(v.begin):
		writeErr(w, http.StatusConflict, "not_started")
		return
	case !now.Before(v.end):
		writeErr(w, http.StatusConflict, "ended")
		return
	}
	reqKey := fmt.Sprintf("%d/%d/%s", id, user, key)
	if prev, ok := g.reqs[reqKey]; ok && key != "" && g.fault != forgetReplay {
		writeJSON(w, http.StatusAccepted, map[string]string{"order_id": strconv.FormatInt(prev, 10), "status": "reserved"})
		return
	}
	if in.Quantity > v.left && g.fault != oversell {
		writeErr(w, http.StatusConflict, "sold_out")
		return
	}
	if v.held[user]+in.Quantity > v.limit && g.fault != ignoreLimit {
		writeErr(w, http.StatusConflict, "limit_exceeded")
		return
	}
	g.nextID++
	o := &dOrder{id: g.nextID, voucher: id, user: user, qty: in.Quantity, amount: in.Quantity * v.price, status: "reserved", created: g.now()}
	g.orders[o.id] = o
	v.take(in.Quantity)
	v.held[user] += in.Quantity
	if key != "" {
		g.reqs[reqKey] = o.id
	}
	reservedAt := o.created
	time.AfterFunc(g.persistAfter, func() { g.persist(o.id, reservedAt.Add(g.createdLag)) })
	writeJSON(w, http.StatusAccepted, map[string]string{"order_id": strconv.FormatInt(o.id, 10), "status": "reserved"})
}

// persist is the double's worker: reserved becomes created, stamped at.
func (g *gateway) persist(id int64, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	o := g.orders[id]
	o.status, o.created = "created", at
	o.deadline = o.created.Add(15 * time.Minute)
	if g.fault == doubleOrder {
		// The classic consumer bug: a redelivered message inserted again
		// under a new id, stock taken twice.
		g.nextID++
		dup := *o
		dup.id = g.nextID
		g.orders[dup.id] = &dup
		v := g.vouchers[o.voucher]
		v.take(o.qty)
		v.held[o.user] += o.qty
	}
}

func (g *gateway) getOrder(w http.ResponseWriter, r *http.Request) {
	user, ok := g.user(r)
	if !ok {
		writeErr(w, http.StatusUnauthorized, "unauthenticated")
		return
	}
	id, _ := pathID(r)
	g.mu.Lock()
	defer g.mu.Unlock()
	o, ok := g.orders[id]
	if !ok || o.user != user {
		writeErr(w, http.StatusNotFound, "not_found")
		return
	}
	writeJSON(w, http.StatusOK, o.json())
}

func (g *gateway) listOrders(w http.ResponseWriter, r *http.Request) {
	user, ok := g.user(r)
	if !ok {
		writeErr(w, http.StatusUnauthorized, "unauthenticated")
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var mine []*dOrder
	for _, o := range g.orders {
		if o.user == user {
			mine = append(mine, o)
		}
	}
	slices.SortFunc(mine, func(a, b *dOrder) int { return int(b.id - a.id) })
	out := make([]map[string]any, 0, len(mine))
	for _, o := range mine {
		out = append(out, o.json())
	}
	writeJSON(w, http.StatusOK, out)
}
