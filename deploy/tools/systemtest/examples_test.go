package systemtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/tools/apitest"
	"github.com/flashsale/seckill/notify/remind"
)

// loadSpecDoc is gateway/openapi.yaml, loaded by kin-openapi.
func loadSpecDoc(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(apitest.SpecPath())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(t.Context()))
	return doc
}

// Every example of gateway/openapi.yaml is one its schema admits: each
// request body's, each parameter's, and each error answer's, every one of
// which has an example (a client author reads them as the truth).
func TestSpecExamplesMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	doc := loadSpecDoc(t)
	errorsSeen := 0
	check := func(where string, schema *openapi3.SchemaRef, example any) {
		t.Helper()
		require.NotNil(t, schema, where)
		require.NoError(t, schema.Value.VisitJSON(example), "%s: the example is not what the schema admits", where)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			if rb := op.RequestBody; rb != nil {
				for ct, mt := range rb.Value.Content {
					if ct != "application/json" {
						continue
					}
					require.NotNil(t, mt.Example, "%s: the request body has an example", where)
					check(where+" request", mt.Schema, mt.Example)
				}
			}
			for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
				if p.Value.Example != nil {
					check(where+" parameter "+p.Value.Name, p.Value.Schema, p.Value.Example)
				}
			}
			for status, resp := range op.Responses.Map() {
				mt := resp.Value.Content.Get("application/json")
				if mt == nil || mt.Schema == nil || mt.Schema.Ref != "#/components/schemas/Error" {
					continue
				}
				errorsSeen++
				require.NotNil(t, mt.Example, "%s %s: the error answer has an example", where, status)
				check(where+" "+status, mt.Schema, mt.Example)
				code := mt.Example.(map[string]any)["error"].(map[string]any)["code"]
				if status == "400" && code == "invalid_input" {
					require.NotEmpty(t, mt.Example.(map[string]any)["error"].(map[string]any)["fields"], "%s: invalid_input names its fields", where)
				}
			}
		}
	}
	require.Greater(t, errorsSeen, 100, "every operation documents its errors")
}

// Each operation's example request, sent to the real system, gets an
// answer the document allows: a status it lists for the operation, never a
// 5xx, and a body and headers its schema admits (the validating client of
// the tests checks every answer, apitest.Transport).
func TestSpecExamplesAgainstTheServer(t *testing.T) {
	t.Parallel()
	doc := loadSpecDoc(t)
	// Web Push on, so that its key is answered (without keys it is 503).
	vapid, err := remind.GenerateVAPID("mailto:ops@shop.example")
	require.NoError(t, err)
	ts := startSystem(t, map[string]string{"SECKILL_VAPID_PUBLIC_KEY": vapid.PublicKey, "SECKILL_VAPID_PRIVATE_KEY": vapid.PrivateKey})
	begin := time.Now().Add(-time.Second)
	plain := ts.createVoucher(t, 50, 5, begin, begin.Add(time.Hour))
	room := ts.createRoomVoucher(t, 50, 5, 100, 0, begin, begin.Add(time.Hour))
	shopper := ts.shopper(t, 4242)
	held := ts.buy(t, plain, shopper, 1, "")
	require.Equal(t, http.StatusAccepted, held.status, "%s", held.raw)
	order := held.body["order_id"].(string)
	ts.waitStatus(t, shopper, order, "created")

	type call struct {
		method, path string
		op           *openapi3.Operation
		params       openapi3.Parameters
	}
	var calls []call
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if path == "/api/v1/ws" {
				continue // a WebSocket: its own tests (ws_test.go)
			}
			calls = append(calls, call{method, path, op, append(slices.Clone(item.Parameters), op.Parameters...)})
		}
	}
	// Reads first, then changes, the breaker last: a paused voucher or an
	// open breaker would only change which documented answer comes.
	rank := func(c call) int {
		switch {
		case strings.Contains(c.path, "breaker"):
			return 3
		case c.method == http.MethodGet || c.method == http.MethodHead:
			return 0
		case strings.Contains(c.path, "/admin/"):
			return 2
		}
		return 1
	}
	slices.SortStableFunc(calls, func(a, b call) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a.method+a.path, b.method+b.path)
	})
	require.Greater(t, len(calls), 30)

	for _, c := range calls {
		path := c.path
		if strings.Contains(path, "{id}") {
			id := plain
			switch {
			case strings.HasPrefix(path, "/api/v1/orders/"):
				id = order
			case strings.Contains(path, "/queue"):
				id = room
			}
			path = strings.ReplaceAll(path, "{id}", id)
		}
		q := []string{}
		for _, p := range c.params {
			if p.Value.In == openapi3.ParameterInQuery && p.Value.Example != nil {
				q = append(q, p.Value.Name+"="+toParam(p.Value.Example))
			}
			require.False(t, p.Value.Required && p.Value.In == openapi3.ParameterInQuery && p.Value.Example == nil,
				"%s %s: a required query parameter, %s, has an example", c.method, c.path, p.Value.Name)
		}
		if len(q) > 0 {
			path += "?" + strings.Join(q, "&")
		}
		var body []byte
		if rb := c.op.RequestBody; rb != nil {
			if mt := rb.Value.Content.Get("application/json"); mt != nil && mt.Example != nil {
				var err error
				body, err = json.Marshal(mt.Example)
				require.NoError(t, err)
			}
		}
		req, err := http.NewRequestWithContext(t.Context(), c.method, ts.base+path, bytes.NewReader(body))
		require.NoError(t, err)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		security := doc.Security
		if c.op.Security != nil {
			security = *c.op.Security
		}
		for _, s := range security {
			if _, ok := s["operator"]; ok {
				req.Header.Set("Authorization", "Bearer "+ts.cfg.AdminToken)
			}
			if _, ok := s["shopper"]; ok {
				req.Header.Set("Authorization", "Bearer "+shopper)
			}
		}
		resp, err := ts.client.Do(req)
		require.NoError(t, err, "%s %s", c.method, path)
		resp.Body.Close()
		status := strconv.Itoa(resp.StatusCode)
		require.Less(t, resp.StatusCode, 500, "%s %s answered %s", c.method, path, status)
		require.True(t, c.op.Responses.Value(status) != nil || c.op.Responses.Default() != nil,
			"%s %s answered %s, which the operation does not list", c.method, path, status)
		t.Logf("%-6s %s -> %s", c.method, path, status)
	}
}

// toParam spells an example as a query parameter's value.
func toParam(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
