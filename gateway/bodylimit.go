package gateway

import (
	"bufio"
	"errors"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashsale/seckill/seckill/apperr"
)

// drainLimit bounds how much of an oversized body is read and thrown away
// before its connection is closed.
const drainLimit = 1 << 20

// drainFor bounds how long an oversized body's connection is read after its
// answer: a client that got its 413 closes at once (the answer says
// Connection: close); one that does not is not waited for longer.
const drainFor = 5 * time.Second

// headLimit is the most a request's head (its request line, URL included,
// and its headers) may take: fasthttp's read buffer, which must hold the
// whole head. Browsers and HTTP clients send heads far smaller; a longer one
// is refused with 413 too_large like a body over its limit.
const headLimit = 4096

// answerOversizedBodies answers a body over Config.BodyLimit, or a head
// over headLimit, like any other API error, so that the client gets it.
//
// fasthttp refuses such a body while reading the request, before the
// router, and hands ErrBodyTooLarge to the server's error handler; it then
// writes the answer and closes the connection at once. The client is
// usually still writing its body then (net/http writes it all before it
// reads), and closing a socket with unread bytes makes the kernel send a
// reset, which can discard the answer on the client's side before it is
// read: a 200 KB body sometimes got "connection reset" instead of 413. And
// that answer went around the middleware, so it lacked the headers of every
// API answer and was neither logged nor counted.
//
// So the answer is built by the same middleware as every answer (request
// id, headers, access log, seckill_http_requests_total, route "unrouted"),
// written here, and then what the client still sends is read and thrown
// away, up to drainLimit bytes or drainFor, before the connection is closed.
// fasthttp's own write of the answer then fails quietly on the closed
// connection.
func (s *Server) answerOversizedBodies() {
	srv := s.app.Server()
	next := srv.ErrorHandler
	srv.ErrorHandler = func(rctx *fasthttp.RequestCtx, err error) {
		switch {
		case errors.Is(err, fasthttp.ErrBodyTooLarge):
			s.answerTooLarge(rctx, rctx.Request.Header.ContentLength(), apperr.Publicf(apperr.ErrTooLarge,
				"the request body is over the limit of %d bytes", s.cfg.BodyLimit))
		case errors.As(err, new(*fasthttp.ErrSmallBuffer)):
			// The same race as a body's: the rest of the head, and any
			// body, is unread when the answer goes out, and how long it is
			// was never read.
			s.answerTooLarge(rctx, -1, apperr.Publicf(apperr.ErrTooLarge,
				"the request's URL and headers are over the limit of %d bytes", headLimit))
		default:
			next(rctx, err)
		}
	}
}

// answerTooLarge writes refusal as the 413 of rctx, drains what is left of a
// request of declared bytes (negative: not known) and closes its connection.
func (s *Server) answerTooLarge(rctx *fasthttp.RequestCtx, declared int, refusal error) {
	c := s.app.AcquireCtx(rctx)
	defer s.app.ReleaseCtx(c)
	s.answerUnrouted(c, refusal)
	rctx.Response.SetConnectionClose()

	conn := rctx.Conn()
	_ = conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	bw := bufio.NewWriter(conn)
	if rctx.Response.Write(bw) == nil && bw.Flush() == nil {
		drain(conn, declared)
	}
	_ = conn.Close()
}

// drain reads and throws away what the client still sends of a body it
// declared as declared bytes (negative: chunked, or not said), within the
// bounds above. Part of the body may already be in fasthttp's buffer, so
// reading stops at the first of: the declared length, drainLimit, the
// client closing, drainFor.
func drain(conn net.Conn, declared int) {
	limit := int64(drainLimit)
	if declared >= 0 && declared < drainLimit {
		limit = int64(declared)
	}
	if conn.SetReadDeadline(time.Now().Add(drainFor)) != nil {
		return
	}
	_, _ = io.CopyN(io.Discard, conn, limit)
}
