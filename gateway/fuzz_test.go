package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// FuzzBuyRequest throws arbitrary ids, keys and bodies at the buying route,
// in memory: the gateway never panics and always answers 202 or a row of
// the error table, in the API's error body.
func FuzzBuyRequest(f *testing.F) {
	for _, seed := range []struct{ id, key, body string }{
		{"1", "", ""},
		{"1", "k-1", `{"quantity":2}`},
		{"1", "", `{"quantity":2,"captcha_id":"a","captcha_answer":"b"}`},
		{"0", "", `{}`},
		{"9223372036854775808", "", `{}`},
		{"1", "a b", `{"quantity":"1"}`},
		{"1", "", `{"quantity":1}{"quantity":1}`},
		{"1", "", `[`},
		{"1", "", `{"quantity":1e400}`},
		{"1", "", "\x00\xff"},
		{"abc", "", `null`},
	} {
		f.Add(seed.id, seed.key, seed.body)
	}
	bb := setup(f, func(_ *Config, d *testDeps) { d.Logger = slog.New(slog.DiscardHandler) })
	h := bb.srv.App().Handler()
	allowed := map[int]bool{202: true, 400: true, 404: true, 405: true, 409: true, 413: true}
	f.Fuzz(func(t *testing.T, id, key, body string) {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/api/v1/vouchers/" + id + "/orders")
		ctx.Request.Header.Set("Authorization", "Bearer "+bb.shopper)
		ctx.Request.Header.Set("Idempotency-Key", key)
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.SetBodyString(body)
		h(&ctx)
		status := ctx.Response.StatusCode()
		if !allowed[status] {
			t.Fatalf("status %d for id %q key %q body %q: %s", status, id, key, body, ctx.Response.Body())
		}
		if status == 202 {
			return
		}
		checkErrorBody(t, ctx.Response.Body())
	})
}

// FuzzCreateVoucher does the same for the operator's voucher decoder.
func FuzzCreateVoucher(f *testing.F) {
	f.Add(`{"title":"t","kind":"seckill","price_cents":100,"stock":10,"per_user_limit":1,"begin_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z"}`)
	f.Add(`{"title":"t","kind":"limit","price_cents":-1,"stock":10,"per_user_limit":1,"begin_at":"2030-01-01T00:00:00+08:00","end_at":"2030-01-02T00:00:00Z"}`)
	f.Add(`{"title":"","begin_at":"0000-00-00T00:00:00Z"}`)
	f.Add(`{"stock":9223372036854775807}`)
	bb := setup(f, func(_ *Config, d *testDeps) { d.Logger = slog.New(slog.DiscardHandler) })
	h := bb.srv.App().Handler()
	f.Fuzz(func(t *testing.T, body string) { checkAdminBody(t, h, "POST", "/api/v1/admin/vouchers", body, 201) })
}

// checkAdminBody sends body to an operator route and checks the answer is
// ok or the API's error body with 400 or 413: never a 500, whatever the body.
func checkAdminBody(t *testing.T, h fasthttp.RequestHandler, method, path, body string, ok int) {
	t.Helper()
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(path)
	ctx.Request.Header.Set("Authorization", "Bearer "+testAdminToken)
	ctx.Request.Header.SetContentType("application/json")
	ctx.Request.SetBodyString(body)
	h(&ctx)
	switch status := ctx.Response.StatusCode(); status {
	case ok:
	case 400, 413:
		checkErrorBody(t, ctx.Response.Body())
	default:
		t.Fatalf("status %d for %q: %s", status, body, ctx.Response.Body())
	}
}

func checkErrorBody(t *testing.T, raw []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var e api.ErrorBody
	if err := dec.Decode(&e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("not the API's error body: %s (%v)", raw, err)
	}
	if e.Error.Code == "internal" {
		t.Fatalf("a client's input produced a 500: %s", raw)
	}
}

// FuzzBuyBody: the hand-read buy body (decodeBuy) gives exactly
// encoding/json's verdict (decodeJSON): the same values when both accept,
// the same refusal when either refuses, whatever the body and Content-Type.
func FuzzBuyBody(f *testing.F) {
	for _, body := range []string{
		"", " \n", `{}`, `{"quantity":1}`, ` { "quantity" : -3 , "captcha_id":"a", "captcha_answer":"42" } `,
		`{"quantity":1,"quantity":2}`, `{"quantity":null}`, `{"Quantity":1}`, `{"quantity":01}`, `{"quantity":1.0}`,
		`{"quantity":123456789012345678}`, `{"quantity":9223372036854775808}`, `{"quantity":-0}`, `{"quantity":"1"}`,
		`{"captcha_id":"\u0041"}`, `{"captcha_id":1}`, `{"x":1}`, `{"quantity":1}{}`, `{"quantity":1} x`, `[1]`, `null`,
		`{"quantity":1,}`, `{,}`, "{\"captcha_id\":\"\xff\"}", "\v", "\u00a0{}",
	} {
		f.Add(body, "application/json")
	}
	f.Add(`{"quantity":1}`, "")
	f.Add(`{"quantity":1}`, "text/plain")
	f.Add(`{"quantity":1}`, "application/json; charset=utf-8")
	app := fiber.New()
	f.Fuzz(func(t *testing.T, body, contentType string) {
		c := app.AcquireCtx(&fasthttp.RequestCtx{})
		defer app.ReleaseCtx(c)
		c.Request().Header.SetContentType(contentType)
		c.Request().SetBodyString(body)
		var fast, slow api.BuyRequest
		fastErr := decodeBuy(c, &fast)
		slowErr := decodeJSON(c, &slow, true)
		if (fastErr == nil) != (slowErr == nil) || (fastErr != nil && fastErr.Error() != slowErr.Error()) {
			t.Fatalf("body %q, Content-Type %q: hand-read says %v, encoding/json says %v", body, contentType, fastErr, slowErr)
		}
		if fastErr != nil {
			if !errors.Is(fastErr, apperr.ErrInvalidInput) {
				t.Fatalf("body %q: refusal %v is not invalid input", body, fastErr)
			}
			return
		}
		if (fast.Quantity == nil) != (slow.Quantity == nil) || (fast.Quantity != nil && *fast.Quantity != *slow.Quantity) ||
			fast.CaptchaID != slow.CaptchaID || fast.CaptchaAnswer != slow.CaptchaAnswer {
			t.Fatalf("body %q: hand-read %+v (quantity %v), encoding/json %+v (quantity %v)", body, fast, fast.Quantity, slow, slow.Quantity)
		}
	})
}
