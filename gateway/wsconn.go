package gateway

// One open socket of GET /api/v1/ws (ws.go has the registry and the
// handshake is in wshandshake.go): the handler's goroutine only reads (client
// pings, pongs, the close) and one writer alone writes (snapshot, pushed
// changes, pongs, heartbeats, the close frame). The reader hands the writer
// what it must answer through channels; the handler returns only after the
// writer has, because contrib/websocket pools the connection as soon as it
// does.

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"runtime/debug"
	"sync/atomic"
	"time"

	fasthttpws "github.com/fasthttp/websocket"
	"github.com/gofiber/contrib/websocket"

	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/seckill/api"
)

// socketEnd is why a socket ends: the close frame to send (code 0: none)
// and, for a drop, the metric's reason.
type socketEnd struct {
	code   int
	text   string
	reason string
}

// socket is one open connection.
type socket struct {
	srv  *Server
	w    *sockets
	conn *websocket.Conn
	ss   *session
	log  *slog.Logger

	// Reader to writer: what the writer owes the client.
	pongs     chan struct{} // {"type":"pong"} frames
	ctrlPongs chan []byte   // pong control frames, for the client's pings
	// readerGone is closed when the reader stops; readEnd is set before.
	readerGone chan struct{}
	readEnd    socketEnd
	// closing is set once the writer sent its close frame: the reader then
	// only waits for the client's answer.
	closing atomic.Bool
	// pingsOut counts the writer's pings not yet answered: their pongs are
	// the server's own asking and cost the client's budget nothing.
	pingsOut atomic.Int64
}

// serveSocket runs one upgraded connection. It is the reader; it starts the
// writer and returns only after the writer has finished.
func (s *Server) serveSocket(conn *websocket.Conn) {
	ss, _ := conn.Locals(socketLocal).(*session)
	if ss == nil || !ss.claim() {
		// The timer freed the subscription: the 101 took half a minute.
		_ = conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseTryAgainLater, "handshake too slow; connect again"), time.Now().Add(closeGrace))
		return
	}
	ss.timer.Stop()
	defer s.ws.release(ss)
	k := &socket{
		srv: s, w: s.ws, conn: conn, ss: ss,
		log:        s.log.With("user_id", ss.userID, "request_id", ss.requestID),
		pongs:      make(chan struct{}, maxPendingPongs),
		ctrlPongs:  make(chan []byte, 1),
		readerGone: make(chan struct{}),
	}
	if !s.ws.add(conn) {
		k.writeClose(socketEnd{code: websocket.CloseGoingAway, text: "server shutting down"})
		return
	}
	defer s.ws.remove(conn)
	start := time.Now()

	writerDone := make(chan socketEnd, 1)
	go func() {
		var end socketEnd
		defer func() {
			if r := recover(); r != nil {
				k.log.Error("panic in WebSocket writer", "panic", r, "stack", string(debug.Stack()))
				cut(conn) // wakes the reader
			}
			writerDone <- end
		}()
		end = k.write()
		k.finish(end)
	}()

	var end socketEnd
	func() {
		defer func() {
			if r := recover(); r != nil {
				k.log.Error("panic in WebSocket reader", "panic", r, "stack", string(debug.Stack()))
				end = socketEnd{code: websocket.CloseInternalServerErr, text: "internal error"}
			}
		}()
		end = k.read()
	}()
	k.readEnd = end
	close(k.readerGone)
	wend := <-writerDone

	// The reader's reason is the cause when it has one (a bad message, a
	// silent client): the writer's failure after it is only the consequence,
	// like a ping that could not be written to a socket already closing.
	if end.reason != "" {
		wend.reason = end.reason
	}
	if wend.reason != "" {
		s.ws.m.dropped.WithLabelValues(wend.reason).Inc()
	}
	k.log.Debug("websocket closed", "duration", time.Since(start), "code", wend.code, "drop", wend.reason)
}

// extend pushes the read deadline: the client was heard from.
func (k *socket) extend() {
	_ = k.conn.SetReadDeadline(time.Now().Add(k.w.live.ReadTimeout))
}

// read consumes the client's messages until the connection ends, and says
// which close the writer should send.
func (k *socket) read() socketEnd {
	conn := k.conn
	conn.SetReadLimit(notify.MaxClientMessage)
	k.extend()
	budget := newMessageBudget(k.w.live.MessageRate, k.w.live.MessageBurst, time.Now())
	// Control frames are read inside ReadMessage, which returns what their
	// handlers return: a flood of them ends the socket like one of pings.
	conn.SetPongHandler(func(string) error {
		if !k.answersPing() && !budget.take(time.Now()) {
			return errFlood
		}
		k.extend()
		return nil
	})
	// The library's default handlers would write from this goroutine.
	conn.SetPingHandler(func(data string) error {
		if !budget.take(time.Now()) {
			return errFlood
		}
		k.extend()
		select {
		case k.ctrlPongs <- []byte(data):
		default: // one pong answers a burst of pings
		}
		return nil
	})
	peerCode := -1
	conn.SetCloseHandler(func(code int, _ string) error {
		peerCode = code
		return nil
	})
	for {
		typ, msg, err := conn.ReadMessage()
		if err != nil {
			var ne net.Error
			switch {
			case peerCode >= 0:
				// Answer the client's close with its code, as RFC 6455 asks.
				code := peerCode
				if code == websocket.CloseNoStatusReceived {
					code = websocket.CloseNormalClosure
				}
				return socketEnd{code: code}
			case k.closing.Load():
				return socketEnd{} // our close went out; the wait is over
			case errors.Is(err, errFlood):
				return floodEnd()
			case errors.Is(err, fasthttpws.ErrReadLimit):
				// contrib/websocket's ErrReadLimit is a copy, never returned.
				// The library already sent 1009.
				return socketEnd{reason: dropProtocol}
			case errors.As(err, &ne) && ne.Timeout():
				return socketEnd{code: websocket.ClosePolicyViolation, text: "nothing heard from the client", reason: dropIdle}
			default:
				return socketEnd{} // the connection is gone
			}
		}
		if k.closing.Load() {
			continue // only the client's close matters now
		}
		if !budget.take(time.Now()) {
			return floodEnd()
		}
		k.extend()
		if typ != websocket.TextMessage {
			return socketEnd{code: websocket.CloseUnsupportedData, text: "text frames only", reason: dropProtocol}
		}
		if _, err := notify.ParseClientMessage(msg); err != nil {
			return socketEnd{code: websocket.ClosePolicyViolation, text: `the only message is {"type":"ping"}`, reason: dropProtocol}
		}
		select {
		case k.pongs <- struct{}{}:
		default: // enough pongs are owed already
		}
	}
}

// answersPing says whether a pong answers one of the writer's pings, and
// counts it answered.
func (k *socket) answersPing() bool {
	for {
		n := k.pingsOut.Load()
		if n <= 0 {
			return false
		}
		if k.pingsOut.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// write is the one writer: the snapshot, then every change, pong and
// heartbeat, until something ends the socket.
func (k *socket) write() socketEnd {
	live := k.w.live
	ping := time.NewTicker(live.PingInterval)
	defer ping.Stop()
	if end, ok := k.sendSnapshot(k.ss.snapshot); !ok {
		return end
	}
	k.ss.snapshot = nil
	sub, pub := k.ss.sub, k.ss.pub
	var aged <-chan time.Time
	if sub == nil && live.AnonymousMaxAge > 0 {
		t := time.NewTimer(live.AnonymousMaxAge - rand.N(live.AnonymousMaxAge/10+1))
		defer t.Stop()
		aged = t.C
	}
	var orderFrames <-chan []byte
	var orderResync <-chan struct{}
	if sub != nil {
		orderFrames, orderResync = sub.C(), sub.Resync()
	}
	for {
		select {
		case f := <-pub.c:
			if err := k.send(f); err != nil {
				return socketEnd{reason: dropWriteFailed}
			}
			k.w.m.vouchers.Inc()
		case <-pub.wake:
			if !pub.resync.Swap(false) {
				continue
			}
			for len(pub.c) > 0 {
				<-pub.c // older than what current() sends
			}
			for _, f := range k.w.feed.current(k.w.ctx) {
				if err := k.send(f); err != nil {
					return socketEnd{reason: dropWriteFailed}
				}
				k.w.m.resyncs.Inc()
			}
		case f, ok := <-orderFrames:
			if !ok {
				return hubEnd(sub.Err())
			}
			took := time.Now()
			if err := k.send(f); err != nil {
				return socketEnd{reason: dropWriteFailed}
			}
			k.w.m.pushes.Inc()
			k.w.m.delay.Observe(time.Since(took).Seconds())
		case <-orderResync:
			// The hub lost Redis for a moment: changes may have been missed.
			ctx, cancel := context.WithTimeout(k.w.ctx, k.srv.cfg.RequestTimeout)
			frames, err := k.srv.socketSnapshot(ctx, k.ss.userID)
			cancel()
			if err != nil {
				if k.w.ctx.Err() != nil {
					return socketEnd{code: websocket.CloseGoingAway, text: "server shutting down"}
				}
				k.log.Warn("websocket resync: cannot read the orders", "err", err)
				return socketEnd{code: websocket.CloseInternalServerErr, text: "please reconnect", reason: dropResyncFailed}
			}
			if end, ok := k.sendSnapshot(frames); !ok {
				return end
			}
		case <-k.pongs:
			if err := k.send([]byte(api.PongFrame)); err != nil {
				return socketEnd{reason: dropWriteFailed}
			}
			k.w.m.pongs.Inc()
		case data := <-k.ctrlPongs:
			if err := k.conn.WriteControl(websocket.PongMessage, data, time.Now().Add(live.WriteTimeout)); err != nil {
				return socketEnd{reason: dropWriteFailed}
			}
		case <-ping.C:
			k.pingsOut.Add(1) // before the write: the pong may come before it returns
			if err := k.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(live.WriteTimeout)); err != nil {
				return socketEnd{reason: dropWriteFailed}
			}
		case <-aged:
			// The page reconnects at once and reads the catalog again.
			return socketEnd{code: websocket.CloseNormalClosure, text: "socket renewed: connect again", reason: dropAged}
		case <-k.readerGone:
			return k.readEnd
		case <-k.w.ctx.Done():
			return socketEnd{code: websocket.CloseGoingAway, text: "server shutting down"}
		}
	}
}

func (k *socket) sendSnapshot(frames [][]byte) (socketEnd, bool) {
	for _, f := range frames {
		if err := k.send(f); err != nil {
			return socketEnd{reason: dropWriteFailed}, false
		}
		k.w.m.snapshots.Inc()
	}
	return socketEnd{}, true
}

// send writes one text frame within WriteTimeout.
func (k *socket) send(frame []byte) error {
	if err := k.conn.SetWriteDeadline(time.Now().Add(k.w.live.WriteTimeout)); err != nil {
		return err
	}
	return k.conn.WriteMessage(websocket.TextMessage, frame)
}

// hubEnd maps why the hub ended the subscription to the close frame.
func hubEnd(err error) socketEnd {
	switch {
	case errors.Is(err, notify.ErrSlowConsumer):
		return socketEnd{code: websocket.CloseTryAgainLater, text: "too slow; reconnect for a fresh snapshot", reason: dropSlow}
	case errors.Is(err, notify.ErrReplaced):
		return socketEnd{code: websocket.ClosePolicyViolation, text: "replaced by a newer connection of the same user", reason: dropReplaced}
	default: // notify.ErrStopped: the instance is going away
		return socketEnd{code: websocket.CloseGoingAway, text: "server shutting down"}
	}
}

// finish sends the close frame, if any, and makes sure the reader stops:
// it waits a moment for the client's answering close, then cuts the
// connection.
func (k *socket) finish(end socketEnd) {
	select {
	case <-k.readerGone:
		// The reader ended it: answer the client's close, or say why.
		k.writeClose(end)
		return
	default:
	}
	k.closing.Store(true)
	if end.code != 0 && k.writeClose(end) == nil {
		t := time.NewTimer(closeGrace)
		defer t.Stop()
		select {
		case <-k.readerGone:
			return
		case <-t.C:
		}
	}
	cut(k.conn)
}

// cut ends the TCP connection under a socket, which wakes its reader.
// contrib/websocket's connection is fasthttp's hijacked one, whose Close does
// nothing (fasthttp closes it once the handler returns): close what is under.
func cut(conn *websocket.Conn) {
	nc := conn.NetConn()
	if u, ok := nc.(interface{ UnsafeConn() net.Conn }); ok {
		nc = u.UnsafeConn()
	}
	_ = nc.Close()
}

func (k *socket) writeClose(end socketEnd) error {
	if end.code == 0 {
		return nil
	}
	return k.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(end.code, end.text), time.Now().Add(closeGrace))
}
