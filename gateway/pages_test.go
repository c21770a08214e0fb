package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
)

var nextLink = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

// walkPages follows the Link headers from path and returns every page.
func walkPages[T any](t *testing.T, b *bundle, path string, headers ...string) [][]T {
	t.Helper()
	var pages [][]T
	for path != "" {
		require.Less(t, len(pages), 50, "the pages end")
		resp, body := b.do(t, "GET", path, "", headers...)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		var page []T
		require.NoError(t, json.Unmarshal(body, &page), "%s", body)
		pages = append(pages, page)
		path = ""
		if link := resp.Header.Get("Link"); link != "" {
			m := nextLink.FindStringSubmatch(link)
			require.NotNil(t, m, "Link %q", link)
			path = m[1]
		}
	}
	return pages
}

func TestOrdersInPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
	b.orders.mu.Lock()
	for i := range 7 {
		st := orders.StatusCreated
		if i%2 == 0 {
			st = orders.StatusPaid
		}
		b.orders.orders = append(b.orders.orders, orders.Order{ID: int64(100 + i), VoucherID: 1, UserID: 42,
			Quantity: 1, AmountCents: 500, Status: st, CreatedAt: base.Add(time.Duration(i) * time.Second), PayDeadline: base.Add(time.Hour)})
	}
	b.orders.orders = append(b.orders.orders, orders.Order{ID: 150, VoucherID: 1, UserID: 43, Quantity: 1, Status: orders.StatusPaid, CreatedAt: base})
	b.orders.mu.Unlock()
	me := []string{"Authorization", bearerOf(b.shopper)}

	ids := func(pages [][]api.Order) (sizes []int, all []string) {
		for _, p := range pages {
			sizes = append(sizes, len(p))
			for _, o := range p {
				all = append(all, o.OrderID)
			}
		}
		return sizes, all
	}
	sizes, all := ids(walkPages[api.Order](t, b, "/api/v1/orders?limit=3", me...))
	require.Equal(t, []int{3, 3, 1}, sizes)
	require.Equal(t, []string{"106", "105", "104", "103", "102", "101", "100"}, all, "newest first, each once, only mine")

	sizes, all = ids(walkPages[api.Order](t, b, "/api/v1/orders?status=paid&limit=2", me...))
	require.Equal(t, []int{2, 2}, sizes)
	require.Equal(t, []string{"106", "104", "102", "100"}, all, "the filter travels with the cursor")

	sizes, _ = ids(walkPages[api.Order](t, b, "/api/v1/orders", me...))
	require.Equal(t, []int{7}, sizes, "one page under the default limit, no Link")

	// Every bad parameter is named at once.
	resp, body := b.do(t, "GET", "/api/v1/orders?limit=0&cursor=nope&status=lost", "", me...)
	requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
	require.Equal(t, []string{"limit", "cursor", "status"}, errorFields(t, body))
	// A vouchers' cursor is not an orders' one.
	resp, body = b.do(t, "GET", "/api/v1/orders?cursor="+encodeCursor(cursorVouchers, 105), "", me...)
	requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
	require.Equal(t, []string{"cursor"}, errorFields(t, body))
	for _, bad := range []string{"limit=101", "limit=x", "limit=", "cursor=", "cursor=" + encodeCursor(cursorOrders, 0)} {
		resp, body := b.do(t, "GET", "/api/v1/orders?"+bad, "", me...)
		requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
		require.Len(t, errorFields(t, body), 1, bad)
	}
}

func TestVouchersInPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 4 {
		v := seckill.Voucher{Title: fmt.Sprint("v", i), Kind: seckill.KindSeckill, StockTotal: 5, PerUserLimit: 1}
		if i%2 == 1 {
			v.BeginAt, v.EndAt = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
		}
		b.catalog.put(v)
	}
	resp, body := b.do(t, "GET", "/api/v1/vouchers", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var whole []api.Voucher
	require.NoError(t, json.Unmarshal(body, &whole))
	require.GreaterOrEqual(t, len(whole), 5, "the fixture has vouchers to page")
	require.Empty(t, resp.Header.Get("Link"), "one page")

	var all []api.Voucher
	pages := walkPages[api.Voucher](t, b, "/api/v1/vouchers?limit=1")
	for _, p := range pages {
		require.Len(t, p, 1)
		all = append(all, p...)
	}
	require.Equal(t, whole, all, "the pages are the list, in order")
	resp, _ = b.do(t, "GET", "/api/v1/vouchers?limit=1", "")
	require.NotEmpty(t, resp.Header.Get("Link"))
	resp, _ = b.do(t, "GET", "/api/v1/vouchers?limit=1", "", "If-None-Match", resp.Header.Get("ETag"))
	require.Equal(t, http.StatusNotModified, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Link"), "a 304 carries what NotModified declares")

	byState := map[string]int{}
	for _, v := range whole {
		byState[v.State]++
	}
	for st, n := range byState {
		var got []api.Voucher
		for _, p := range walkPages[api.Voucher](t, b, fmt.Sprintf("/api/v1/vouchers?state=%s&limit=1", st)) {
			got = append(got, p...)
		}
		require.Len(t, got, n, st)
		for _, v := range got {
			require.Equal(t, st, v.State)
		}
	}
	resp, body = b.do(t, "GET", "/api/v1/vouchers?limit=500&cursor=%%%&state=gone", "")
	requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
	require.Equal(t, []string{"limit", "cursor", "state"}, errorFields(t, body))
}

// errorFields is the field of each entry of an error's fields.
func errorFields(t *testing.T, body []byte) []string {
	t.Helper()
	var e api.ErrorBody
	require.NoError(t, json.Unmarshal(body, &e), "%s", body)
	var out []string
	for _, f := range e.Error.Fields {
		require.NotEmpty(t, f.Reason)
		out = append(out, f.Field)
	}
	return out
}

// A page of the catalog is built once per snapshot, whoever asks for it,
// up to maxCachedPages pages; past that each is still right, only built
// per request.
func TestVoucherPagesBuiltOncePerSnapshot(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var vs []seckill.Voucher
	for i := 300; i > 0; i-- {
		vs = append(vs, seckill.Voucher{ID: int64(i), Title: fmt.Sprint("v", i), Kind: seckill.KindSeckill,
			StockTotal: 1, StockLeft: 1, PerUserLimit: 1, BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour)})
	}
	var cc catalogCache
	e, err := cc.encoded(seckill.NewCatalogSnapshot(vs, now))
	require.NoError(t, err)
	require.Equal(t, int64(300), cc.encodings.Load(), "each voucher encoded once")
	require.Equal(t, int64(251), e.first.last, "the plain page ends at the 50th voucher, more follow")

	k := pageKey{from: e.after(251), limit: 7}
	a, b := e.cachedPage(k), e.cachedPage(k)
	require.Same(t, &a.body[0], &b.body[0], "the same bytes, built once")
	var page []api.Voucher
	require.NoError(t, json.Unmarshal(a.body, &page))
	require.Len(t, page, 7)
	require.Equal(t, "250", page[0].ID)
	require.Equal(t, int64(244), a.last)

	for from := range maxCachedPages + 10 {
		p := e.cachedPage(pageKey{from: from, limit: 1})
		require.NoError(t, json.Unmarshal(p.body, &page))
		require.Equal(t, fmt.Sprint(300-from), page[0].ID, "past the cache's room pages are still right")
	}
	require.Equal(t, int64(300), cc.encodings.Load(), "pages join the encodings, never encode again")
}
