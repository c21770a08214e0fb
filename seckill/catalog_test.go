package seckill_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/flashsale/seckill/seckill/testlog"
)

// TestCachedServesTheLastCopyWhilePostgresIsDown: once PostgreSQL cannot be
// reached (here: the store's pool is closed), the catalog keeps serving the
// copy it has, past its refresh period, and logs that once. A voucher it
// never saw fails, as unavailable.
func TestCachedServesTheLastCopyWhilePostgresIsDown(t *testing.T) {
	t.Parallel()
	pool := stack.NewDatabase(t)
	var logs testlog.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const ttl = 5 * time.Millisecond
	catalog := seckill.NewCatalog(seckill.CatalogConfig{Store: pgstore.New(pool), Stock: redisstock.New(redisstock.Config{Redis: stack.Redis(t)}), RecordEvery: ttl, Log: log})

	v := validVoucher()
	v.Kind = seckill.KindLimit // not warmed: the package's tests share one Redis, and ids restart per database
	created, err := catalog.Create(t.Context(), v, nil)
	require.NoError(t, err)
	first, err := catalog.Cached(t.Context(), created.ID)
	require.NoError(t, err)

	pool.Close()
	for range 3 {
		time.Sleep(2 * ttl)
		got, err := catalog.Cached(t.Context(), created.ID)
		require.NoError(t, err, "a stale copy beats no answer while the record is down")
		require.True(t, first.Same(got), "%+v\n%+v", first, got)
	}
	require.Equal(t, 1, strings.Count(logs.String(), "serving the last catalog"), logs.String())

	_, err = catalog.Cached(t.Context(), created.ID+1)
	require.ErrorIs(t, err, apperr.ErrUnavailable, "a voucher never fetched has no copy to serve")

	list, err := catalog.List(t.Context())
	require.NoError(t, err, "the catalog pages keep the last catalog while the record is down")
	require.Len(t, list, 1)
}
