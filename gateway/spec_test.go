package gateway

// Tests that hold gateway/openapi.yaml exact beside what the server answers
// (gateway/CONTRACT.md): what the API fuzzer of `make conformance` found,
// kept as Go tests, and the document's own rules.

import (
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// openAPIDocument is gateway/openapi.yaml as generic YAML.
func openAPIDocument(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	return doc
}

func yamlMap(t *testing.T, v any, what string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "%s is a mapping", what)
	return m
}

// The ID parameter's pattern admits exactly the ids parseID accepts: the
// canonical decimal spelling of 1 to 2^63-1. The pattern was
// ^[1-9][0-9]{0,18}$, which admits 9999999999999999999; the server answers
// such an id 400 (found by the API fuzzer).
func TestIDPatternIsParseID(t *testing.T) {
	doc := openAPIDocument(t)
	params := yamlMap(t, yamlMap(t, doc["components"], "components")["parameters"], "parameters")
	schema := yamlMap(t, yamlMap(t, params["ID"], "ID")["schema"], "ID schema")
	pattern := regexp.MustCompile(schema["pattern"].(string))

	agree := func(id string) {
		_, err := parseID(id, "id", "id")
		require.Equal(t, err == nil, pattern.MatchString(id), "id %q: parseID says %v", id, err)
	}
	for _, id := range []string{"1", "9", "10", "0", "01", "-1", "+1", "", "1a", " 1",
		"9223372036854775807", "9223372036854775808", "9223372036854775806", "9223372036854775799",
		"9223372036854775810", "9999999999999999999", "10000000000000000000", "999999999999999999",
		"1000000000000000000", "8999999999999999999", "9223372036854775870"} {
		agree(id)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		agree(strconv.FormatUint(r.Uint64N(math.MaxUint64), 10))                             // half above int64
		agree(strconv.FormatInt(r.Int64N(math.MaxInt64-9_000_000_000_000_000_000)+9e18, 10)) // near the top
		agree(strconv.FormatInt(r.Int64N(1_000_000), 10))
	}
}

// Every operation declares the statuses every route can answer (405 for the
// methods the path does not serve, 413 for a body over the limit, which is
// checked before routing), and every response of every operation carries
// the common headers, by reference to components/headers.
func TestOpenAPIDeclaresCommonAnswers(t *testing.T) {
	doc := openAPIDocument(t)
	components := yamlMap(t, doc["components"], "components")
	sharedResponses := yamlMap(t, components["responses"], "responses")
	headersOf := func(r map[string]any, what string) map[string]any {
		if ref, ok := r["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/components/responses/")
			r = yamlMap(t, sharedResponses[name], ref)
		}
		h, _ := r["headers"].(map[string]any)
		require.NotNil(t, h, "%s declares its headers", what)
		return h
	}
	refTo := func(h map[string]any, name, component, what string) {
		v, ok := h[name].(map[string]any)
		require.True(t, ok, "%s declares %s", what, name)
		require.Equal(t, "#/components/headers/"+component, v["$ref"], "%s: %s", what, name)
	}
	ops := 0
	for path, item := range yamlMap(t, doc["paths"], "paths") {
		for method, op := range yamlMap(t, item, path) {
			if !strings.Contains("get head post put patch delete", method) || method == "parameters" {
				continue
			}
			ops++
			responses := yamlMap(t, yamlMap(t, op, path)["responses"], path+" responses")
			for _, code := range []string{"405", "413"} {
				require.Contains(t, responses, code, "%s %s", method, path)
			}
			for code, r := range responses {
				what := method + " " + path + " " + code
				h := headersOf(yamlMap(t, r, what), what)
				refTo(h, "X-Request-Id", "RequestId", what)
				refTo(h, "X-Server-Time", "ServerTime", what)
				switch code {
				case "401":
					refTo(h, "WWW-Authenticate", "WWWAuthenticate", what)
				case "405":
					refTo(h, "Allow", "Allow", what)
				case "429", "503":
					refTo(h, "Retry-After", "RetryAfter", what)
				}
			}
		}
	}
	require.Greater(t, ops, 20)
}

// White space alone is not JSON: an optional body (the buy's) is absent or
// an object, and a buy whose body was a line break was taken for an empty
// one (found by the API fuzzer on the queue's join). No body at all still
// buys one unit.
func TestWhiteSpaceBodyIsInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, in := range []string{"\n", " ", "\r\n\t"} {
		resp, body := b.do(t, http.MethodPost, "/api/v1/vouchers/1/orders", in,
			"Authorization", bearerOf(b.shopper), "Content-Type", "application/json")
		msg := requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
		require.Contains(t, msg, "white space", "%q", in)
	}
	require.Empty(t, b.buyer.requests(), "nothing was bought")
	resp, body := b.do(t, http.MethodPost, "/api/v1/vouchers/1/orders", "",
		"Authorization", bearerOf(b.shopper), "Idempotency-Key", "no-body")
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
}

// A JSON null is not an object: a buy whose body is null was accepted as
// an empty one (202; found by the API fuzzer), though the body's schema is
// an object.
func TestNullBodyIsInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, body := b.do(t, http.MethodPost, "/api/v1/vouchers/1/orders", "null",
		"Authorization", bearerOf(b.shopper), "Content-Type", "application/json")
	requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
	resp, body = b.do(t, http.MethodPost, "/api/v1/sessions", " null ", "Content-Type", "application/json")
	requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
	// A field that is null is not absent either: it was read as its
	// default (quantity 1, no captcha).
	for _, in := range []string{`{"quantity": null}`, `{"captcha_answer": null, "captcha_id": "x"}`, `{"quantity": 1, "captcha_id": null}`} {
		resp, body = b.do(t, http.MethodPost, "/api/v1/vouchers/1/orders", in,
			"Authorization", bearerOf(b.shopper), "Content-Type", "application/json")
		msg := requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
		require.Contains(t, msg, "must not be null", in)
	}
	require.Empty(t, b.buyer.requests(), "nothing was bought")

	// Where the document declares null (NewVoucher.waiting_room), it is.
	resp, body = b.do(t, http.MethodPost, "/api/v1/admin/vouchers", `{"title": "t", "kind": "seckill",
		"price_cents": 100, "stock": 5, "per_user_limit": 1, "begin_at": "2030-01-01T00:00:00Z",
		"end_at": "2030-01-02T00:00:00Z", "waiting_room": null}`,
		"Authorization", "Bearer "+testAdminToken, "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	// And WaitingRoom.adaptive: null is a fixed rate.
	resp, body = b.do(t, http.MethodPost, "/api/v1/admin/vouchers", `{"title": "t", "kind": "seckill",
		"price_cents": 100, "stock": 5, "per_user_limit": 1, "begin_at": "2030-01-01T00:00:00Z",
		"end_at": "2030-01-02T00:00:00Z", "waiting_room": {"admit_per_second": 10, "adaptive": null}}`,
		"Authorization", "Bearer "+testAdminToken, "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
}

// A field named twice is refused, whatever its case: encoding/json took
// the last value without a word, so {"add_stock":1,"add_stock":5} added 5
// (a security review found it). Every JSON body goes through the one check.
func TestRepeatedFieldIsInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := []string{"Authorization", "Bearer " + testAdminToken, "Content-Type", "application/json"}
	path := "/api/v1/admin/vouchers/" + idString(b.onSale.ID)
	for _, in := range []string{`{"add_stock":1,"add_stock":5}`, `{"add_stock":1,"ADD_STOCK":5}`, `{"add_stock":1,"add_ſtock":5}`} {
		resp, body := b.do(t, http.MethodPatch, path, in, admin...)
		msg := requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
		require.Contains(t, msg, "more than once", in)
	}
	v, err := b.catalog.Voucher(t.Context(), b.onSale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 100, v.StockTotal, "nothing was added")

	resp, body := b.do(t, http.MethodPost, "/api/v1/vouchers/1/orders", `{"quantity":1,"quantity":2}`,
		"Authorization", bearerOf(b.shopper), "Content-Type", "application/json")
	requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
	require.Empty(t, b.buyer.requests(), "nothing was bought")
	resp, body = b.do(t, http.MethodPost, "/api/v1/admin/vouchers", `{"title": "t", "kind": "seckill",
		"price_cents": 100, "stock": 5, "stock": 50, "per_user_limit": 1, "begin_at": "2030-01-01T00:00:00Z",
		"end_at": "2030-01-02T00:00:00Z"}`, admin...)
	requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
	// The same name in two objects is no repeat.
	resp, body = b.do(t, http.MethodPost, "/api/v1/admin/vouchers", `{"title": "t", "kind": "seckill",
		"price_cents": 100, "stock": 5, "per_user_limit": 1, "begin_at": "2030-01-01T00:00:00Z",
		"end_at": "2030-01-02T00:00:00Z", "waiting_room": {"admit_per_second": 10,
		"adaptive": {"target_p99_ms": 50, "min_per_second": 1, "max_per_second": 20}}}`, admin...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
}
