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
	body  []byte // the voucher object
	etag  string // strong: a digest of body
	frame []byte // {"type":"voucher","voucher":<body>}, the socket's frame
}

// encodedCatalog is a catalog snapshot ready to write.
type encodedCatalog struct {
	snap     *seckill.CatalogSnapshot
	list     []byte // [<body>,...], newest first
	listETag string
	byID     map[int64]*encodedVoucher
	all      []*encodedVoucher // newest first
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
	e := &encodedCatalog{snap: snap, byID: make(map[int64]*encodedVoucher, len(vs)), all: make([]*encodedVoucher, 0, len(vs))}
	var list bytes.Buffer
	list.WriteByte('[')
	for i, v := range vs {
		ev, err := cc.encodeVoucher(prev, v)
		if err != nil {
			return nil, err
		}
		e.byID[v.ID] = ev
		e.all = append(e.all, ev)
		if i > 0 {
			list.WriteByte(',')
		}
		list.Write(ev.body)
	}
	list.WriteByte(']')
	e.list = list.Bytes()
	e.listETag = strongETag(e.list)
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
	body, err := json.Marshal(voucherJSON(v))
	if err != nil {
		return nil, fmt.Errorf("gateway: encode voucher %d: %w", v.ID, err)
	}
	frame := make([]byte, 0, len(body)+32)
	frame = append(frame, `{"type":"`+api.FrameVoucher+`","voucher":`...)
	frame = append(frame, body...)
	frame = append(frame, '}')
	return &encodedVoucher{v: v, body: body, etag: strongETag(body), frame: frame}, nil
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

func (s *Server) listVouchers(c *fiber.Ctx) error {
	e, err := s.catalog(c.UserContext())
	if err != nil {
		return err
	}
	return sendCatalog(c, e.list, e.listETag)
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
