package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
)

// stockSeen is one voucher message a socket received.
type stockSeen struct {
	at        time.Time
	voucherID string
	stockLeft int64
	state     string
}

// socket is one open page's WebSocket: it only reads, and keeps the voucher
// messages it got with their arrival time.
type socket struct {
	conn   *websocket.Conn
	seen   []stockSeen // written by the reader only, read after it ended
	done   chan struct{}
	closed atomic.Bool // by the server, before the tool closed it
}

// sockets is the crowd's open pages.
type sockets struct {
	list     []*socket
	refused  map[string]int // why a handshake failed, by kind
	withAuth bool           // anonymous sockets were refused; these carry visitor tokens
	messages atomic.Int64   // every text frame received
	vouchers atomic.Int64   // of which {"type":"voucher"}
}

// openSockets opens n sockets to base's /api/v1/ws, a few at a time, each
// from its own address. It tries without a token first, as a visitor who is
// not logged in; when the server refuses that with 401, it opens the rest
// with tokens (tokenOf(i)), as logged-in pages do, and says so.
func openSockets(ctx context.Context, base string, n int, src *sourceAddrs, tokenOf func(i int) (string, error)) *sockets {
	s := &sockets{refused: map[string]int{}}
	if n == 0 {
		return s
	}
	wsURL := strings.Replace(strings.TrimRight(base, "/"), "http", "ws", 1) + "/api/v1/ws"
	var (
		mu   sync.Mutex
		next atomic.Int64
		wg   sync.WaitGroup
		auth atomic.Bool
	)
	// The first socket learns whether anonymous sockets are accepted.
	first := func(i int) {
		conn, err := dialSocket(ctx, wsURL, src, "")
		var he *handshakeError
		if errors.As(err, &he) && he.status == http.StatusUnauthorized {
			auth.Store(true)
			tok, terr := tokenOf(i)
			if terr != nil {
				err = terr
			} else {
				conn, err = dialSocket(ctx, wsURL, src, tok)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			s.refused[err.Error()]++
			return
		}
		s.list = append(s.list, s.read(conn))
	}
	first(0)
	next.Store(1)
	for range min(32, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				tok := ""
				if auth.Load() {
					var err error
					if tok, err = tokenOf(i); err != nil {
						mu.Lock()
						s.refused[err.Error()]++
						mu.Unlock()
						continue
					}
				}
				conn, err := dialSocket(ctx, wsURL, src, tok)
				mu.Lock()
				if err != nil {
					s.refused[err.Error()]++
				} else {
					s.list = append(s.list, s.read(conn))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	s.withAuth = auth.Load()
	return s
}

// handshakeError is a refused WebSocket handshake.
type handshakeError struct {
	status int
	code   string
}

func (e *handshakeError) Error() string {
	if e.code != "" {
		return fmt.Sprintf("HTTP %d %s", e.status, e.code)
	}
	return fmt.Sprintf("HTTP %d", e.status)
}

func dialSocket(ctx context.Context, wsURL string, src *sourceAddrs, token string) (*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, NetDialContext: dialFrom(src.take()),
		ReadBufferSize: 1024, WriteBufferSize: 256}
	u := wsURL
	if token != "" {
		u += "?token=" + url.QueryEscape(token)
	}
	conn, resp, err := d.DialContext(ctx, u, nil)
	if err != nil {
		if resp != nil {
			code := ""
			var b [512]byte
			if n, _ := resp.Body.Read(b[:]); n > 0 {
				code = decodeAPIError("", resp.StatusCode, b[:n]).Code
			}
			resp.Body.Close()
			return nil, &handshakeError{status: resp.StatusCode, code: code}
		}
		return nil, errors.New(shortError(err))
	}
	return conn, nil
}

// read starts conn's reader, which records every voucher message until the
// connection ends.
func (s *sockets) read(conn *websocket.Conn) *socket {
	so := &socket{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(so.done)
		type voucherMessage struct {
			Type    string `json:"type"`
			Voucher struct {
				ID        string `json:"id"`
				StockLeft int64  `json:"stock_left"`
				State     string `json:"state"`
			} `json:"voucher"`
		}
		for {
			var msg voucherMessage
			_, b, err := conn.ReadMessage()
			if err != nil {
				so.closed.Store(true)
				return
			}
			at := time.Now()
			s.messages.Add(1)
			if json.Unmarshal(b, &msg) != nil || msg.Type != "voucher" {
				continue
			}
			s.vouchers.Add(1)
			so.seen = append(so.seen, stockSeen{at: at, voucherID: msg.Voucher.ID, stockLeft: msg.Voucher.StockLeft, state: msg.Voucher.State})
		}
	}()
	return so
}

// close ends every socket and waits for the readers. It returns how many
// the server had closed before.
func (s *sockets) close() int {
	dropped := 0
	for _, so := range s.list {
		if so.closed.Load() {
			dropped++
		}
		_ = so.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
			time.Now().Add(time.Second))
		_ = so.conn.Close()
	}
	for _, so := range s.list {
		<-so.done
	}
	return dropped
}

// sold is one accepted buy as the tool saw it: when its 202 came and the
// units all accepted buys had taken by then.
type sold struct {
	at    time.Time
	units int64 // cumulative, this one included
}

// pushDelays measures, for every socket and every accepted buy, the time
// from the buy's 202 to the first message about voucherID whose stock_left
// accounts for it: at most total − units, the units of every 202 received
// up to this one (those reservations all happened before; others may have
// too, so an earlier message may already show it, which counts as 0). A
// message that never came counts as missed.
func pushDelays(socks []*socket, voucherID string, total int64, buys []sold) (delays []time.Duration, missed int) {
	for _, so := range socks {
		var msgs []stockSeen
		for _, m := range so.seen {
			if m.voucherID == voucherID {
				msgs = append(msgs, m)
			}
		}
		// The units grow with each buy, so the first fitting message never
		// moves back: one pass over both lists.
		j := 0
		for _, b := range buys {
			for j < len(msgs) && msgs[j].stockLeft > total-b.units {
				j++
			}
			if j == len(msgs) {
				missed++
				continue
			}
			delays = append(delays, max(0, msgs[j].at.Sub(b.at)))
		}
	}
	return delays, missed
}

// sellOutDelays is, for every socket, the time from the 202 that took the
// last unit to the first message saying the voucher has none left. seen
// counts the sockets that got it.
func sellOutDelays(socks []*socket, voucherID string, soldOutAt time.Time) (delays []time.Duration, seen int) {
	for _, so := range socks {
		for _, m := range so.seen {
			if m.voucherID == voucherID && (m.stockLeft == 0 || m.state == "sold_out") {
				delays = append(delays, max(0, m.at.Sub(soldOutAt)))
				seen++
				break
			}
		}
	}
	return delays, seen
}
