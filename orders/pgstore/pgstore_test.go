package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

const payTimeout = 15 * time.Minute

func newStore(t testing.TB) *pgstore.Store {
	t.Helper()
	return pgstore.New(stack.NewDatabase(t))
}

func TestUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)

	id, err := s.CreateUser(ctx, "alice", "hash-a")
	require.NoError(t, err)
	require.Positive(t, id)

	_, err = s.CreateUser(ctx, "alice", "hash-b")
	require.ErrorIs(t, err, apperr.ErrUsernameTaken)

	u, err := s.UserByName(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, pgstore.User{ID: id, Username: "alice", PasswordHash: "hash-a"}, u)

	_, err = s.UserByName(ctx, "bob")
	require.ErrorIs(t, err, apperr.ErrNotFound)
}

func TestCreateVoucher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	in := seckill.Voucher{
		Title: "Half price", Kind: seckill.KindSeckill, PriceCents: 999, StockTotal: 100, PerUserLimit: 2,
		BeginAt: now, EndAt: now.Add(time.Hour), CaptchaRequired: true,
	}

	t.Run("invalid", func(t *testing.T) {
		bad := in
		bad.StockTotal = 0
		_, err := s.CreateVoucher(ctx, bad, nil, nil)
		require.ErrorIs(t, err, apperr.ErrInvalidInput)
	})

	// Redis warming failed: nothing may be left in PostgreSQL.
	warmErr := errors.New("redis down")
	var seen seckill.Voucher
	_, err := s.CreateVoucher(ctx, in, nil, func(_ context.Context, v seckill.Voucher) error {
		seen = v
		return warmErr
	})
	require.ErrorIs(t, err, warmErr)
	require.Positive(t, seen.ID)
	_, err = s.Voucher(ctx, seen.ID)
	require.ErrorIs(t, err, apperr.ErrNotFound)

	v1, err := s.CreateVoucher(ctx, in, nil, func(_ context.Context, v seckill.Voucher) error {
		seen = v
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, seen, v1)
	require.Equal(t, int64(100), v1.StockLeft)
	require.Equal(t, in.BeginAt, v1.BeginAt)
	require.True(t, v1.CaptchaRequired)

	ended := in
	ended.Kind = seckill.KindCommon
	v2, err := s.CreateVoucher(ctx, ended, nil, nil)
	require.NoError(t, err)
	old := in
	old.BeginAt, old.EndAt = now.Add(-2*time.Hour), now.Add(-time.Hour)
	v3, err := s.CreateVoucher(ctx, old, nil, nil)
	require.NoError(t, err)

	got, err := s.Voucher(ctx, v1.ID)
	require.NoError(t, err)
	require.Equal(t, v1, got)

	all, err := s.Vouchers(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{v3.ID, v2.ID, v1.ID}, []int64{all[0].ID, all[1].ID, all[2].ID})

	active, err := s.ActiveSeckillVoucherIDs(ctx, now.Add(-time.Minute))
	require.NoError(t, err)
	require.Equal(t, []int64{v1.ID}, active)
	active, err = s.ActiveSeckillVoucherIDs(ctx, now.Add(-3*time.Hour))
	require.NoError(t, err)
	require.Equal(t, []int64{v3.ID, v1.ID}, active)

	// Shards and a waiting room survive the round trip; a voucher without
	// them reads as one bucket and no room.
	require.Equal(t, 1, got.Shards)
	require.Nil(t, got.WaitingRoom)
	hot := in
	hot.Shards = 8
	hot.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: 500, PrequeueSeconds: 600}
	v4, err := s.CreateVoucher(ctx, hot, nil, nil)
	require.NoError(t, err)
	got, err = s.Voucher(ctx, v4.ID)
	require.NoError(t, err)
	require.Equal(t, 8, got.Shards)
	require.Equal(t, hot.WaitingRoom, got.WaitingRoom)
	require.Equal(t, v4, got)
}

func TestPersistBatchCreates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := pgstoretest.NewVoucher(t, s, 10, 3)

	r1 := pgstoretest.Reservation(v.ID, 1, 2)
	r1.RequestKey = "key-1"
	r2 := pgstoretest.Reservation(v.ID, 2, 1)
	before := time.Now()
	res, err := s.PersistBatch(ctx, []seckill.Reservation{r1, r2}, payTimeout)
	require.NoError(t, err)
	require.Len(t, res.Results, 2)
	for i, r := range []seckill.Reservation{r1, r2} {
		p := res.Results[i]
		require.Equal(t, orders.OutcomeCreated, p.Outcome)
		require.Equal(t, r, p.Reservation)
		require.Equal(t, r.OrderID, p.Order.ID)
		require.Equal(t, orders.StatusCreated, p.Order.Status)
		require.Equal(t, r.Quantity*pgstoretest.PriceCents, p.Order.AmountCents)
		require.Equal(t, r.ReservedAt, p.Order.ReservedAt)
		require.WithinDuration(t, before.Add(payTimeout), p.Order.PayDeadline, 5*time.Second)
		require.False(t, p.Order.ReleasePending)
	}
	require.Equal(t, "key-1", res.Results[0].Order.RequestKey)

	got, err := s.Order(ctx, r1.OrderID)
	require.NoError(t, err)
	require.Equal(t, res.Results[0].Order, got)

	st, err := s.Stats(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(10), st.StockTotal)
	require.Equal(t, int64(7), st.StockLeft)
	require.Equal(t, int64(2), st.Orders[orders.StatusCreated])
	require.Equal(t, int64(3), st.Quantity[orders.StatusCreated])
	require.Zero(t, st.Orders[orders.StatusFailed])

	_, err = s.Order(ctx, 42)
	require.ErrorIs(t, err, apperr.ErrNotFound)
	_, err = s.Stats(ctx, v.ID+1000)
	require.ErrorIs(t, err, apperr.ErrNotFound)
}

func TestPersistBatchDuplicates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := pgstoretest.NewVoucher(t, s, 10, 5)
	rs := []seckill.Reservation{pgstoretest.Reservation(v.ID, 1, 1), pgstoretest.Reservation(v.ID, 2, 2), pgstoretest.Reservation(v.ID, 1, 1)}

	res, err := s.PersistBatch(ctx, rs, payTimeout)
	require.NoError(t, err)
	require.Equal(t, 3, res.Count(orders.OutcomeCreated))

	// The whole batch redelivered, plus one copy inside the batch and one
	// new reservation.
	r4 := pgstoretest.Reservation(v.ID, 3, 1)
	again := append(append([]seckill.Reservation{}, rs...), rs[1], r4)
	res, err = s.PersistBatch(ctx, again, payTimeout)
	require.NoError(t, err)
	for i := range 4 {
		require.Equal(t, orders.OutcomeDuplicate, res.Results[i].Outcome, i)
		require.Equal(t, orders.StatusCreated, res.Results[i].Order.Status)
		require.Equal(t, again[i].OrderID, res.Results[i].Order.ID)
	}
	require.Equal(t, orders.OutcomeCreated, res.Results[4].Outcome)

	st, err := s.Stats(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(10-5), st.StockLeft)
	require.Equal(t, int64(4), st.Orders[orders.StatusCreated])

	// A copy inside one fresh batch creates once.
	r5 := pgstoretest.Reservation(v.ID, 4, 1)
	res, err = s.PersistBatch(ctx, []seckill.Reservation{r5, r5}, payTimeout)
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeCreated, res.Results[0].Outcome)
	require.Equal(t, orders.OutcomeDuplicate, res.Results[1].Outcome)
	st, err = s.Stats(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(4), st.StockLeft)
}

func TestPersistBatchOneBad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := pgstoretest.NewVoucher(t, s, 10, 5)
	bad := pgstoretest.Reservation(v.ID+1000, 9, 1) // the voucher PostgreSQL never got
	bad.RequestKey = "k"
	rs := []seckill.Reservation{pgstoretest.Reservation(v.ID, 1, 1), bad, pgstoretest.Reservation(v.ID, 2, 1)}

	res, err := s.PersistBatch(ctx, rs, payTimeout)
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeCreated, res.Results[0].Outcome)
	require.Equal(t, orders.OutcomeCreated, res.Results[2].Outcome)
	failed := res.Results[1]
	require.Equal(t, orders.OutcomeFailed, failed.Outcome)
	require.ErrorIs(t, failed.Reason, apperr.ErrNotFound)
	require.Equal(t, orders.StatusFailed, failed.Order.Status)
	require.True(t, failed.Order.ReleasePending)
	require.True(t, failed.Order.PayDeadline.IsZero())

	// Durable: readable, and a redelivery is a duplicate of the failure.
	got, err := s.Order(ctx, bad.OrderID)
	require.NoError(t, err)
	require.Equal(t, failed.Order, got)
	res, err = s.PersistBatch(ctx, rs, payTimeout)
	require.NoError(t, err)
	require.Equal(t, 3, res.Count(orders.OutcomeDuplicate))
	require.Equal(t, orders.StatusFailed, res.Results[1].Order.Status)

	require.NoError(t, s.ClearReleasePending(ctx, []int64{bad.OrderID, 12345}))
	got, err = s.Order(ctx, bad.OrderID)
	require.NoError(t, err)
	require.False(t, got.ReleasePending)

	st, err := s.Stats(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(8), st.StockLeft)

	// Malformed: failed without touching anything.
	res, err = s.PersistBatch(ctx, []seckill.Reservation{pgstoretest.Reservation(v.ID, 1, 0), pgstoretest.Reservation(v.ID, 3, 1)}, payTimeout)
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeFailed, res.Results[0].Outcome)
	require.ErrorIs(t, res.Results[0].Reason, apperr.ErrInvalidInput)
	require.Equal(t, orders.OutcomeCreated, res.Results[1].Outcome)
}

// Redis bypassed: PostgreSQL alone keeps stock >= 0 and the per-user limit.
func TestPersistBatchStockAndLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)

	t.Run("stock", func(t *testing.T) {
		v := pgstoretest.NewVoucher(t, s, 5, 10)
		var rs []seckill.Reservation
		for u := range int64(8) {
			rs = append(rs, pgstoretest.Reservation(v.ID, u+1, 1))
		}
		rs = append(rs, pgstoretest.Reservation(v.ID, 100, 2))
		res, err := s.PersistBatch(ctx, rs, payTimeout)
		require.NoError(t, err)
		require.Equal(t, 5, res.Count(orders.OutcomeCreated))
		require.Equal(t, 4, res.Count(orders.OutcomeFailed))
		for i, p := range res.Results {
			if i < 5 {
				require.Equal(t, orders.OutcomeCreated, p.Outcome, "first come first served")
			} else {
				require.ErrorIs(t, p.Reason, seckill.ErrSoldOut)
			}
		}
		st, err := s.Stats(ctx, v.ID)
		require.NoError(t, err)
		require.Zero(t, st.StockLeft)
		require.Equal(t, int64(5), st.Quantity[orders.StatusCreated])
		require.Equal(t, int64(4), st.Orders[orders.StatusFailed])
	})

	t.Run("limit", func(t *testing.T) {
		v := pgstoretest.NewVoucher(t, s, 100, 2)
		rs := []seckill.Reservation{
			pgstoretest.Reservation(v.ID, 1, 1), pgstoretest.Reservation(v.ID, 1, 1), pgstoretest.Reservation(v.ID, 1, 1), // third passes the limit
			pgstoretest.Reservation(v.ID, 2, 3), // more than the limit at once
			pgstoretest.Reservation(v.ID, 3, 2),
		}
		res, err := s.PersistBatch(ctx, rs, payTimeout)
		require.NoError(t, err)
		want := []orders.Outcome{orders.OutcomeCreated, orders.OutcomeCreated, orders.OutcomeFailed, orders.OutcomeFailed, orders.OutcomeCreated}
		for i, p := range res.Results {
			require.Equal(t, want[i], p.Outcome, i)
			if p.Outcome == orders.OutcomeFailed {
				require.ErrorIs(t, p.Reason, seckill.ErrLimitExceeded)
			}
		}
		// A later batch still sees the counts.
		res, err = s.PersistBatch(ctx, []seckill.Reservation{pgstoretest.Reservation(v.ID, 3, 1), pgstoretest.Reservation(v.ID, 2, 2)}, payTimeout)
		require.NoError(t, err)
		require.Equal(t, orders.OutcomeFailed, res.Results[0].Outcome)
		require.Equal(t, orders.OutcomeCreated, res.Results[1].Outcome)
		st, err := s.Stats(ctx, v.ID)
		require.NoError(t, err)
		require.Equal(t, int64(100-6), st.StockLeft)
	})

	t.Run("request key", func(t *testing.T) {
		v := pgstoretest.NewVoucher(t, s, 100, 5)
		a, b := pgstoretest.Reservation(v.ID, 1, 1), pgstoretest.Reservation(v.ID, 1, 1)
		a.RequestKey, b.RequestKey = "same", "same"
		res, err := s.PersistBatch(ctx, []seckill.Reservation{a, b}, payTimeout)
		require.NoError(t, err)
		require.Equal(t, orders.OutcomeCreated, res.Results[0].Outcome)
		require.Equal(t, orders.OutcomeFailed, res.Results[1].Outcome)
		require.ErrorIs(t, res.Results[1].Reason, apperr.ErrConflict)
		require.Empty(t, res.Results[1].Order.RequestKey)
	})
}

func TestOrdersByUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := pgstoretest.NewVoucher(t, s, 100, 10)
	var rs []seckill.Reservation
	for range 5 {
		rs = append(rs, pgstoretest.Reservation(v.ID, 7, 1))
	}
	rs = append(rs, pgstoretest.Reservation(v.ID, 8, 1))
	_, err := s.PersistBatch(ctx, rs, payTimeout)
	require.NoError(t, err)

	list, err := s.OrdersByUser(ctx, 7, 3)
	require.NoError(t, err)
	require.Len(t, list, 3)
	require.Equal(t, []int64{rs[4].OrderID, rs[3].OrderID, rs[2].OrderID}, []int64{list[0].ID, list[1].ID, list[2].ID})
	list, err = s.OrdersByUser(ctx, 9, 3)
	require.NoError(t, err)
	require.Empty(t, list)
}

// Several workers persisting at once against one hot stock row: the stock is
// exact, the limit holds, nothing is created twice.
func TestPersistBatchConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	const stock, users, workers, batch = 300, 400, 6, 25
	v := pgstoretest.NewVoucher(t, s, stock, 1)
	other := pgstoretest.NewVoucher(t, s, stock, 1)

	// Every user asks twice (limit 1), for both vouchers, and every message
	// is delivered to two workers.
	var all []seckill.Reservation
	for u := range int64(users) {
		all = append(all, pgstoretest.Reservation(v.ID, u+1, 1), pgstoretest.Reservation(v.ID, u+1, 1), pgstoretest.Reservation(other.ID, u+1, 1))
	}
	work := make(chan []seckill.Reservation)
	var created atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers) // a worker that gives up stops
	for range workers {
		wg.Go(func() {
			for b := range work {
				for attempt := 1; ; attempt++ {
					res, err := s.PersistBatch(ctx, b, payTimeout)
					if err != nil && attempt < 10 {
						// Transient (a deadlock or serialization failure
						// would be one): retried like the consumer does.
						t.Logf("retrying batch: %v", err)
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					created.Add(int64(res.Count(orders.OutcomeCreated)))
					break
				}
			}
		})
	}
	for round := range 2 {
		for i := 0; i < len(all); i += batch {
			j := min(i+batch, len(all))
			if round == 1 {
				// The redelivery comes in other batch boundaries.
				i2 := min(i+batch/2, len(all))
				work <- all[i:i2]
				work <- all[i2:j]
				continue
			}
			work <- all[i:j]
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	require.Equal(t, int64(2*stock), created.Load())
	for _, id := range []int64{v.ID, other.ID} {
		st, err := s.Stats(ctx, id)
		require.NoError(t, err)
		require.Zero(t, st.StockLeft)
		require.Equal(t, int64(stock), st.Quantity[orders.StatusCreated])
	}
	var maxPerUser int64
	require.NoError(t, s.Pool().QueryRow(ctx,
		`SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM orders WHERE status = 'created' GROUP BY voucher_id, user_id) c`).
		Scan(&maxPerUser))
	require.Equal(t, int64(1), maxPerUser)
	var buyers int64
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT coalesce(sum(quantity), 0) FROM voucher_buyers`).Scan(&buyers))
	require.Equal(t, int64(2*stock), buyers)
}

func BenchmarkPersistBatch(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	v := pgstoretest.NewVoucher(b, s, seckill.MaxStock, seckill.MaxPerUserLimit)
	const size = 100
	user := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		rs := make([]seckill.Reservation, size)
		for i := range rs {
			user++
			rs[i] = pgstoretest.Reservation(v.ID, user, 1)
		}
		res, err := s.PersistBatch(ctx, rs, payTimeout)
		if err != nil {
			b.Fatal(err)
		}
		if n := res.Count(orders.OutcomeCreated); n != size {
			b.Fatalf("created %d of %d", n, size)
		}
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "orders/s")
}
