package seckill_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// syncBuffer is a log sink the catalog may write to from any goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestCachedServesTheLastCopyWhilePostgresIsDown: once PostgreSQL cannot be
// reached (here: the store's pool is closed), the buying path keeps the copy
// of a voucher it already has, past its ttl, and logs that once. A voucher it
// never fetched still fails, as unavailable.
func TestCachedServesTheLastCopyWhilePostgresIsDown(t *testing.T) {
	t.Parallel()
	pool := stack.NewDatabase(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const ttl = 5 * time.Millisecond
	catalog := seckill.NewCatalog(pgstore.New(pool), redisstock.New(stack.Redis(t)), ttl, seckill.WithCatalogLogger(log))

	v := validVoucher()
	v.Kind = seckill.KindLimit // not warmed: the package's tests share one Redis, and ids restart per database
	created, err := catalog.Create(t.Context(), v)
	require.NoError(t, err)
	first, err := catalog.Cached(t.Context(), created.ID)
	require.NoError(t, err)

	pool.Close()
	for range 3 {
		time.Sleep(2 * ttl)
		got, err := catalog.Cached(t.Context(), created.ID)
		require.NoError(t, err, "a stale copy beats no answer while the record is down")
		require.Equal(t, first, got)
	}
	require.Equal(t, 1, strings.Count(logs.String(), "serving the last copy"), logs.String())
	require.Contains(t, logs.String(), "level=DEBUG")

	_, err = catalog.Cached(t.Context(), created.ID+1)
	require.ErrorIs(t, err, seckill.ErrUnavailable, "a voucher never fetched has no copy to serve")

	_, err = catalog.List(t.Context())
	require.ErrorIs(t, err, seckill.ErrUnavailable, "the catalog pages still say the record is down")
}
