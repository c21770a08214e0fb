package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// A real client sending a body far over the limit (net/http writes the
// whole body while the server has already answered) gets the 413 every
// time, not a connection reset that discards it; the answer carries the
// headers of every API answer, and it is in the access log and the
// request counter like any other.
func TestOversizedBodyIsAnsweredLoggedAndCounted(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := setup(t, func(_ *Config, d *testDeps) { d.Registerer = reg })
	body := bytes.Repeat([]byte("x"), 200<<10)
	const sends = 50
	for i := range sends {
		path := "/api/v1/users"
		if i%2 == 1 {
			path = fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID)
		}
		req, err := http.NewRequest(http.MethodPost, b.base+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", bearerOf(b.shopper))
		req.Header.Set(HeaderRequestID, "big-"+strconv.Itoa(i))
		resp, err := b.client.Do(req)
		require.NoError(t, err, "send %d: the answer must reach the client", i)
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		requireAPIError(t, resp, raw, http.StatusRequestEntityTooLarge, "too_large")
		require.Equal(t, "no-store", resp.Header.Get("Cache-Control"), "send %d", i)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), "send %d", i)
		require.NotEmpty(t, resp.Header.Get(HeaderServerTime), "send %d", i)
		require.Equal(t, "big-"+strconv.Itoa(i), resp.Header.Get(HeaderRequestID), "send %d", i)
	}

	logged := 0
	for _, l := range b.logs.JSONLines(t) {
		if l["msg"] == "http request" && l["status"] == float64(http.StatusRequestEntityTooLarge) {
			logged++
			require.Contains(t, fmt.Sprint(l["request_id"]), "big-")
			require.Equal(t, "POST", l["method"])
		}
	}
	require.Equal(t, sends, logged, "every 413 is in the access log")

	mfs, err := reg.Gather()
	require.NoError(t, err)
	counted := 0.0
	for _, mf := range mfs {
		if mf.GetName() != metricHTTPRequests {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "status" && lp.GetValue() == "413" {
					counted += m.GetCounter().GetValue()
					for _, l := range m.GetLabel() {
						if l.GetName() == "route" {
							require.Equal(t, routeUnrouted, l.GetValue(), "no label value per path")
						}
					}
				}
			}
		}
	}
	require.EqualValues(t, sends, counted, "every 413 is counted")
}

// A request fasthttp refuses while reading its head (here a Content-Length
// that is no number) is
// refused before the router, and its answer is an API answer like any
// other: the error body, the headers every client reads (X-Server-Time
// among them), the access log and the counter. The request is small and
// whole, so the server reads all of it before it closes the connection and
// the answer reaches the client on any machine.
func TestOversizedHeadIsAnsweredLikeAnyOther(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := setup(t, func(_ *Config, d *testDeps) { d.Registerer = reg })
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = io.WriteString(conn, "GET /api/v1/vouchers HTTP/1.1\r\nHost: shop.example\r\nContent-Length: many\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.GreaterOrEqual(t, resp.StatusCode, 400, "%s", raw)
	require.Less(t, resp.StatusCode, 500, "the client's mistake is never a 5xx: %s", raw)
	var e struct {
		Error struct{ Code, Message string }
	}
	require.NoError(t, json.Unmarshal(raw, &e), "%s", raw)
	require.NotEmpty(t, e.Error.Code)
	require.NotEmpty(t, e.Error.Message)
	require.NotEmpty(t, resp.Header.Get(HeaderServerTime))
	require.NotEmpty(t, resp.Header.Get(HeaderRequestID))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))

	logged := false
	for _, l := range b.logs.JSONLines(t) {
		if l["msg"] == "http request" && l["status"] == float64(resp.StatusCode) && l["route"] == routeUnrouted {
			logged = true
		}
	}
	require.True(t, logged, "the refusal is in the access log")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	counted := 0.0
	for _, mf := range mfs {
		if mf.GetName() != metricHTTPRequests {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "route" && lp.GetValue() == routeUnrouted {
					counted += m.GetCounter().GetValue()
				}
			}
		}
	}
	require.EqualValues(t, 1, counted, "the refusal is counted")
}

// A URL over the head's limit, sent by a real client that writes the whole
// head before it reads (net/http does), gets its 413 every time, with the
// headers of every API answer and a message that names the URL and headers,
// not a body: the server reads away the rest of the head before it closes,
// so no connection reset discards the answer.
func TestOversizedURLIsAnsweredEveryTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i, size := range []int{headLimit, 2 * headLimit, 64 << 10} {
		for try := range 10 {
			url := b.base + "/api/v1/vouchers?state=" + strings.Repeat("x", size)
			req, err := http.NewRequest(http.MethodGet, url, nil)
			require.NoError(t, err)
			req.Header.Set("Accept-Language", "en")
			resp, err := b.client.Do(req)
			require.NoError(t, err, "size %d, try %d: the answer must reach the client", size, try)
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			msg := requireAPIError(t, resp, raw, http.StatusRequestEntityTooLarge, "too_large")
			require.Equal(t, fmt.Sprintf("the request's URL and headers are over the limit of %d bytes", headLimit), msg)
			require.NotEmpty(t, resp.Header.Get(HeaderServerTime), "size %d, try %d", size, try)
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), "case %d", i)
		}
	}
}
