package gateway

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/seckill"
)

// publicSockets is how many anonymous sockets TestWSOneChangeOneEncoding
// opens on one real server.
const publicSockets = 2000

// TestWSOneChangeOneEncoding: with thousands of sockets open (no token: the
// public feed), one sell-out costs one JSON encoding and one broadcast, and
// every socket gets those very bytes. It also reports the unit-level push
// delay: from the catalog's change to the last socket reading it.
func TestWSOneChangeOneEncoding(t *testing.T) {
	t.Parallel()
	// Every socket comes from 127.0.0.1: the per-address caps are lifted.
	b := setupWS(t, notify.HubConfig{}, func(c *Config, d *testDeps) {
		c.MaxConnsPerAddr = -1
		d.Live.MaxSocketsPerAddr = -1
	})
	conns := make([]*websocket.Conn, publicSockets)
	var wg sync.WaitGroup
	errs := make(chan error, publicSockets)
	for i := range conns {
		wg.Go(func() {
			d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
			conn, _, err := d.Dial(b.url(""), nil)
			if err != nil {
				errs <- err
				return
			}
			conns[i] = conn
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, msg, err := conn.ReadMessage() // the voucher on sale
			if err == nil && !json.Valid(msg) {
				err = fmt.Errorf("not JSON: %s", msg)
			}
			errs <- err
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	})
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	feed := b.srv.ws.feed
	require.Eventually(t, func() bool {
		feed.mu.RLock()
		defer feed.mu.RUnlock()
		return len(feed.subs) == publicSockets
	}, 10*time.Second, 10*time.Millisecond)

	encodings, pushes := b.srv.catalogCache.encodings.Load(), feed.pushes.Load()
	frames := make([][]byte, publicSockets)
	read := make([]time.Time, publicSockets)
	errs = make(chan error, publicSockets)
	var waiting sync.WaitGroup
	waiting.Add(publicSockets)
	for i, conn := range conns {
		wg.Go(func() {
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			waiting.Done()
			_, msg, err := conn.ReadMessage()
			read[i] = time.Now()
			frames[i] = msg
			errs <- err
		})
	}
	waiting.Wait()
	time.Sleep(100 * time.Millisecond) // every reader blocked in its read
	changed := time.Now()
	b.catalog.update(b.onSale.ID, func(v *seckill.Voucher) { v.StockLeft = 0 })
	require.Eventually(t, func() bool { return feed.pushes.Load() > pushes }, 10*time.Second, 100*time.Microsecond)
	broadcast := time.Since(changed)
	wg.Wait()
	delays := make([]time.Duration, publicSockets)
	for i, at := range read {
		delays[i] = at.Sub(changed)
	}
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, f := range frames {
		require.Equal(t, frames[0], f, "every socket gets the same bytes")
	}
	require.Contains(t, string(frames[0]), `"stock_left":0`)
	require.Contains(t, string(frames[0]), `"state":"sold_out"`)
	require.Equal(t, encodings+1, b.srv.catalogCache.encodings.Load(), "one sell-out, one JSON encoding, for %d sockets", publicSockets)
	require.Equal(t, pushes+1, feed.pushes.Load(), "one broadcast")
	require.Zero(t, feed.resyncs.Load(), "no queue overflowed")
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	t.Logf("sell-out pushed to %d sockets: 1 encoding, broadcast %v after the change; delay to the socket reads: p50 %v, p99 %v, max %v",
		publicSockets, broadcast, delays[len(delays)/2], delays[len(delays)*99/100], delays[len(delays)-1])
}

// TestWSVoucherPushThrottleAndResync: a voucher changing a hundred times in
// a moment is pushed a few times, ending with its last state; a socket whose
// queue fills is resynced with the current frame of every voucher instead of
// growing.
func TestWSVoucherPushThrottleAndResync(t *testing.T) {
	t.Parallel()
	b := setupWS(t, notify.HubConfig{}, func(_ *Config, d *testDeps) { d.Live.VoucherQueue = 1 })
	conn, _, err := b.dial(t, "", nil)
	require.NoError(t, err)
	f, _ := readFrame(t, conn)
	require.Equal(t, "voucher", f.Type)

	feed := b.srv.ws.feed
	pushes := feed.pushes.Load()
	started := time.Now()
	for i := range 100 {
		b.catalog.update(b.onSale.ID, func(v *seckill.Voucher) { v.StockLeft = int64(99 - i) })
		time.Sleep(time.Millisecond)
	}
	var last []byte
	require.Eventually(t, func() bool {
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return false
		}
		last = msg
		return strings.Contains(string(msg), `"stock_left":0`)
	}, 5*time.Second, time.Millisecond, "the last state arrives")
	require.Contains(t, string(last), `"state":"sold_out"`)
	// At most one push per voucherPushGap (plus the first and the last).
	most := int64(time.Since(started)/voucherPushGap) + 2
	require.LessOrEqual(t, feed.pushes.Load()-pushes, most, "a hundred changes in %v", time.Since(started))
	require.Less(t, feed.pushes.Load()-pushes, int64(50))

	// A socket whose queue is full is marked for a resync, never queued
	// further (the queue holds 1 frame here)...
	alone := newVoucherFeed(b.srv, Live{VoucherQueue: 1, MaxPublicSockets: 10}.withDefaults())
	p, err := alone.subscribe(b.srv.ws.ctx, "192.0.2.1", false)
	require.NoError(t, err)
	for range 3 {
		alone.broadcast([]byte(`{"type":"voucher"}`))
	}
	require.Len(t, p.c, 1)
	require.True(t, p.resync.Load())
	require.Equal(t, int64(2), alone.resyncs.Load())

	// ...and its writer drops what is queued and sends the current frame of
	// every voucher not ended.
	feed.mu.RLock()
	for sub := range feed.subs {
		sub.resync.Store(true)
		sub.wake <- struct{}{}
	}
	feed.mu.RUnlock()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, msg, err := conn.ReadMessage()
	require.NoError(t, err)
	require.Contains(t, string(msg), `"state":"sold_out"`, "the current state, again")
	require.Eventually(t, func() bool { return metricValue(t, b.srv.ws.m.resyncs) == 1 }, 5*time.Second, 5*time.Millisecond)
}
