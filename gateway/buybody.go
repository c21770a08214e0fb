package gateway

import (
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/api"
)

// decodeBuy reads a buy's body into in with the same verdicts as
// decodeJSON(c, in, true): the common bodies ({}, {"quantity":1}, the
// captcha fields, an empty body) are read by hand (readBuyBody), without
// encoding/json's reflection and its decoder's allocations, which were a
// third of a buy's allocations (deploy/tools/bench/README.md); every other body,
// the bad ones included, goes through decodeJSON, which words the refusal.
// FuzzBuyBody holds the two to the same answers.
func decodeBuy(c *fiber.Ctx, in *api.BuyRequest) error {
	body := c.Body()
	if ct := c.Request().Header.ContentType(); len(ct) == 0 || string(ct) == fiber.MIMEApplicationJSON {
		if readBuyBody(body, in) {
			return nil
		}
		*in = api.BuyRequest{}
	}
	return decodeJSON(c, in, true)
}

// readBuyBody reads body as a buy when it is simple: nothing at all, or one
// object of the fields quantity (an integer of at most 18 digits),
// captcha_id and captcha_answer (strings of printable ASCII without escapes), each at most once, spelled exactly so. It says false for
// anything else (null, case variants, escapes, fractions, duplicates, a
// syntax error...), leaving the verdict to encoding/json. Strings are
// copies: body is fasthttp's buffer.
func readBuyBody(body []byte, in *api.BuyRequest) bool {
	if len(body) == 0 {
		// decodeJSON allows an empty body by the same test (and refuses
		// white space alone).
		return true
	}
	p := skipWS(body, 0)
	if p == len(body) || body[p] != '{' {
		return false
	}
	p = skipWS(body, p+1)
	if p < len(body) && body[p] == '}' {
		return skipWS(body, p+1) == len(body)
	}
	var seen [3]bool
	for {
		key, next, ok := plainString(body, p)
		if !ok {
			return false
		}
		p = skipWS(body, next)
		if p == len(body) || body[p] != ':' {
			return false
		}
		p = skipWS(body, p+1)
		switch string(key) {
		case "quantity":
			if seen[0] {
				return false
			}
			seen[0] = true
			var q int64
			if q, p, ok = plainInt(body, p); !ok {
				return false
			}
			in.Quantity = &q
		case "captcha_id", "captcha_answer":
			i := 1
			if key[len(key)-1] == 'r' {
				i = 2
			}
			if seen[i] {
				return false
			}
			seen[i] = true
			var v []byte
			if v, p, ok = plainString(body, p); !ok {
				return false
			}
			if i == 1 {
				in.CaptchaID = string(v)
			} else {
				in.CaptchaAnswer = string(v)
			}
		default:
			return false
		}
		p = skipWS(body, p)
		if p == len(body) {
			return false
		}
		switch body[p] {
		case ',':
			p = skipWS(body, p+1)
		case '}':
			return skipWS(body, p+1) == len(body)
		default:
			return false
		}
	}
}

// skipWS skips JSON whitespace from p.
func skipWS(b []byte, p int) int {
	for p < len(b) && (b[p] == ' ' || b[p] == '\t' || b[p] == '\n' || b[p] == '\r') {
		p++
	}
	return p
}

// plainString reads a JSON string at p made only of printable ASCII
// without escapes; it returns its contents (a view of b) and the position
// after the closing quote.
func plainString(b []byte, p int) ([]byte, int, bool) {
	if p >= len(b) || b[p] != '"' {
		return nil, p, false
	}
	for i := p + 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return b[p+1 : i], i + 1, true
		case c == '\\' || c < 0x20 || c > 0x7e:
			return nil, p, false
		}
	}
	return nil, p, false
}

// plainInt reads a JSON integer at p: an optional minus, then 0 or 1 to 18
// digits without a leading zero (so it cannot overflow an int64), and no
// fraction or exponent after it.
func plainInt(b []byte, p int) (int64, int, bool) {
	neg := p < len(b) && b[p] == '-'
	if neg {
		p++
	}
	start := p
	var v int64
	for p < len(b) && b[p] >= '0' && b[p] <= '9' {
		if p-start == 18 {
			return 0, p, false
		}
		v = v*10 + int64(b[p]-'0')
		p++
	}
	if p == start || (b[start] == '0' && p-start > 1) {
		return 0, p, false
	}
	if p < len(b) && (b[p] == '.' || b[p] == 'e' || b[p] == 'E') {
		return 0, p, false
	}
	if neg {
		v = -v
	}
	return v, p, true
}

// writePurchase answers an accepted buy, {"order_id":"<id>","status":"<s>"},
// written into a stack buffer instead of through reflection JSON (the
// encoder's buffer and the body's copy were two allocations per buy).
// A status that would need escaping goes through c.JSON.
func writePurchase(c *fiber.Ctx, orderID int64, status orders.Status) error {
	if !api.PlainText(string(status)) {
		return c.Status(fiber.StatusAccepted).JSON(api.Purchase{OrderID: idString(orderID), Status: string(status)})
	}
	var buf [96]byte
	b := append(buf[:0], `{"order_id":"`...)
	b = strconv.AppendInt(b, orderID, 10)
	b = append(b, `","status":"`...)
	b = append(b, status...)
	b = append(b, `"}`...)
	c.Status(fiber.StatusAccepted)
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	c.Response().SetBody(b)
	return nil
}

// writeErrorBody writes the API's error body, {"error":{"code","message"}},
// the same bytes json.Marshal makes, without it when code and message need
// no escaping (every message of the error table and of the common
// refusals); others go through c.JSON.
func writeErrorBody(c *fiber.Ctx, e apiError) error {
	if !e.plain() || !api.PlainText(e.row.code) || !api.PlainText(e.message) {
		return c.Status(e.row.status).JSON(e.body())
	}
	var buf [256]byte
	b := append(buf[:0], `{"error":{"code":"`...)
	b = append(b, e.row.code...)
	b = append(b, `","message":"`...)
	b = append(b, e.message...)
	b = append(b, `"}}`...)
	c.Status(e.row.status)
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	c.Response().SetBody(b)
	return nil
}
