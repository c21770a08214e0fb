package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill/apperr"
)

// HeaderRequestID carries the request id, in and out.
const HeaderRequestID = "X-Request-Id"

// HeaderServerTime carries the server's clock in unix milliseconds on every
// answer, so clients count down to a sale by the server's time.
const HeaderServerTime = "X-Server-Time"

// maxRequestID bounds a request id taken from the client.
const maxRequestID = 128

// Keys of the request's locals. Values are the gateway's own copies.
type (
	requestIDKey struct{}
	userIDKey    struct{}
)

// observe is the outermost middleware: it names the request, gives it a
// deadline, turns panics and errors into the API's error answers, and writes one
// access log line. It returns nil: the answer is already written.
func (s *Server) observe(c *fiber.Ctx) error { return s.observed(c, s.nextRecovering) }

// observed is observe around run, which produces the answer: the rest of
// the chain, or for an answer given before the router (answerTooLarge) the
// error itself.
func (s *Server) observed(c *fiber.Ctx, run func(*fiber.Ctx) error) error {
	start := time.Now()
	rid := clientRequestID(c.Get(HeaderRequestID))
	if rid == "" {
		rid = newRequestID()
	}
	c.Locals(requestIDKey{}, rid)
	c.Set(HeaderRequestID, rid)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	// The page counts down to a sale's opening by the server's clock; Date
	// has whole seconds only (and fasthttp refreshes it once a second).
	c.Set(HeaderServerTime, strconv.FormatInt(start.UnixMilli(), 10))

	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	ctx, span := s.startRequest(ctx, c)
	c.SetUserContext(ctx)

	if err := run(c); err != nil {
		s.writeError(c, err)
	}

	status := c.Response().StatusCode()
	route := routeOf(c)
	client := s.clientAddr(c).String()
	code, _ := c.Locals(errorCodeKey{}).(string)
	endRequest(span, c, route, client, code, status)
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs,
		slog.String("request_id", rid),
		slog.String("method", c.Method()),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Duration("duration", time.Since(start)),
		slog.String("client", client),
	)
	if code != "" {
		attrs = append(attrs, slog.String("code", code))
	}
	if uid, ok := c.Locals(userIDKey{}).(int64); ok {
		attrs = append(attrs, slog.Int64("user_id", uid))
	}
	if route == "/" || route == routeUnrouted || status == fiber.StatusNotFound || status == fiber.StatusMethodNotAllowed {
		// The route says little for static files, unknown paths and answers
		// given before routing; the path says more. Copied and bounded: it
		// points into fasthttp's buffer.
		attrs = append(attrs, slog.String("path", truncate(c.Path(), 200)))
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "http request", attrs...)
	return nil
}

// nextRecovering runs the rest of the chain; a panic becomes a 500 internal
// with its stack in the log, and the server keeps serving.
func (s *Server) nextRecovering(c *fiber.Ctx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.LogAttrs(c.UserContext(), slog.LevelError, "panic in handler",
				slog.String("request_id", requestIDOf(c)), slog.String("method", c.Method()),
				slog.String("route", c.Route().Path), slog.Any("panic", r),
				slog.String("stack", string(debug.Stack())))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return c.Next()
}

// clientRequestID keeps a client's request id when it is short and plain
// (it lands in logs), and returns a copy: the header points into a reused
// buffer.
func clientRequestID(h string) string {
	if h == "" || len(h) > maxRequestID {
		return ""
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
		if !ok {
			return ""
		}
	}
	return strings.Clone(h)
}

// newRequestID returns 16 random bytes in hex.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

func requestIDOf(c *fiber.Ctx) string {
	rid, _ := c.Locals(requestIDKey{}).(string)
	return rid
}

// userIDOf is the shopper authenticated by requireShopper.
func userIDOf(c *fiber.Ctx) int64 {
	uid, _ := c.Locals(userIDKey{}).(int64)
	return uid
}

func truncate(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.Clone(s)
}

// bearer extracts the token of "Authorization: Bearer <token>".
func bearer(h string) (string, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	tok := strings.TrimLeft(h[len(prefix):], " ")
	if tok == "" || strings.ContainsAny(tok, " \t") {
		return "", false
	}
	return tok, true
}

// requireShopper lets through requests with a valid shopper token and
// remembers the user. The token is only read here, never kept.
func (s *Server) requireShopper(c *fiber.Ctx) error {
	tok, ok := bearer(c.Get(fiber.HeaderAuthorization))
	if !ok {
		return apperr.Public(apperr.ErrUnauthenticated, "please sign in first: send Authorization: Bearer <token>")
	}
	uid, err := s.deps.Tokens.Verify(tok)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", apperr.ErrUnauthenticated, err)
	case uid <= 0:
		return fmt.Errorf("%w: token names no user", apperr.ErrUnauthenticated)
	}
	c.Locals(userIDKey{}, uid)
	return c.Next()
}
