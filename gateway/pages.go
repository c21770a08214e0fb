package gateway

// Lists in pages (gateway/openapi.yaml, "Lists"): GET /api/v1/vouchers and
// GET /api/v1/orders take limit and cursor, answer a JSON array, and name
// the next page in a Link header (RFC 8288), absent on the last page.

import (
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill/apperr"
)

// Page sizes of the lists.
const (
	defaultPageLimit = 50
	maxPageLimit     = 100
)

// Cursor kinds: a cursor of one list is refused by the other.
const (
	cursorOrders   = "o"
	cursorVouchers = "v"
)

// pageQuery is what a list request asks for.
type pageQuery struct {
	limit int
	// after is the id of the last item of the page before; 0 starts at
	// the first page.
	after int64
}

// parsePage reads limit and cursor into f (every bad one named). A cursor
// is opaque to clients: base64url of "<kind>:<id of the last item>".
func parsePage(c *fiber.Ctx, kind string, f *apperr.Fields) pageQuery {
	q := pageQuery{limit: defaultPageLimit}
	args := c.Request().URI().QueryArgs()
	if args.Has("limit") {
		n, err := strconv.Atoi(string(args.Peek("limit")))
		if err != nil || n < 1 || n > maxPageLimit {
			f.Addf("limit", "limit must be a whole number from 1 to %d", maxPageLimit)
		} else {
			q.limit = n
		}
	}
	if args.Has("cursor") {
		id, ok := decodeCursor(string(args.Peek("cursor")), kind)
		if !ok {
			f.Addf("cursor", "cursor must be the one a Link header of this list gave")
		}
		q.after = id
	}
	return q
}

func encodeCursor(kind string, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + strconv.FormatInt(id, 10)))
}

func decodeCursor(raw, kind string) (int64, bool) {
	if raw == "" || len(raw) > 64 {
		return 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return 0, false
	}
	k, num, ok := strings.Cut(string(b), ":")
	if !ok || k != kind {
		return 0, false
	}
	id, err := parseID(num, "cursor", "cursor")
	return id, err == nil
}

// setNextLink names the next page: this request's path and query with the
// cursor after lastID. A relative reference, resolved against the request's
// own address, so it holds behind any proxy or CDN.
func setNextLink(c *fiber.Ctx, kind string, lastID int64) {
	v := url.Values{}
	for k, val := range c.Request().URI().QueryArgs().All() {
		if key := string(k); key != "cursor" {
			v.Add(key, string(val))
		}
	}
	v.Set("cursor", encodeCursor(kind, lastID))
	c.Set(fiber.HeaderLink, "<"+c.Path()+"?"+v.Encode()+`>; rel="next"`)
}
