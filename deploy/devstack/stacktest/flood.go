package stacktest

// Connection floods and descriptor limits, for the tests and the fault
// suite: idle TCP connections from one loopback address (127.0.0.0/8 is all
// loopback on Linux, so each test address is a client of its own), and a
// process's open-file limit lowered from outside, as `prlimit --pid` does.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"golang.org/x/sys/unix"
)

// SetOpenFileLimit sets the soft open-file limit of process pid (its hard
// limit stays, so the old one can be put back) and returns the soft limit
// it had.
func SetOpenFileLimit(pid int, soft uint64) (old uint64, err error) {
	var cur unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &cur); err != nil {
		return 0, fmt.Errorf("fleet: read the open-file limit of %d: %w", pid, err)
	}
	lim := unix.Rlimit{Cur: min(soft, cur.Max), Max: cur.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		return 0, fmt.Errorf("fleet: set the open-file limit of %d: %w", pid, err)
	}
	return cur.Cur, nil
}

// Flood is idle TCP connections from one address that send nothing.
type Flood struct {
	// Open are the connections whose dial completed; the server may have
	// closed some of them since.
	Open []net.Conn
	// Failed counts the dials that failed (a reset: the server closed the
	// connection as soon as it accepted it).
	Failed int
}

// DialFrom dials addr from the loopback address src.
func DialFrom(ctx context.Context, src, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// OpenFlood opens n connections to addr from src, one after the other,
// calling each (when not nil) after every connection with how many were
// tried. It stops early when ctx ends.
func OpenFlood(ctx context.Context, src, addr string, n int, each func(tried int)) *Flood {
	f := &Flood{}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		c, err := DialFrom(ctx, src, addr)
		if err != nil {
			f.Failed++
		} else {
			f.Open = append(f.Open, c)
		}
		if each != nil {
			each(i + 1)
		}
	}
	return f
}

// Close closes every connection of the flood.
func (f *Flood) Close() {
	for _, c := range f.Open {
		_ = c.Close()
	}
	f.Open = nil
}

// Healthz asks GET /healthz on the open connection c (which stays open,
// kept alive) and reports whether it was answered 200 within 5 seconds.
func Healthz(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: seckill\r\n\r\n"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// HealthzFrom asks GET /healthz on addr over a new connection from src.
func HealthzFrom(ctx context.Context, src, addr string) bool {
	c, err := DialFrom(ctx, src, addr)
	if err != nil {
		return false
	}
	defer c.Close()
	return Healthz(c)
}
