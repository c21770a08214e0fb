package gateway

// The listener under Serve: it keeps accepting when the process runs out of
// file descriptors, and it caps the open connections, in all and per client
// address, below the process's descriptor limit.
//
// fasthttp ends Serve on every accept error but a timeout, and
// `accept4: too many open files` is no timeout: without this, a flood of idle
// connections that used up the descriptors ended the whole process, its
// workers and sweeper with it. A descriptor frees up when any connection
// closes, so the error is waited out, as net/http does: 5 ms, doubling up to
// a second. The caps keep a flood from getting there: past MaxConnsPerAddr
// connections of one address, or MaxConns in all, a new connection is closed
// as soon as it is accepted (it never gets a request read), so the
// descriptors of the Redis, PostgreSQL and Kafka pools stay free.

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of the connection caps.
const (
	// DefaultMaxConnsPerAddr caps the open TCP connections of one client
	// address (an IPv6 /56 is one): a browser opens six per host and a
	// WebSocket, so this leaves room for a large office behind one NAT.
	DefaultMaxConnsPerAddr = 256
	// MinConnsAfterReserve is the fewest connections DescriptorCaps accepts
	// to leave the gateway once the reserve is set aside.
	MinConnsAfterReserve = 64
)

// Back-off of Accept after a temporary error (net/http's).
const (
	acceptFirstDelay = 5 * time.Millisecond
	acceptMaxDelay   = time.Second
	// acceptLogEvery bounds the log of accept errors and refused
	// connections: a flood would otherwise write a line per connection.
	acceptLogEvery = 10 * time.Second
)

// Reasons a connection was closed as soon as it was accepted, as the
// seckill_gateway_connections_refused_total label.
const (
	refusedPerAddr = "per_address" // its address had MaxConnsPerAddr open
	refusedTotal   = "total"       // the instance had MaxConns open
)

// DescriptorCaps sizes the gateway's caps from the process's descriptor
// limit: of limit descriptors, reserve are kept for what is not a client
// connection (the Redis, PostgreSQL and Kafka pools, files, pipes); the rest
// is the cap on open connections, and three quarters of it the cap on open
// WebSockets (each is a connection, and plain requests need some too). It is
// an error when that leaves fewer than MinConnsAfterReserve connections.
func DescriptorCaps(limit, reserve uint64) (maxConns, maxSockets int, err error) {
	if limit < reserve+MinConnsAfterReserve {
		return 0, 0, fmt.Errorf("gateway: the open-file limit is %d descriptors, and %d are kept for the Redis, PostgreSQL and Kafka pools and files, "+
			"which leaves fewer than %d for client connections; raise the limit to at least %d (ulimit -n, LimitNOFILE= in systemd, --ulimit nofile= in Docker)",
			limit, reserve, MinConnsAfterReserve, reserve+4*MinConnsAfterReserve)
	}
	avail := min(limit-reserve, 1<<30)
	maxConns = int(avail)
	return maxConns, min(maxConns-maxConns/4, DefaultMaxPublicSockets), nil
}

// connMetrics are the listener's collectors.
type connMetrics struct {
	open    prometheus.Gauge
	refused *prometheus.CounterVec
	retries prometheus.Counter
}

func newConnMetrics(reg prometheus.Registerer) (*connMetrics, error) {
	m := &connMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_gateway_connections",
			Help: "Open TCP connections of the gateway, WebSockets included.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_gateway_connections_refused_total",
			Help: "Connections closed as soon as accepted: per_address (the client address had SECKILL_CONNS_PER_ADDR open), total (the instance was at its cap, sized from the open-file limit).",
		}, []string{"reason"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_gateway_accept_errors_total",
			Help: "Temporary accept errors waited out, such as too many open files (EMFILE): the process is at its open-file limit.",
		}),
	}
	m.refused.WithLabelValues(refusedPerAddr)
	m.refused.WithLabelValues(refusedTotal)
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.open, m.refused, m.retries} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("gateway: register connection metrics: %w", err)
		}
	}
	return m, nil
}

// connListener is the listener Serve hands fasthttp.
type connListener struct {
	net.Listener
	log      *slog.Logger
	m        *connMetrics
	maxConns int                   // 0: no cap
	perAddr  int                   // 0: no cap
	exempt   func(netip.Addr) bool // trusted proxies: their clients share their address
	done     chan struct{}         // closed by Close: a back-off ends
	once     sync.Once

	mu     sync.Mutex
	open   int
	byAddr map[string]int
	// logged is when each kind of trouble was last logged, and skipped how
	// many times it happened since.
	logged  map[string]time.Time
	skipped map[string]int
}

func newConnListener(ln net.Listener, log *slog.Logger, m *connMetrics, maxConns, perAddr int, exempt func(netip.Addr) bool) *connListener {
	return &connListener{Listener: ln, log: log, m: m, maxConns: maxConns, perAddr: perAddr, exempt: exempt,
		done: make(chan struct{}), byAddr: map[string]int{}, logged: map[string]time.Time{}, skipped: map[string]int{}}
}

// Accept returns the next connection within the caps. A temporary error is
// waited out with a back-off; only a closed listener (or another permanent
// error) ends it.
func (l *connListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !temporaryAccept(err) {
				return nil, err
			}
			delay = min(max(2*delay, acceptFirstDelay), acceptMaxDelay)
			l.m.retries.Inc()
			l.warn("accept", "gateway: cannot accept connections; retrying. If it says too many open files, "+
				"the process is at its open-file limit: raise it (ulimit -n, LimitNOFILE= in systemd, --ulimit nofile= in Docker) "+
				"or lower SECKILL_CONNS_PER_ADDR", "err", err, "retry_in", delay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return nil, net.ErrClosed
			}
			continue
		}
		delay = 0
		tc, reason := l.admit(c)
		if tc != nil {
			return tc, nil
		}
		l.m.refused.WithLabelValues(reason).Inc()
		l.warn(reason, "gateway: connection closed at once: over the cap of open connections; "+
			"if these are real clients, raise SECKILL_CONNS_PER_ADDR (per_address) or the open-file limit (total)",
			"reason", reason, "peer", c.RemoteAddr().String(), "max_conns", l.maxConns, "per_address", l.perAddr)
		if t, ok := c.(*net.TCPConn); ok {
			_ = t.SetLinger(0) // nothing to say to it: free the port at once
		}
		_ = c.Close()
	}
}

// admit counts c in, or says which cap it is over.
func (l *connListener) admit(c net.Conn) (net.Conn, string) {
	key := ""
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if a := ta.AddrPort().Addr().Unmap(); l.exempt == nil || !l.exempt(a) {
			key = LimitKey(a)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.maxConns > 0 && l.open >= l.maxConns:
		return nil, refusedTotal
	case key != "" && l.perAddr > 0 && l.byAddr[key] >= l.perAddr:
		return nil, refusedPerAddr
	}
	l.open++
	if key != "" {
		l.byAddr[key]++
	}
	l.m.open.Inc()
	return &trackedConn{Conn: c, l: l, key: key}, ""
}

func (l *connListener) release(key string) {
	l.mu.Lock()
	l.open--
	if key != "" {
		if l.byAddr[key]--; l.byAddr[key] <= 0 {
			delete(l.byAddr, key)
		}
	}
	l.mu.Unlock()
	l.m.open.Dec()
}

// warn logs at most one line of a kind per acceptLogEvery, with how many
// were left out since the last.
func (l *connListener) warn(kind, msg string, args ...any) {
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.logged[kind]) < acceptLogEvery {
		l.skipped[kind]++
		l.mu.Unlock()
		return
	}
	skipped := l.skipped[kind]
	l.logged[kind], l.skipped[kind] = now, 0
	l.mu.Unlock()
	l.log.Warn(msg, append(args, "same_since_last_line", skipped)...)
}

// Close closes the listener and ends a back-off under way.
func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// temporaryAccept reports whether an accept error passes by itself: the
// process or the system out of descriptors or buffers, or a connection that
// went away before it was accepted.
func temporaryAccept(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EPROTO, syscall.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// trackedConn is one counted connection; its first Close uncounts it.
type trackedConn struct {
	net.Conn
	l    *connListener
	key  string
	done atomic.Bool
}

// Close closes the connection and gives its place back.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	if c.done.CompareAndSwap(false, true) {
		c.l.release(c.key)
	}
	return err
}
