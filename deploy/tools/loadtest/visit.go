package loadtest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// sourceAddrs hands each visitor, shopper and bot of the crowd an address of
// its own when the system under test is on IPv4 loopback: the whole of
// 127.0.0.0/8 is this machine, so 127.1.0.2, 127.1.0.3, ... reach the same
// server from different addresses, as a real crowd's clients do, and limits
// per client address meet one client each. Elsewhere every client shares
// the machine's address.
type sourceAddrs struct {
	on   bool
	next atomic.Uint32
}

func newSourceAddrs(base string, spread bool) *sourceAddrs {
	s := &sourceAddrs{}
	if !spread {
		return s
	}
	u, err := url.Parse(base)
	if err != nil {
		return s
	}
	ip, err := netip.ParseAddr(u.Hostname())
	s.on = err == nil && ip.Is4() && ip.IsLoopback()
	return s
}

// take returns the next address, or nil for the default one.
func (s *sourceAddrs) take() *net.TCPAddr {
	if !s.on {
		return nil
	}
	n := s.next.Add(1) // 1, 2, ...: 127.1.0.2 onwards, never .0, .1 or .255
	return &net.TCPAddr{IP: net.IPv4(127, byte(1+n/(250*250)), byte(n/250%250), byte(n%250+2))}
}

// dialFrom dials from addr (nil: the default address).
func dialFrom(addr *net.TCPAddr) func(ctx context.Context, network, address string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if addr != nil {
		d.LocalAddr = addr
	}
	return d.DialContext
}

// clientFrom is an HTTP client of conns connections from addr.
func clientFrom(addr *net.TCPAddr, conns int, timeout time.Duration) *http.Client {
	tr := newTransport(conns)
	tr.DialContext = dialFrom(addr)
	return &http.Client{Transport: tr, Timeout: timeout}
}

// PathRun is what loading one route measured.
type PathRun struct {
	Path        string `json:"path"`
	Concurrency int    `json:"concurrency"`
	Requests    int    `json:"requests"`
	// OK counts 2xx answers, NotModified 304s (a revalidated copy),
	// RateLimited 429s, FiveXX 5xx answers, Errors anything else (other
	// statuses, transport failures).
	OK          int `json:"ok"`
	NotModified int `json:"not_modified"`
	RateLimited int `json:"rate_limited"`
	FiveXX      int `json:"five_xx"`
	Errors      int `json:"errors"`
	// ETags counts answers that carried an ETag; CacheControl is the last
	// Cache-Control seen.
	ETags        int     `json:"etags"`
	CacheControl string  `json:"cache_control"`
	ElapsedMS    float64 `json:"elapsed_ms"`
	// ServedPerSecond is 2xx and 304 answers a second.
	ServedPerSecond float64        `json:"served_per_second"`
	Latency         LatencyStats   `json:"latency"`
	ErrorKinds      map[string]int `json:"error_kinds,omitempty"`
}

// visitor is one page of the crowd: its own address and connection, and the
// ETags it was given, sent back with If-None-Match as a browser or a CDN
// revalidates, except for a share fresh of its reads, which come as from a
// new visitor with nothing cached.
type visitor struct {
	client *http.Client
	etags  map[string]string
	fresh  float64
	rng    *rand.Rand
}

func newVisitor(src *sourceAddrs, timeout time.Duration, fresh float64, seed uint64) *visitor {
	return &visitor{client: clientFrom(src.take(), 1, timeout), etags: map[string]string{},
		fresh: fresh, rng: rand.New(rand.NewPCG(seed, 0x7a9e))}
}

// pathTally accumulates one worker's answers; merge folds it into a PathRun.
type pathTally struct {
	ok, notModified, rateLimited, fiveXX, errors, etags int
	cacheControl                                        string
	latencies                                           []time.Duration
	errorKinds                                          map[string]int
}

// get asks for url as this visitor and counts the answer in t.
func (v *visitor) get(ctx context.Context, url string, t *pathTally) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.fail(err.Error())
		return
	}
	if tag := v.etags[url]; tag != "" && (v.fresh == 0 || v.rng.Float64() >= v.fresh) {
		req.Header.Set("If-None-Match", tag)
	}
	t0 := time.Now()
	resp, err := v.client.Do(req)
	if err != nil {
		t.fail(shortError(err))
		return
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	if err != nil {
		t.fail(shortError(err))
		return
	}
	if tag := resp.Header.Get("ETag"); tag != "" {
		t.etags++
		v.etags[url] = tag
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "" {
		t.cacheControl = cc
	}
	switch s := resp.StatusCode; {
	case s >= 200 && s <= 299:
		t.ok++
	case s == http.StatusNotModified:
		t.notModified++
	case s == http.StatusTooManyRequests:
		t.rateLimited++
		return
	case s >= 500:
		t.fiveXX++
		t.fail(fmt.Sprintf("HTTP %d", s))
		return
	default:
		t.fail(fmt.Sprintf("HTTP %d", s))
		return
	}
	t.latencies = append(t.latencies, time.Since(t0))
}

func (t *pathTally) fail(kind string) {
	if t.errorKinds == nil {
		t.errorKinds = map[string]int{}
	}
	t.errorKinds[kind]++
	if len(kind) < 6 || kind[:6] != "HTTP 5" {
		t.errors++
	}
}

func (p *PathRun) merge(t *pathTally) {
	p.OK += t.ok
	p.NotModified += t.notModified
	p.RateLimited += t.rateLimited
	p.FiveXX += t.fiveXX
	p.Errors += t.errors
	p.ETags += t.etags
	if t.cacheControl != "" {
		p.CacheControl = t.cacheControl
	}
	for k, n := range t.errorKinds {
		if p.ErrorKinds == nil {
			p.ErrorKinds = map[string]int{}
		}
		p.ErrorKinds[k] += n
	}
}

// pathLoad gathers the runs of one route: the catalog phase interleaves
// short runs of each route, so that all of them meet the same machine.
type pathLoad struct {
	run     PathRun
	lat     []time.Duration
	elapsed time.Duration
}

// result is the PathRun of every run so far.
func (p *pathLoad) result() PathRun {
	r := p.run
	r.Requests = r.OK + r.NotModified + r.RateLimited + r.FiveXX + r.Errors
	r.ElapsedMS = ms(p.elapsed)
	if p.elapsed > 0 {
		r.ServedPerSecond = float64(r.OK+r.NotModified) / p.elapsed.Seconds()
	}
	r.Latency = latencyStats(p.lat)
	return r
}

// loadPath sends n GETs (n = 0: until stop closes) with the given visitors,
// one worker each, each worker taking the next request as soon as its last
// is answered; urlOf(i) is the URL of request i. With warm, each visitor
// first asks once before the clock starts, to open its connection (and
// learn an ETag), like the sale's warm connections. The answers and the
// time go into into.
func loadPath(ctx context.Context, into *pathLoad, visitors []*visitor, n int, urlOf func(i int) string, stop <-chan struct{}, warm bool) {
	into.run.Concurrency = len(visitors)
	var (
		mu      sync.Mutex
		next    atomic.Int64
		wg      sync.WaitGroup
		ready   sync.WaitGroup
		release = make(chan struct{})
	)
	ready.Add(len(visitors))
	for w, v := range visitors {
		wg.Go(func() {
			if warm {
				var discard pathTally
				v.get(ctx, urlOf(w), &discard)
			}
			ready.Done()
			<-release
			var t pathTally
			// Until stop, but at least once: a machine too busy to start a
			// worker before stop still counts it.
			for first := true; ctx.Err() == nil && (first || !isClosed(stop)); first = false {
				i := int(next.Add(1) - 1)
				if n > 0 && i >= n {
					break
				}
				v.get(ctx, urlOf(i), &t)
			}
			mu.Lock()
			into.run.merge(&t)
			into.lat = append(into.lat, t.latencies...)
			mu.Unlock()
		})
	}
	ready.Wait()
	start := time.Now()
	close(release)
	wg.Wait()
	into.elapsed += time.Since(start)
}

// isClosed reports whether c is closed; a nil channel never is.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
