package chaos

// The two floods of the served system: idle TCP connections that use up the
// gateway's descriptors, and WebSockets without a token from one address.
// Every connection is to loopback, from addresses of 127.0.0.0/8 other than
// the crowd's 127.0.0.1.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/deploy/tools/fleet"
	"github.com/flashsale/seckill/seckill/pause"
)

// Sizes of the floods.
const (
	// fdHeadroom is how many descriptors above those it has open the
	// gateway may open while its limit is lowered: a flood of a few hundred
	// connections uses them up, while the crowd's kept-alive connections go
	// on.
	fdHeadroom = 64
	// fdFloodAddrs × fdFloodPerAddr bounds the descriptor flood: it stops
	// as soon as the gateway says it is out of descriptors.
	fdFloodAddrs   = 8
	fdFloodPerAddr = 100
	// floodSockets is how many sockets without a token the socket flood
	// tries to open from one address (the review's 400).
	floodSockets = 400
	// floodSocketsPerAddr is SECKILL_WS_PER_ADDR on the served system: the
	// shipped default, which fleet.BaseEnv lifts for crowds from loopback.
	floodSocketsPerAddr = 32
)

// exhaustDescriptors lowers the gateway's open-file limit to what it has open
// plus fdHeadroom, floods it with idle connections from several addresses
// until it says it is out of descriptors, holds that for Options.Down, then
// closes the flood and puts the limit back. The gateway must stay up.
func (s *served) exhaustDescriptors(ctx context.Context, _ *crowd, res *Result) error {
	gw := s.gateway
	pid := gw.Pid()
	fds, err := os.ReadDir(filepath.Join("/proc", fmt.Sprint(pid), "fd"))
	if err != nil {
		return fmt.Errorf("chaos: descriptors of the gateway: %w", err)
	}
	before := countInLog(gw.LogPath, outOfFiles)
	old, err := stacktest.SetOpenFileLimit(pid, uint64(len(fds)+fdHeadroom))
	if err != nil {
		return err
	}
	var floods []*stacktest.Flood
	end := func() {
		for _, f := range floods {
			f.Close()
		}
		floods = nil
		_, _ = stacktest.SetOpenFileLimit(pid, old)
	}
	defer end()
	conns := 0
	for i := 0; i < fdFloodAddrs && countInLog(gw.LogPath, outOfFiles) == before; i++ {
		f := stacktest.OpenFlood(ctx, fmt.Sprintf("127.0.0.%d", 10+i), gw.Addr, fdFloodPerAddr, nil)
		floods = append(floods, f)
		conns += len(f.Open)
		_ = pause.For(ctx, 200*time.Millisecond) // for the gateway to get to them
	}
	out := countInLog(gw.LogPath, outOfFiles) > before
	if err := pause.For(ctx, s.r.opts.Down); err != nil {
		return err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("gateway limited to %d open files (%d open), %d idle connections from %d address(es); out of descriptors: %v",
		len(fds)+fdHeadroom, len(fds), conns, len(floods), out))
	if !out {
		res.Problems = append(res.Problems, fmt.Sprintf("%d idle connections never used up the gateway's %d descriptors", conns, len(fds)+fdHeadroom))
	}
	end()
	return s.stayedUp(ctx, res, "the descriptors ran out")
}

// floodSockets opens floodSockets sockets without a token from 127.0.0.2
// while the crowd buys, checks that no more than floodSocketsPerAddr opened
// and that a shopper from another address still gets theirs, holds them for
// Options.Down and closes them.
func (s *served) floodSockets(ctx context.Context, c *crowd, res *Result) error {
	gw := s.gateway
	var open []*websocket.Conn
	defer func() {
		for _, conn := range open {
			_ = conn.Close()
		}
	}()
	statuses := map[int]int{}
	for range floodSockets {
		conn, status := dialSocket(ctx, "127.0.0.2", gw.Addr, "")
		statuses[status]++
		if conn != nil {
			open = append(open, conn)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	token, _, err := c.tokens.Issue(c.firstUser)
	if err != nil {
		return err
	}
	shopper, status := dialSocket(ctx, "127.0.0.3", gw.Addr, token)
	if shopper != nil {
		open = append(open, shopper)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d sockets without a token tried from one address: answers %v; a shopper's socket from another address: %d",
		floodSockets, statuses, status))
	if n := statuses[http.StatusSwitchingProtocols]; n > floodSocketsPerAddr {
		res.Problems = append(res.Problems, fmt.Sprintf("%d sockets opened from one address, past SECKILL_WS_PER_ADDR=%d", n, floodSocketsPerAddr))
	}
	if status != http.StatusSwitchingProtocols {
		res.Problems = append(res.Problems, fmt.Sprintf("a shopper's socket from another address was answered %d during the flood", status))
	}
	if err := pause.For(ctx, s.r.opts.Down); err != nil {
		return err
	}
	for _, conn := range open {
		_ = conn.Close()
	}
	open = nil
	return s.stayedUp(ctx, res, "the socket flood")
}

// stayedUp checks, once a flood is over, that the gateway is still the
// process it was and answers /readyz again within stayUpWithin; a gateway
// that exited is a problem, and is started again so that the crowd can
// finish.
func (s *served) stayedUp(ctx context.Context, res *Result, what string) error {
	gw := s.gateway
	deadline := time.Now().Add(stayUpWithin)
	for !gw.Exited() && !fleet.Ready(ctx, gw.Addr) && time.Now().Before(deadline) {
		if err := pause.For(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	switch {
	case gw.Exited():
		res.Problems = append(res.Problems, fmt.Sprintf("the gateway exited after %s; %s ends with:\n%s", what, gw.LogPath, fleet.Tail(gw.LogPath)))
		return gw.Start(ctx, time.Minute)
	case !fleet.Ready(ctx, gw.Addr):
		res.Problems = append(res.Problems, fmt.Sprintf("the gateway was not ready %v after %s", stayUpWithin, what))
	}
	return nil
}

// stayUpWithin bounds the wait for the gateway to be ready after a flood.
const stayUpWithin = 30 * time.Second

// dialSocket opens GET /api/v1/ws on addr from the loopback address src,
// with token when it is not empty, and returns the socket (nil when
// refused) and the handshake's status (0 when there was no answer).
func dialSocket(ctx context.Context, src, addr, token string) (*websocket.Conn, int) {
	nd := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, NetDialContext: nd.DialContext}
	if token != "" {
		d.Subprotocols = []string{"bearer", token}
	}
	conn, resp, err := d.DialContext(ctx, "ws://"+addr+"/api/v1/ws", nil)
	status := 0
	if resp != nil {
		status = resp.StatusCode
		if resp.Body != nil {
			resp.Body.Close()
		}
	}
	if err != nil {
		return nil, status
	}
	return conn, status
}

// outOfFiles is what the gateway logs when an accept fails for want of a
// descriptor.
const outOfFiles = "accept4: too many open files"

// countInLog counts the lines of the log at path that contain s.
func countInLog(path, s string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}
