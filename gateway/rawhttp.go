package gateway

// What the gateway does below Fiber's router, in fasthttp's own handlers.

import (
	"net"

	"github.com/valyala/fasthttp"
)

// wrapUnknownMethods answers a method Fiber does not know ("FOO", "QUERY")
// like a known method the path does not serve: 405 with Allow on a known
// path, 404 elsewhere, with the API's error body (gateway/openapi.yaml's
// MethodNotAllowed). Fiber's router refuses such a request itself, before
// any middleware, with a text/plain 400; this check sits in front of it, in
// the fasthttp handler that Serve, Listen and App().Test all run, and hands
// the router the request as TRACE, a method Fiber knows and no route
// serves, so that the router's own 405 (and its Allow) answers it.
func (s *Server) wrapUnknownMethods() {
	methods := s.app.Config().RequestMethods
	srv := s.app.Server()
	next := srv.Handler
	srv.Handler = func(rctx *fasthttp.RequestCtx) {
		m := rctx.Method()
		for _, known := range methods {
			if string(m) == known {
				next(rctx)
				return
			}
		}
		rctx.Request.Header.SetMethod(fasthttp.MethodTrace)
		next(rctx)
	}
}

// closeUnusedConnsQuietly closes, without writing a byte, a connection on
// which not one byte of a request arrived before the read timeout.
//
// fasthttp already closes an idle keep-alive connection quietly, but only
// from its second request on: on a connection that has not carried a
// request yet it hands the bare timeout to the error handler, and Fiber's
// answer to that (408, which this gateway's table makes 503 unavailable,
// Connection: close) is written on a connection nobody asked anything on.
// HTTP clients dial such connections all the time: net/http dials one for a
// request that waits, then gives the request an idle connection freed
// meanwhile and parks the new one in its pool. When the 503 lands there, the
// client logs "Unsolicited response received on idle HTTP channel", and a
// client that writes its next request at that moment reads the 503 as its
// answer. A request that timed out halfway (headers begun, body short)
// still gets its error answer: fasthttp wraps those errors, and only a
// read that got nothing at all returns the network error itself.
func (s *Server) closeUnusedConnsQuietly() {
	srv := s.app.Server()
	next := srv.ErrorHandler
	srv.ErrorHandler = func(ctx *fasthttp.RequestCtx, err error) {
		if _, nothingRead := err.(net.Error); nothingRead { //nolint:errorlint // only the bare error means nothing was read
			// Closed before fasthttp writes its answer: the write fails
			// and nothing reaches the client but the FIN.
			_ = ctx.Conn().Close()
			return
		}
		next(ctx, err)
	}
}
