package gateway

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/api"
)

// The hand-written answers are byte for byte what json.Marshal writes, for
// every row of the error table, messages that need escaping, and the 202.
func TestHandWrittenBodiesAreJSONs(t *testing.T) {
	t.Parallel()
	app := fiber.New()
	answer := func(write func(c *fiber.Ctx) error) (int, string, []byte) {
		c := app.AcquireCtx(&fasthttp.RequestCtx{})
		defer app.ReleaseCtx(c)
		require.NoError(t, write(c))
		return c.Response().StatusCode(), string(c.Response().Header.ContentType()), append([]byte(nil), c.Response().Body()...)
	}
	rows := append(errorTable[:], internalRow)
	for _, row := range rows {
		for _, msg := range []string{row.message, `say "no" <b> & \ back`, "naïve\n", ""} {
			e := apiError{row: row, message: msg}
			status, ct, body := answer(func(c *fiber.Ctx) error { return writeErrorBody(c, e) })
			want, err := json.Marshal(e.body())
			require.NoError(t, err)
			require.Equal(t, string(want), string(body), "row %s, message %q", row.code, msg)
			require.Equal(t, row.status, status)
			require.Equal(t, fiber.MIMEApplicationJSON, ct)
		}
	}
	for _, id := range []int64{1, 7190000000000000001, math.MaxInt64} {
		for _, st := range []orders.Status{orders.StatusReserved, orders.StatusCreated, "odd<\"status\">"} {
			status, ct, body := answer(func(c *fiber.Ctx) error { return writePurchase(c, id, st) })
			want, err := json.Marshal(api.Purchase{OrderID: idString(id), Status: string(st)})
			require.NoError(t, err)
			require.Equal(t, string(want), string(body))
			require.Equal(t, fiber.StatusAccepted, status)
			require.Equal(t, fiber.MIMEApplicationJSON, ct)
		}
	}
}

// A challenge answer of the contract's shape passes to the pipeline, which
// judges it; anything else is the client's malformed request.
func TestNonceShaped(t *testing.T) {
	for answer, want := range map[string]bool{
		"": true, "0": true, "12345678901234567890": true,
		"123456789012345678901": false, "\u0084": false, "12a": false, "-1": false, " 1": false,
	} {
		if got := nonceShaped(answer); got != want {
			t.Errorf("nonceShaped(%q) = %v, want %v", answer, got, want)
		}
	}
}
