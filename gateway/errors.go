package gateway

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/gateway/i18n"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// errorRow is one line of the error table (gateway/openapi.yaml).
type errorRow struct {
	sentinel error
	status   int
	code     string
	// message is what the shopper reads when the error carries no
	// PublicMessage of its own: a plain sentence, never a driver's words.
	message string
}

// errorTable is THE mapping of the platform's errors to HTTP (the error
// table of gateway/openapi.yaml). It is only read. The first row whose sentinel is in the error's
// chain wins, so an error wrapping two sentinels takes the earlier row.
var errorTable = [...]errorRow{
	{apperr.ErrInvalidInput, fiber.StatusBadRequest, "invalid_input", "the request is not valid"},
	{apperr.ErrChallengeInvalid, fiber.StatusBadRequest, "challenge_invalid", "the challenge answer is missing, wrong or expired; get a new challenge and try again"},
	// A payment provider's delivery whose signature, age or money does not
	// hold: the provider may retry it; nothing changed.
	{payment.ErrInvalidEvent, fiber.StatusBadRequest, "invalid_signature", "the event's signature is missing, wrong or too old"},
	{orders.ErrPaymentMismatch, fiber.StatusBadRequest, "invalid_signature", "the event's amount or currency is not its payment's"},
	{apperr.ErrCaptchaInvalid, fiber.StatusBadRequest, "captcha_invalid", "the captcha answer is missing, wrong or expired; get a new captcha and try again"},
	{apperr.ErrChallengeInvalid, fiber.StatusBadRequest, "challenge_invalid", "the proof-of-work answer is missing, wrong, expired or used; get a new challenge and try again"},
	{apperr.ErrUnauthenticated, fiber.StatusUnauthorized, "unauthenticated", "please sign in first"},
	{apperr.ErrForbidden, fiber.StatusForbidden, "forbidden", "you are not allowed to do this"},
	{seckill.ErrNotAdmitted, fiber.StatusForbidden, "not_admitted", "this voucher has a waiting room: join its line, and buy with the pass you get when admitted"},
	{seckill.ErrNotEligible, fiber.StatusForbidden, "not_eligible", "this voucher takes entries only with a valid entry token from its merchant, or from its allowlist"},
	{seckill.ErrUnpaidLimit, fiber.StatusForbidden, "unpaid_limit", "too many of your holds expired unpaid or were cancelled recently; you may buy again later"},
	{apperr.ErrNotFound, fiber.StatusNotFound, "not_found", "we could not find what you asked for"},
	{seckill.ErrSoldOut, fiber.StatusConflict, "sold_out", "this voucher is sold out"},
	{seckill.ErrLimitExceeded, fiber.StatusConflict, "limit_exceeded", "you have reached the limit for this voucher"},
	{seckill.ErrNotStarted, fiber.StatusConflict, "not_started", "the sale has not started yet"},
	{seckill.ErrEnded, fiber.StatusConflict, "ended", "the sale has ended"},
	{apperr.ErrConflict, fiber.StatusConflict, "conflict", "the order cannot change that way in its current state"},
	{apperr.ErrUsernameTaken, fiber.StatusConflict, "username_taken", "that username is taken; please choose another"},
	{apperr.ErrTooLarge, fiber.StatusRequestEntityTooLarge, "too_large", "the request body is too large"},
	{apperr.ErrRateLimited, fiber.StatusTooManyRequests, "rate_limited", "too many requests; please wait a moment and try again"},
	{seckill.ErrSalePaused, fiber.StatusServiceUnavailable, "sale_paused", "the sale of this voucher is paused for a moment; please try again shortly"},
	{apperr.ErrUnavailable, fiber.StatusServiceUnavailable, "unavailable", "the service is busy right now; please try again shortly"},
	// Our own request deadline (Config.RequestTimeout) or a dependency too
	// slow to answer inside it: the same as a dependency that is down.
	{context.DeadlineExceeded, fiber.StatusServiceUnavailable, "unavailable", "the service is busy right now; please try again shortly"},
	// Fiber answers a known path with another method by itself; it gets a
	// code of its own rather than a wrong one.
	{errMethodNotAllowed, fiber.StatusMethodNotAllowed, "method_not_allowed", "this address does not accept that method"},
}

// internalRow is the answer for everything the table does not know.
var internalRow = errorRow{nil, fiber.StatusInternalServerError, "internal", "something went wrong on our side; please try again"}

var errMethodNotAllowed = errors.New("method not allowed")

// defaultRetryAfter is Retry-After on a 429 or 503 whose error does not say.
const defaultRetryAfter = time.Second

// apiError is one answer: the row, the message and, for 429 and 503, the wait.
type apiError struct {
	row        errorRow
	message    string
	retryAfter time.Duration
	// fields is every bad field of an invalid_input: never empty for one.
	fields []api.FieldError
	// retryAt is when a refusal that knows its end ends (unpaid_limit).
	retryAt *time.Time
}

// body is the error body of the answer.
func (e apiError) body() api.ErrorBody {
	return api.ErrorBody{Error: api.ErrorDetail{Code: e.row.code, Message: e.message, Fields: e.fields, RetryAt: e.retryAt}}
}

// plain says whether the body is only a code and a message.
func (e apiError) plain() bool { return len(e.fields) == 0 && e.retryAt == nil }

// classify maps any error to its answer, its sentences said in lang (the
// code never changes with it).
func classify(err error, lang i18n.Lang) apiError {
	row, ok := lookup(err)
	if !ok {
		row = internalRow
	}
	e := apiError{row: row, message: lang.Sprintf(row.message)}
	if ok {
		// Only errors of a known kind may speak for themselves: an unknown
		// error's text is never shown.
		var pe *apperr.PublicError
		if errors.As(err, &pe) && pe.Message != "" {
			e.message = pe.MessageIn(lang.Sprintf, lang.Separator())
		}
	}
	if row.code == "invalid_input" {
		e.fields = invalidFields(err, e.message, lang)
	}
	var ra interface{ RetryAt() time.Time }
	if ok && errors.As(err, &ra) {
		at := ra.RetryAt().UTC()
		e.retryAt = &at
	}
	if row.status == fiber.StatusTooManyRequests || row.status == fiber.StatusServiceUnavailable {
		e.retryAfter = defaultRetryAfter
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) && ra.RetryAfter() > 0 {
			e.retryAfter = ra.RetryAfter()
		}
	}
	return e
}

// invalidFields is the error.fields of an invalid_input: the fields the
// error names, or, for one that names none (a body that is not JSON), the
// body as a whole with the message as the reason, so a client may always
// read the list.
func invalidFields(err error, message string, lang i18n.Lang) []api.FieldError {
	named := apperr.FieldsOf(err)
	if len(named) == 0 {
		return []api.FieldError{{Field: "", Reason: message}}
	}
	out := make([]api.FieldError, len(named))
	for i, f := range named {
		out[i] = api.FieldError{Field: f.Field, Reason: f.ReasonIn(lang.Sprintf)}
	}
	return out
}

func lookup(err error) (errorRow, bool) {
	for _, row := range errorTable {
		if errors.Is(err, row.sentinel) {
			return row, true
		}
	}
	// Fiber's own errors: unknown route, another method, body over the
	// limit (raised by fasthttp before any handler runs), bad requests.
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return fiberRow(fe.Code)
	}
	return errorRow{}, false
}

func fiberRow(status int) (errorRow, bool) {
	switch {
	case status == fiber.StatusNotFound:
		return errorRow{nil, status, "not_found", "there is nothing at this address"}, true
	case status == fiber.StatusMethodNotAllowed:
		return lookup(errMethodNotAllowed)
	case status == fiber.StatusRequestEntityTooLarge || status == fiber.StatusRequestHeaderFieldsTooLarge:
		return lookup(apperr.ErrTooLarge)
	case status == fiber.StatusTooManyRequests:
		return lookup(apperr.ErrRateLimited)
	case status == fiber.StatusServiceUnavailable || status == fiber.StatusRequestTimeout:
		return lookup(apperr.ErrUnavailable)
	case status >= 400 && status < 500:
		return lookup(apperr.ErrInvalidInput)
	}
	return errorRow{}, false
}

func invalid(msg string) error { return apperr.Public(apperr.ErrInvalidInput, msg) }

// retryAfterSeconds is the header's value: whole seconds, rounded up, at
// least one (a client told "0" retries at once, which is the flood we refuse).
func retryAfterSeconds(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

// writeError renders err as the API's error body. Errors the table does not
// know are logged with the request id; their text never reaches the client.
func (s *Server) writeError(c *fiber.Ctx, err error) {
	lang := i18n.Negotiate(c.Get(fiber.HeaderAcceptLanguage))
	e := classify(err, lang)
	// The body's sentences follow Accept-Language; a cache keeps one
	// answer per language.
	c.Set(fiber.HeaderContentLanguage, string(lang))
	c.Vary(fiber.HeaderAcceptLanguage)
	c.Locals(errorCodeKey{}, e.row.code)
	rid := requestIDOf(c)
	switch {
	case e.row.status >= 500 && e.row.status != fiber.StatusServiceUnavailable:
		s.log.LogAttrs(c.UserContext(), slog.LevelError, "request failed",
			slog.String("request_id", rid), slog.String("method", c.Method()),
			slog.String("route", c.Route().Path), slog.String("error", err.Error()))
	case e.row.status == fiber.StatusServiceUnavailable:
		// Debug, not Warn: while the breaker is open or the operator paused
		// the sale, every buy is a 503, and a line each would flood the log
		// at the worst moment. The breaker logs its transitions and the
		// metrics count each refusal.
		s.log.LogAttrs(c.UserContext(), slog.LevelDebug, "dependency unavailable",
			slog.String("request_id", rid), slog.String("method", c.Method()),
			slog.String("route", c.Route().Path), slog.String("error", err.Error()))
	}
	if e.retryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, retryAfterSeconds(e.retryAfter))
	}
	if e.row.status == fiber.StatusUnauthorized {
		c.Set(fiber.HeaderWWWAuthenticate, "Bearer") // RFC 6750
	}
	if jerr := writeErrorBody(c, e); jerr != nil {
		// Marshalling two strings cannot fail; if it ever does, the status
		// still tells the truth.
		s.log.LogAttrs(c.UserContext(), slog.LevelError, "write error body", slog.String("error", jerr.Error()))
	}
}

// fiberErrorHandler catches what never reached the middleware (requests
// fasthttp refused while reading them, like a head over its buffer) and
// anything a handler returned outside it.
func (s *Server) fiberErrorHandler(c *fiber.Ctx, err error) error {
	if len(c.Response().Header.Peek(HeaderRequestID)) != 0 {
		s.writeError(c, err) // already observed: only the body is missing
		return nil
	}
	s.answerUnrouted(c, err)
	return nil
}

// answerUnrouted answers err for a request refused before the router, through
// the same middleware as every answer: request id, X-Server-Time and the
// other headers of every API answer, the access log, and
// seckill_http_requests_total under the route "unrouted".
func (s *Server) answerUnrouted(c *fiber.Ctx, err error) {
	c.Locals(unroutedKey{}, true)
	refuse := func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderCacheControl, "no-store")
		return err
	}
	observed := func() error { return s.observed(c, refuse) }
	if s.metrics != nil {
		_ = s.metrics.measure(c, observed)
		return
	}
	_ = observed()
}
