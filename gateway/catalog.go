package gateway

// The catalog routes. They read the catalog from memory (Catalog.Snapshot:
// no database query per request), as the buy's catalog step does; the
// routes answer with JSON encoded once per change of a voucher, shared by
// every request and every socket until the next change.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// CatalogCacheControl is the Cache-Control of the catalog's answers. A shop
// page needs the catalog about a second fresh: the buy itself is judged by
// the reservation, and an open page gets every change of stock and state
// pushed over the socket anyway. So a CDN (or the browser) may keep an
// answer one second, and serve it two more while it asks the origin again
// in the background: a crowd of a hundred thousand pages costs the origin
// about one request a second per CDN node, not one per page.
const CatalogCacheControl = "public, max-age=1, stale-while-revalidate=2"

// encodedVoucher is one voucher's JSON, encoded once per change.
type encodedVoucher struct {
	v     seckill.Voucher
	body  []byte        // the voucher object
	state seckill.State // the state body shows
	etag  string        // strong: a digest of body
	frame []byte        // {"type":"voucher","voucher":<body>}, the socket's frame
}

// encodedCatalog is a catalog snapshot ready to write.
type encodedCatalog struct {
	snap     *seckill.CatalogSnapshot
	list     []byte // [<body>,...], newest first
	listETag string
	byID     map[int64]*encodedVoucher
	all      []*encodedVoucher // newest first
	pos      map[int64]int     // a voucher's place in all, for a page's cursor
	// first is the answer to the plain GET /api/v1/vouchers, the first
	// page at the default limit: built once per snapshot.
	first page
	// pages keeps other pages built from this snapshot (pageKey to
	// *page), at most maxCachedPages of them: a crowd of apps asking the
	// same page costs one build per change of the catalog.
	pages  sync.Map
	npages atomic.Int32
}

// maxCachedPages bounds the pages one snapshot keeps; past it a page is
// built per request (still from memory, without encoding).
const maxCachedPages = 256

// pageKey names a page of one snapshot.
type pageKey struct {
	from, limit int
	state       seckill.State
}

// cachedPage returns the page of k, built once while the cache has room.
func (e *encodedCatalog) cachedPage(k pageKey) page {
	if p, ok := e.pages.Load(k); ok {
		return *p.(*page)
	}
	var keep func(*encodedVoucher) bool
	if k.state != "" {
		keep = func(ev *encodedVoucher) bool { return ev.state == k.state }
	}
	p := e.page(k.from, k.limit, keep)
	if e.npages.Add(1) <= maxCachedPages {
		if old, loaded := e.pages.LoadOrStore(k, &p); loaded {
			return *old.(*page)
		}
	}
	return p
}

// page is one page of the list, encoded.
type page struct {
	body []byte
	etag string
	// last is the id of the page's last voucher when more follow, else 0.
	last int64
}

// page builds the page of at most limit vouchers after position from of
// those keep lets through (every one when keep is nil): the vouchers' JSON
// joined, never encoded again.
func (e *encodedCatalog) page(from, limit int, keep func(*encodedVoucher) bool) page {
	var p page
	var buf bytes.Buffer
	buf.WriteByte('[')
	n, last := 0, int64(0)
	for _, ev := range e.all[min(from, len(e.all)):] {
		if keep != nil && !keep(ev) {
			continue
		}
		if n == limit {
			p.last = last
			break
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(ev.body)
		last = ev.v.ID
		n++
	}
	buf.WriteByte(']')
	p.body = buf.Bytes()
	p.etag = strongETag(p.body)
	return p
}

// catalogCache encodes each snapshot of the catalog once, and within it each
// voucher only when it differs from the previous snapshot's: a sell-out of
// one voucher costs one encoding, however many requests and sockets read it.
type catalogCache struct {
	mu        sync.Mutex
	cur       atomic.Pointer[encodedCatalog]
	encodings atomic.Int64 // vouchers encoded to JSON, ever
}

// encoded returns snap ready to write. Concurrent callers with a new
// snapshot encode it once between them.
func (cc *catalogCache) encoded(snap *seckill.CatalogSnapshot) (*encodedCatalog, error) {
	if e := cc.cur.Load(); e != nil && e.snap == snap {
		return e, nil
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	prev := cc.cur.Load()
	if prev != nil && (prev.snap == snap || prev.snap.Version() > snap.Version()) {
		return prev, nil
	}
	vs := snap.Vouchers()
	e := &encodedCatalog{snap: snap, byID: make(map[int64]*encodedVoucher, len(vs)), all: make([]*encodedVoucher, 0, len(vs)),
		pos: make(map[int64]int, len(vs))}
	var list bytes.Buffer
	list.WriteByte('[')
	for i, v := range vs {
		ev, err := cc.encodeVoucher(prev, v)
		if err != nil {
			return nil, err
		}
		e.byID[v.ID] = ev
		e.pos[v.ID] = len(e.all)
		e.all = append(e.all, ev)
		if i > 0 {
			list.WriteByte(',')
		}
		list.Write(ev.body)
	}
	list.WriteByte(']')
	e.list = list.Bytes()
	e.listETag = strongETag(e.list)
	if len(e.all) <= defaultPageLimit {
		e.first = page{body: e.list, etag: e.listETag}
	} else {
		e.first = e.page(0, defaultPageLimit, nil)
	}
	cc.cur.Store(e)
	return e, nil
}

// encodeVoucher reuses prev's encoding of v when v has not changed.
func (cc *catalogCache) encodeVoucher(prev *encodedCatalog, v seckill.Voucher) (*encodedVoucher, error) {
	if prev != nil {
		if old, ok := prev.byID[v.ID]; ok && old.v.Same(v) {
			return old, nil
		}
	}
	cc.encodings.Add(1)
	out := voucherJSON(v)
	body, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("gateway: encode voucher %d: %w", v.ID, err)
	}
	frame := make([]byte, 0, len(body)+32)
	frame = append(frame, `{"type":"`+api.FrameVoucher+`","voucher":`...)
	frame = append(frame, body...)
	frame = append(frame, '}')
	return &encodedVoucher{v: v, body: body, state: seckill.State(out.State), etag: strongETag(body), frame: frame}, nil
}

// strongETag is a quoted digest of body: equal bodies, equal tags, on every
// instance of the fleet (so a CDN's revalidation hits whichever answers).
func strongETag(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
}

// registerCatalogMetrics exposes what a crowd costs the catalog: vouchers
// encoded (one per change of one voucher, whatever the readers) and voucher
// changes broadcast to sockets (one per push, whatever the sockets).
func (s *Server) registerCatalogMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	return errors.Join(
		reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "seckill_catalog_encodings_total",
			Help: "Vouchers encoded to JSON by the catalog routes and the socket feed: one per change of one voucher, however many requests and sockets read it.",
		}, func() float64 { return float64(s.catalogCache.encodings.Load()) })),
		reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "seckill_ws_voucher_broadcasts_total",
			Help: "Voucher changes handed to every open socket (the same bytes to each): one per push, however many sockets.",
		}, func() float64 {
			if s.ws == nil {
				return 0
			}
			return float64(s.ws.feed.pushes.Load())
		})),
	)
}

// catalog returns the catalog, encoded.
func (s *Server) catalog(ctx context.Context) (*encodedCatalog, error) {
	snap, err := s.deps.Catalog.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return s.catalogCache.encoded(snap)
}

// sendCatalog writes a pre-encoded catalog answer, or 304 when the client
// (or the CDN in front) already has it.
func sendCatalog(c *fiber.Ctx, body []byte, etag string) error {
	c.Set(fiber.HeaderCacheControl, CatalogCacheControl)
	c.Set(fiber.HeaderETag, etag)
	if etagMatches(c.Get(fiber.HeaderIfNoneMatch), etag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

// etagMatches is If-None-Match's weak comparison: any listed tag, with or
// without W/, or "*".
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// voucherStates are the values of GET /api/v1/vouchers?state=, those of
// the voucher's state in gateway/openapi.yaml.
var voucherStates = [...]seckill.State{seckill.StateScheduled, seckill.StateOnSale,
	seckill.StatePaused, seckill.StateSoldOut, seckill.StateEnded}

// listVouchers is GET /api/v1/vouchers: a page of the catalog, newest
// first, from memory like every catalog read. The plain request's page is
// built once per change of the catalog, and so are others (up to
// maxCachedPages of them), by joining the vouchers' JSON, encoded once per
// change of each.
func (s *Server) listVouchers(c *fiber.Ctx) error {
	args := c.Request().URI().QueryArgs()
	var f apperr.Fields
	q := parsePage(c, cursorVouchers, &f)
	var state seckill.State
	if args.Has("state") {
		state = seckill.State(args.Peek("state"))
		if !slices.Contains(voucherStates[:], state) {
			f.Addf("state", "state must be one of scheduled, on_sale, paused, sold_out and ended")
		}
	}
	if err := f.Err(); err != nil {
		return err
	}
	e, err := s.catalog(c.UserContext())
	if err != nil {
		return err
	}
	p := e.first
	if q.after != 0 || q.limit != defaultPageLimit || state != "" {
		p = e.cachedPage(pageKey{from: e.after(q.after), limit: q.limit, state: state})
	}
	// A 304 says the client's copy, Link included, is current: it carries
	// only what NotModified declares.
	if p.last != 0 && !etagMatches(c.Get(fiber.HeaderIfNoneMatch), p.etag) {
		setNextLink(c, cursorVouchers, p.last)
	}
	return sendCatalog(c, p.body, p.etag)
}

// after is the place in the list after voucher id: the next one, or, for
// a voucher this snapshot lacks (made a moment ago on another instance),
// the first with a smaller id (ids grow with time, as the list's order).
func (e *encodedCatalog) after(id int64) int {
	if id == 0 {
		return 0
	}
	if i, ok := e.pos[id]; ok {
		return i + 1
	}
	for i, ev := range e.all {
		if ev.v.ID < id {
			return i
		}
	}
	return len(e.all)
}

func (s *Server) getVoucher(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "id", "the voucher id")
	if err != nil {
		return err
	}
	e, err := s.catalog(c.UserContext())
	if err != nil {
		return err
	}
	if ev, ok := e.byID[id]; ok {
		return sendCatalog(c, ev.body, ev.etag)
	}
	// Not in memory: maybe created a moment ago on another instance. The
	// lookup is shared and negative-cached by the catalog.
	if _, err := s.deps.Catalog.Voucher(c.UserContext(), id); err != nil {
		return err
	}
	if e, err = s.catalog(c.UserContext()); err != nil {
		return err
	}
	ev, ok := e.byID[id]
	if !ok {
		return fmt.Errorf("voucher %d: %w", id, apperr.ErrNotFound)
	}
	return sendCatalog(c, ev.body, ev.etag)
}
