package seckill_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// catalogDB is a fresh database whose voucher ids start at a random point:
// the package's tests share one Redis, where seckill vouchers are warmed by id.
func catalogDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := stack.NewDatabase(t)
	pgstoretest.SpreadVoucherIDs(t, pool) // the tests share one Redis
	return pool
}

// TestCatalogReadsAreCoalesced: a crowd reading the catalog, the same voucher
// and unknown ids all at once costs one read of the record, not one each.
func TestCatalogReadsAreCoalesced(t *testing.T) {
	t.Parallel()
	pool := catalogDB(t)
	stock := redisstock.New(redisstock.Config{Redis: stack.Redis(t)})
	writer := seckill.NewCatalog(seckill.CatalogConfig{Store: pgstore.New(pool), Stock: stock, RecordEvery: time.Hour})
	var ids []int64
	for i := range 5 {
		v := validVoucher()
		v.Title = fmt.Sprint("v", i)
		created, err := writer.Create(t.Context(), v, nil)
		require.NoError(t, err)
		ids = append(ids, created.ID)
	}
	// A long refresh period: only the first read and the lookups may query.
	const gap = 200 * time.Millisecond
	reader := seckill.NewCatalog(seckill.CatalogConfig{Store: pgstore.New(pool), Stock: stock, RecordEvery: time.Hour, LookupGap: gap})
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 3000)
	for i := range 1000 {
		wg.Go(func() {
			list, err := reader.List(t.Context())
			if err == nil && len(list) != 5 {
				err = fmt.Errorf("list of %d vouchers", len(list))
			}
			errs <- err
		})
		wg.Go(func() {
			_, err := reader.Voucher(t.Context(), ids[i%len(ids)])
			errs <- err
		})
		wg.Go(func() {
			_, err := reader.Voucher(t.Context(), ids[len(ids)-1]+1+int64(i)) // never created
			if err == nil {
				err = fmt.Errorf("an unknown id was found")
			} else if !errors.Is(err, apperr.ErrNotFound) {
				err = fmt.Errorf("unknown id: %w", err)
			} else {
				err = nil
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// Lookups of unknown ids start at most once per gap, whatever the
	// machine's speed: the bound is counted from the time the crowd took.
	lookups := int64(time.Since(began)/gap) + 1
	require.LessOrEqual(t, reader.RecordReads(), 1+lookups,
		"3000 reads: one read of the record, and at most one shared lookup of the unknown ids per gap")
}

// TestCatalogSeesAnotherInstancesVoucherAtOnce: a voucher created on another
// instance is found by its id the moment it is asked for (one shared lookup),
// even before any announcement or refresh, and a crowd asking for unknown ids
// at once shares one paced lookup.
func TestCatalogSeesAnotherInstancesVoucherAtOnce(t *testing.T) {
	t.Parallel()
	pool := catalogDB(t)
	stock := redisstock.New(redisstock.Config{Redis: stack.Redis(t)})
	a := seckill.NewCatalog(seckill.CatalogConfig{Store: pgstore.New(pool), Stock: stock, RecordEvery: time.Hour})
	b := seckill.NewCatalog(seckill.CatalogConfig{Store: pgstore.New(pool), Stock: stock, RecordEvery: time.Hour, LookupGap: 50 * time.Millisecond})
	first, err := a.Create(t.Context(), validVoucher(), nil)
	require.NoError(t, err)
	_, err = b.Voucher(t.Context(), first.ID)
	require.NoError(t, err)

	// Created right after b's lookup, within its gap: the next lookup must
	// still find it (a read that began before the commit does not count).
	created, err := a.Create(t.Context(), validVoucher(), nil)
	require.NoError(t, err)
	got, err := b.Voucher(t.Context(), created.ID)
	require.NoError(t, err, "a voucher created elsewhere is found by the lookup")
	require.Equal(t, seckill.StateOnSale, got.State)
	reads := b.RecordReads()
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			_, err := b.Voucher(t.Context(), created.ID+1000+int64(i))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, apperr.ErrNotFound)
	}
	lookups := int64(time.Since(began)/(50*time.Millisecond)) + 1
	require.LessOrEqual(t, b.RecordReads()-reads, lookups, "unknown ids asked together share a paced lookup")
}

// TestCatalogPauseIsKeptAndSeenEverywhere: a pause is stored (a new catalog,
// as after a restart, has it), and an instance that never got an
// announcement sees it by its periodic refresh within a second; the end of
// the pause too.
func TestCatalogPauseIsKeptAndSeenEverywhere(t *testing.T) {
	t.Parallel()
	pool := catalogDB(t)
	stock := redisstock.New(redisstock.Config{Redis: stack.Redis(t)})
	a := seckill.NewCatalog(seckill.CatalogConfig{Store: pgstore.New(pool), Stock: stock, RecordEvery: time.Second})
	other := seckill.NewCatalog(seckill.CatalogConfig{Store: pgstore.New(pool), Stock: stock, RecordEvery: time.Second}) // no announcements reach it
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runCatalog(t, ctx, other)

	v, err := a.Create(t.Context(), validVoucher(), nil)
	require.NoError(t, err)
	_, err = a.SetState(t.Context(), v.ID, "sold_out", nil)
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
	_, err = a.SetState(t.Context(), v.ID+1000, seckill.StatePaused, nil)
	require.ErrorIs(t, err, apperr.ErrNotFound)

	paused, err := a.SetState(t.Context(), v.ID, seckill.StatePaused, nil)
	require.NoError(t, err)
	require.Equal(t, seckill.StatePaused, paused.State)
	require.True(t, paused.Paused)
	require.ErrorIs(t, seckill.CertainRefusal(paused, time.Now(), true), seckill.ErrSalePaused)

	require.Eventually(t, func() bool {
		got, err := other.Voucher(t.Context(), v.ID)
		return err == nil && got.State == seckill.StatePaused
	}, 1500*time.Millisecond, 20*time.Millisecond, "the other instance obeys within a second")

	restarted := seckill.NewCatalog(seckill.CatalogConfig{Store: pgstore.New(pool), Stock: stock, RecordEvery: time.Second})
	got, err := restarted.Voucher(t.Context(), v.ID)
	require.NoError(t, err)
	require.Equal(t, seckill.StatePaused, got.State, "the pause survives a restart")

	resumed, err := a.SetState(t.Context(), v.ID, seckill.StateOnSale, nil)
	require.NoError(t, err)
	require.Equal(t, seckill.StateOnSale, resumed.State)
	require.Eventually(t, func() bool {
		got, err := other.Voucher(t.Context(), v.ID)
		return err == nil && got.State == seckill.StateOnSale
	}, 1500*time.Millisecond, 20*time.Millisecond)
}

// TestCatalogLiveStock: stock taken in Redis shows in the running catalog
// within its stock period, without reading the record, and the last item
// makes it sold_out. Each change is a new snapshot that supersedes the last.
func TestCatalogLiveStock(t *testing.T) {
	t.Parallel()
	pool := catalogDB(t)
	stock := redisstock.New(redisstock.Config{Redis: stack.Redis(t)})
	c := seckill.NewCatalog(seckill.CatalogConfig{Store: pgstore.New(pool), Stock: stock, RecordEvery: time.Hour, StockEvery: 20 * time.Millisecond})
	v := validVoucher()
	v.StockTotal, v.PerUserLimit = 2, 2
	v.BeginAt = time.Now().Add(-time.Minute)
	v, err := seckill.NewCatalog(seckill.CatalogConfig{Store: pgstore.New(pool), Stock: stock, RecordEvery: time.Hour}).Create(t.Context(), v, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runCatalog(t, ctx, c)
	snap, err := c.Snapshot(t.Context())
	require.NoError(t, err)
	reads := c.RecordReads()

	for i := range int64(2) {
		_, err := stock.Reserve(t.Context(), seckill.Reservation{OrderID: 100 + i, VoucherID: v.ID, UserID: 1, Quantity: 1, ReservedAt: time.Now()})
		require.NoError(t, err)
	}
	select {
	case <-snap.Superseded():
	case <-time.After(time.Second):
		t.Fatal("no new snapshot after the stock changed")
	}
	require.Eventually(t, func() bool {
		got, err := c.Voucher(t.Context(), v.ID)
		return err == nil && got.StockLeft == 0 && got.State == seckill.StateSoldOut
	}, time.Second, 10*time.Millisecond)
	require.Equal(t, reads, c.RecordReads(), "live stock comes from Redis, not from the record")
	got, _ := c.Voucher(t.Context(), v.ID)
	require.ErrorIs(t, seckill.CertainRefusal(got, time.Now(), false), seckill.ErrSoldOut)
	require.NoError(t, seckill.CertainRefusal(got, time.Now(), true), "a keyed buy may be a replay: the script decides")
}

// TestStateAt covers every state and the margins of CertainRefusal.
func TestStateAt(t *testing.T) {
	now := time.Now()
	v := validVoucher()
	v.StockLeft = 3
	v.BeginAt, v.EndAt = now.Add(time.Minute), now.Add(time.Hour)
	require.Equal(t, seckill.StateScheduled, v.StateAt(now))
	require.ErrorIs(t, seckill.CertainRefusal(v, now, true), seckill.ErrNotStarted)
	require.NoError(t, seckill.CertainRefusal(v, v.BeginAt.Add(-seckill.ClockMargin/2), false), "within the clock margin the script decides")
	require.Equal(t, seckill.StateOnSale, v.StateAt(v.BeginAt))
	v.Paused = true
	require.Equal(t, seckill.StatePaused, v.StateAt(v.BeginAt))
	require.Equal(t, seckill.StateEnded, v.StateAt(v.EndAt), "an ended sale is ended, paused or not")
	v.Paused = false
	v.StockLeft = 0
	require.Equal(t, seckill.StateSoldOut, v.StateAt(v.BeginAt))
	v.StockLeft = 3
	require.ErrorIs(t, seckill.CertainRefusal(v, v.EndAt.Add(2*seckill.ClockMargin), false), seckill.ErrEnded)
	require.NoError(t, seckill.CertainRefusal(v, v.EndAt.Add(2*seckill.ClockMargin), true), "a replay after the end gets its order")
}

// TestVoucherYears: a window outside the years 2000-9999 in UTC is the
// operator's input error (JSON cannot write year 10000), whatever offset
// brought it there.
func TestVoucherYears(t *testing.T) {
	for _, begin := range []string{"1999-12-31T23:59:59Z", "2000-01-01T00:30:00+01:00", "9999-12-31T23:00:00-05:00"} {
		v := validVoucher()
		at, err := time.Parse(time.RFC3339, begin)
		require.NoError(t, err)
		v.BeginAt, v.EndAt = at, at.Add(time.Hour)
		require.ErrorIs(t, v.Validate(), apperr.ErrInvalidInput, begin)
	}
	v := validVoucher()
	v.BeginAt = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	v.EndAt = time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC)
	require.NoError(t, v.Validate())
}

// runCatalog runs c until ctx ends or the test does, and waits for its
// first read of the record.
func runCatalog(t *testing.T, ctx context.Context, c *seckill.Catalog) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	<-c.Ready()
}
