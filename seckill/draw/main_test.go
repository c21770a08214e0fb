package draw_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/beacon"
	"github.com/flashsale/seckill/seckill/draw"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// The package's services: Redis (plain and a cluster), PostgreSQL and a
// private drand network, started once. Each test uses voucher ids no other
// uses.
var stack *stacktest.Stack

func TestMain(m *testing.M) { stacktest.Main(m, &stack) }

var secret = []byte("draw tests' room secret")

// instance is one gateway's view of the draws: its own pool, room, store
// and log.
type instance struct {
	rdb    redis.UniversalClient
	room   *waitroom.Room
	draws  *draw.Store
	record *pgstore.Store
	beacon *beacon.Client
	log    *syncBuffer
}

// syncBuffer is a log's output, written by the store's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newInstance(t testing.TB, rdb redis.UniversalClient, pool *pgxpool.Pool) instance {
	d := stack.Drand(t)
	hash, err := d.ChainHash(context.Background())
	require.NoError(t, err)
	room := waitroom.New(waitroom.Config{Redis: rdb, Secret: secret})
	buf := &syncBuffer{}
	rec, bc := pgstore.New(pool), beacon.New(beacon.Config{URLs: []string{d.URL}, ChainHash: hash})
	return instance{rdb: rdb, room: room, log: buf, record: rec, beacon: bc, draws: draw.New(draw.Config{Redis: rdb, Room: room,
		Record: rec, Beacon: bc, Log: slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})}
}

// drawVoucher is a draw voucher whose entries are open now and whose start
// is in `in`, by Redis's clock, committed to its beacon round.
func drawVoucher(t *testing.T, in instance, id int64, in2 time.Duration) (seckill.Voucher, waitroom.Line) {
	now, err := in.rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	v := seckill.Voucher{ID: id, BeginAt: now.Add(in2), EndAt: now.Add(time.Hour), PerUserLimit: 1, StockTotal: 10, StockLeft: 10,
		WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 1000, PrequeueSeconds: 3600, Mode: seckill.RoomDraw}}
	l, ok := waitroom.LineOf(v)
	require.True(t, ok)
	require.True(t, l.Draw)
	b, err := in.draws.CommitBeacon(context.Background(), v)
	require.NoError(t, err)
	require.True(t, b.RoundAt.After(v.BeginAt), "the round committed to comes after begin_at")
	require.NoError(t, in.draws.Open(context.Background(), l))
	return v, l
}

// untilBegun waits until Redis's clock passes l's start.
func untilBegun(t *testing.T, rdb redis.UniversalClient, l waitroom.Line) {
	for {
		now, err := rdb.Time(context.Background()).Result()
		require.NoError(t, err)
		if !now.Before(l.BeginAt) {
			return
		}
		time.Sleep(l.BeginAt.Sub(now) + time.Millisecond)
	}
}

// drawn makes l's draw, again and again until it is done (its round out).
func drawn(t *testing.T, in instance, l waitroom.Line, stock, limit int64) draw.Outcome {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := in.draws.Draw(context.Background(), l, stock, limit)
		require.NoError(t, err)
		if out.Done {
			return out
		}
		require.True(t, time.Now().Before(deadline), "the draw is not made in time")
		time.Sleep(100 * time.Millisecond)
	}
}

// targetsOf lists l's draw alone, as the catalog would.
func targetsOf(t *testing.T, l waitroom.Line) func(context.Context) ([]draw.Target, error) {
	v := seckill.Voucher{ID: l.VoucherID, BeginAt: l.BeginAt, EndAt: l.EndAt, PerUserLimit: 1,
		WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 1000, PrequeueSeconds: int64(l.BeginAt.Sub(l.Opens()) / time.Second), Mode: seckill.RoomDraw}}
	return func(context.Context) ([]draw.Target, error) {
		return []draw.Target{{Line: l, Voucher: v, Stock: 10, PerUserLimit: 1}}, nil
	}
}
