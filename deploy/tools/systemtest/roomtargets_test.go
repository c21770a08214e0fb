package systemtest

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// TestRoomAdmitsNoMoreThanTheStockLeft: the catalog in memory still says 5
// left (its stock refresh has not run) when 3 units are bought straight
// from Redis. The admission step that follows lets in only as many shoppers
// as Redis has stock, however many wait and whatever the rate allows: every
// admitted shopper can buy. A later step, with the passes still unused,
// admits nobody more.
func TestRoomAdmitsNoMoreThanTheStockLeft(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, stack.NewDatabaseURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	pgstoretest.SpreadVoucherIDs(t, pool) // the tests share one Redis
	rdb := stack.Client(t, stacktest.RedisShape{})
	stock := redisstock.New(redisstock.Config{Redis: rdb})
	// Neither the record nor the stock is read again during the test: the
	// catalog keeps the figure it read at creation.
	catalog := seckill.NewCatalog(seckill.CatalogConfig{Store: pgstore.New(pool), Stock: stock, RecordEvery: time.Hour, StockEvery: time.Hour})
	const total, bought, waiting = 5, 3, 10
	v, err := catalog.Create(ctx, seckill.Voucher{
		Title: "room voucher", Kind: seckill.KindSeckill, PriceCents: 250,
		StockTotal: total, StockLeft: total, PerUserLimit: 1,
		BeginAt: time.Now().Add(-time.Second), EndAt: time.Now().Add(time.Hour),
		WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 1000},
	}, nil)
	require.NoError(t, err)
	line, ok := waitroom.LineOf(v)
	require.True(t, ok)

	room := waitroom.New(waitroom.Config{Redis: rdb, Secret: []byte("room-targets-test-secret")})
	for range waiting {
		_, err := room.Join(ctx, line, testUser())
		require.NoError(t, err)
	}
	for range bought {
		res, err := stock.Reserve(ctx, seckill.Reservation{OrderID: 1 + rand.Int64N(1<<50), VoucherID: v.ID,
			UserID: testUser(), Quantity: 1, ReservedAt: time.Now()})
		require.NoError(t, err)
		require.Positive(t, res.OrderID)
	}
	snap, err := catalog.Snapshot(ctx)
	require.NoError(t, err)
	stale, ok := snap.Voucher(v.ID)
	require.True(t, ok)
	require.Equal(t, int64(total), stale.StockLeft, "the catalog must still hold the figure from before the buys")
	left, err := stock.StockLeft(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(total-bought), left[v.ID])

	admitter := waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: room, Targets: waitroom.CatalogTargets(catalog, stock, pgstore.New(pool))})
	admitter.Tick(ctx)
	st, err := room.Stats(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(total-bought), st.Admitted, "passes out must be the stock Redis has left")
	require.Equal(t, int64(waiting-(total-bought)), st.Waiting)

	admitter.Tick(ctx)
	st, err = room.Stats(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(total-bought), st.Admitted, "unused passes already cover the stock left")
}
