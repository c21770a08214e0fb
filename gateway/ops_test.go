package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func TestRequestIDAndAccessLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, _ := b.do(t, "GET", "/api/v1/orders", "", "Authorization", bearerOf(b.shopper), HeaderRequestID, "edge-7f3a:1")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "edge-7f3a:1", resp.Header.Get(HeaderRequestID), "a plain client id is kept")
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))

	resp, _ = b.do(t, "GET", "/healthz", "", HeaderRequestID, "bad id with spaces")
	generated := resp.Header.Get(HeaderRequestID)
	require.Regexp(t, `^[0-9a-f]{32}$`, generated, "a client id that is not plain is replaced")
	resp, _ = b.do(t, "GET", "/healthz", "")
	require.Regexp(t, `^[0-9a-f]{32}$`, resp.Header.Get(HeaderRequestID))
	require.NotEqual(t, generated, resp.Header.Get(HeaderRequestID))

	var found map[string]any
	for _, l := range b.logs.JSONLines(t) {
		if l["msg"] == "http request" && l["request_id"] == "edge-7f3a:1" {
			found = l
		}
	}
	require.NotNil(t, found, b.logs.String())
	require.Equal(t, "GET", found["method"])
	require.Equal(t, "/api/v1/orders", found["route"])
	require.EqualValues(t, 200, found["status"])
	require.EqualValues(t, 42, found["user_id"])
	require.Contains(t, found, "duration")
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	var redisDown, kafkaSlow atomic.Bool
	b := setup(t, func(c *Config, d *testDeps) {
		c.ReadyTimeout = 200 * time.Millisecond
		c.ReadyMaxAge = time.Nanosecond // every request a new probe: the test changes the checks
		d.Checks = []Check{
			{Name: "redis", Ping: func(context.Context) error {
				if redisDown.Load() {
					return errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
				}
				return nil
			}},
			{Name: "postgres", Ping: func(context.Context) error { return nil }},
			{Name: "kafka", Ping: func(ctx context.Context) error {
				if kafkaSlow.Load() {
					time.Sleep(2 * time.Second) // ignores its context on purpose
				}
				return nil
			}},
		}
	})
	resp, body := b.do(t, "GET", "/readyz", "")
	require.Equal(t, 200, resp.StatusCode)
	require.JSONEq(t, `{"status":"ready","checks":{"redis":"ok","postgres":"ok","kafka":"ok"}}`, string(body))

	resp, body = b.do(t, "GET", "/healthz", "")
	require.Equal(t, 200, resp.StatusCode)
	require.JSONEq(t, `{"status":"ok"}`, string(body))

	redisDown.Store(true)
	kafkaSlow.Store(true)
	start := time.Now()
	resp, body = b.do(t, "GET", "/readyz", "")
	require.Less(t, time.Since(start), time.Second, "a hanging check does not hang the probe")
	msg := requireAPIError(t, resp, body, 503, "unavailable")
	require.Equal(t, "not ready: redis, kafka unreachable", msg)
	require.NotContains(t, msg, "6379")

	redisDown.Store(false)
	kafkaSlow.Store(false)
	b.srv.draining.Store(true)
	resp, body = b.do(t, "GET", "/readyz", "")
	require.Equal(t, "shutting down", requireAPIError(t, resp, body, 503, "unavailable"))
}

// A burst of /readyz costs one probe: the callers that arrive while it runs
// wait for it, and the callers after it are answered from it while it is
// younger than ReadyMaxAge.
func TestReadinessIsOneCachedProbe(t *testing.T) {
	t.Parallel()
	var pings atomic.Int64
	release := make(chan struct{})
	b := setup(t, func(c *Config, d *testDeps) {
		c.ReadyMaxAge = time.Hour // the cache never expires during the test, however slow the machine
		d.Checks = []Check{{Name: "kafka", Ping: func(context.Context) error {
			pings.Add(1)
			<-release
			return nil
		}}}
	})
	const callers = 40
	codes := make(chan int, callers)
	for range callers {
		go func() {
			resp, _ := b.do(t, "GET", "/readyz", "")
			codes <- resp.StatusCode
		}()
	}
	require.Eventually(t, func() bool { return pings.Load() == 1 }, 10*time.Second, time.Millisecond)
	close(release)
	for range callers {
		require.Equal(t, 200, <-codes)
	}
	for range 100 {
		resp, _ := b.do(t, "GET", "/readyz", "")
		require.Equal(t, 200, resp.StatusCode)
	}
	require.EqualValues(t, 1, pings.Load(), "140 readiness checks, one probe")

	// Past its age the next caller probes again.
	r := NewReadiness([]Check{{Name: "redis", Ping: func(context.Context) error { pings.Add(1); return errors.New("down") }}},
		time.Second, time.Nanosecond, b.srv.log)
	for i := range 3 {
		failed, err := r.Failed(context.Background())
		require.NoError(t, err)
		require.Equal(t, []string{"redis"}, failed)
		require.EqualValues(t, 2+i, pings.Load())
	}
}

func TestStaticFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, body := b.do(t, "GET", "/", "")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, string(body), "<h1>Flash sale</h1>")

	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	resp, _ = b.do(t, "GET", "/", "", "If-None-Match", etag)
	require.Equal(t, http.StatusNotModified, resp.StatusCode)

	// The web issue's FS drops in through Deps.Static.
	web := fstest.MapFS{
		"index.html":       {Data: []byte("<p>shop</p>")},
		"app.js":           {Data: []byte("console.log(1)")},
		"admin/index.html": {Data: []byte("<p>ops</p>")},
		"css/site.css":     {Data: []byte("body{}")},
		"help.html":        {Data: []byte("<p>help</p>")},
	}
	b2 := setup(t, func(_ *Config, d *testDeps) { d.Static = web })
	for path, want := range map[string]string{"/": "<p>shop</p>", "/index.html": "<p>shop</p>", "/app.js": "console.log(1)", "/admin": "<p>ops</p>", "/admin/": "<p>ops</p>", "/css/site.css": "body{}", "/help": "<p>help</p>", "/help.html": "<p>help</p>"} {
		resp, body := b2.do(t, "GET", path, "")
		require.Equal(t, 200, resp.StatusCode, path)
		require.Equal(t, want, string(body), path)
	}
	_, _ = b2.do(t, "GET", "/app.js", "")
	resp, _ = b2.do(t, "GET", "/app.js", "")
	require.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
	resp, body = b2.do(t, "GET", "/nope.js", "")
	requireAPIError(t, resp, body, 404, "not_found")
}

func TestServeAndShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv, err := New(b.srv.cfg, b.srv.deps)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()

	url := "http://" + ln.Addr().String() + "/healthz"
	require.Eventually(t, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 5*time.Second, 10*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	require.NoError(t, <-done, "Serve returns nil after Shutdown")
	_, err = http.Get(url)
	require.Error(t, err, "no longer listening")

	// Serve after Shutdown returns at once.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, srv.Serve(ln2))
}

func TestCORS(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config, _ *testDeps) { c.AllowedOrigins = []string{"https://shop.example"} })
	resp, _ := b.do(t, "OPTIONS", "/api/v1/vouchers/1/orders", "",
		"Origin", "https://shop.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "authorization,idempotency-key,content-type")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, "https://shop.example", resp.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "idempotency-key")

	// An operator's app changes a voucher (PATCH) with the headers of the
	// contract that a browser asks about first.
	resp, _ = b.do(t, "OPTIONS", "/api/v1/admin/vouchers/1", "",
		"Origin", "https://shop.example", "Access-Control-Request-Method", "PATCH",
		"Access-Control-Request-Headers", "authorization,content-type,idempotency-key,if-none-match,traceparent")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), "PATCH")
	for _, h := range []string{"if-none-match", "traceparent", "accept-language"} {
		require.Contains(t, strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), h)
	}

	// A page of the catalog: the app reads the next page's Link and the
	// server's clock.
	resp, _ = b.do(t, "GET", "/api/v1/vouchers?limit=1", "", "Origin", "https://shop.example")
	require.Equal(t, "https://shop.example", resp.Header.Get("Access-Control-Allow-Origin"))
	for _, h := range []string{"link", "x-server-time", "content-language", "x-request-id", "retry-after"} {
		require.Contains(t, strings.ToLower(resp.Header.Get("Access-Control-Expose-Headers")), h)
	}

	resp, _ = b.do(t, "GET", "/api/v1/vouchers", "", "Origin", "https://evil.example")
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}

// TestOpenAPIMatchesRoutes keeps the served document and the app's routes
// in step: every route is documented, every documented operation exists.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)

	resp, body := b.do(t, "GET", "/openapi.yaml", "")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "application/yaml", resp.Header.Get("Content-Type"))
	onDisk, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	require.Equal(t, string(onDisk), string(body))

	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(body, &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."))

	methods := []string{"get", "head", "post", "put", "patch", "delete"}
	var documented []string
	for path, item := range doc.Paths {
		for m, op := range item {
			if !slices.Contains(methods, m) {
				continue // parameters, summary...
			}
			require.IsType(t, map[string]any{}, op, "%s %s", m, path)
			require.Contains(t, op.(map[string]any), "responses", "%s %s", m, path)
			documented = append(documented, strings.ToUpper(m)+" "+path)
		}
	}

	param := regexp.MustCompile(`:([a-zA-Z]+)`)
	var served []string
	for _, r := range b.srv.App().GetRoutes(true) {
		if r.Method == http.MethodOptions || b.srv.staticPaths[r.Path] {
			continue
		}
		served = append(served, r.Method+" "+param.ReplaceAllString(r.Path, "{$1}"))
	}
	slices.Sort(documented)
	slices.Sort(served)
	served = slices.Compact(served)
	require.Equal(t, documented, served)
	require.Contains(t, served, "POST /api/v1/vouchers/{id}/orders", fmt.Sprint(served))
}

// A process without the gateway answers /healthz and /readyz with the
// gateway's bodies, the API's error body when a check fails.
func TestOpsHandler(t *testing.T) {
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("connection refused") }
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("# metrics\n")) })
	for _, tc := range []struct {
		name   string
		checks []Check
		path   string
		status int
		want   string // the JSON answer
	}{
		{"healthz", []Check{{Name: "redis", Ping: down}}, "/healthz", 200, `{"status":"ok"}`},
		{"ready", []Check{{Name: "redis", Ping: ok}, {Name: "kafka", Ping: ok}}, "/readyz", 200,
			`{"status":"ready","checks":{"redis":"ok","kafka":"ok"}}`},
		{"not ready", []Check{{Name: "redis", Ping: ok}, {Name: "kafka", Ping: down}}, "/readyz", 503,
			`{"error":{"code":"unavailable","message":"not ready: kafka unreachable"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := OpsHandler(tc.checks, metrics, nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			require.Equal(t, tc.status, rec.Code)
			require.JSONEq(t, tc.want, rec.Body.String())
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			if tc.status == http.StatusServiceUnavailable {
				require.NotEmpty(t, rec.Header().Get("Retry-After"))
			}
		})
	}
	rec := httptest.NewRecorder()
	OpsHandler(nil, metrics, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, "# metrics\n", rec.Body.String())
}
