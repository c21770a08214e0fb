package seckill_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/orderid"
	"github.com/flashsale/seckill/seckill/redisstock"
)

var stack *stacktest.Stack

func TestMain(m *testing.M) { stacktest.Main(m, &stack) }

func validVoucher() seckill.Voucher {
	now := time.Now()
	return seckill.Voucher{
		Title: "t", Kind: seckill.KindSeckill, PriceCents: 100, StockTotal: 10, PerUserLimit: 1,
		BeginAt: now, EndAt: now.Add(time.Hour),
	}
}

func TestVoucherValidate(t *testing.T) {
	require.NoError(t, validVoucher().Validate())
	for _, tc := range []struct {
		name   string
		mutate func(*seckill.Voucher)
		says   string // what the operator reads
	}{
		{"no title", func(v *seckill.Voucher) { v.Title = "" }, "title must be 1 to"},
		{"tab in title", func(v *seckill.Voucher) { v.Title = "a\tb" }, "control characters"},
		{"unknown kind", func(v *seckill.Voucher) { v.Kind = "auction" }, "kind must be"},
		{"negative price", func(v *seckill.Voucher) { v.PriceCents = -1 }, "price_cents must be"},
		{"no stock", func(v *seckill.Voucher) { v.StockTotal = 0 }, "stock must be"},
		{"huge stock", func(v *seckill.Voucher) { v.StockTotal = seckill.MaxStock + 1 }, "stock must be"},
		{"no limit", func(v *seckill.Voucher) { v.PerUserLimit = 0 }, "per_user_limit must be"},
		{"no begin", func(v *seckill.Voucher) { v.BeginAt = time.Time{} }, "begin_at is required"},
		{"ends first", func(v *seckill.Voucher) { v.EndAt = v.BeginAt }, "end_at must be after begin_at"},
		{"negative shards", func(v *seckill.Voucher) { v.Shards = -1 }, "shards must be 1 to 64"},
		{"too many shards", func(v *seckill.Voucher) { v.Shards = seckill.MaxShards + 1 }, "shards must be 1 to 64"},
		{"shards on a limit voucher", func(v *seckill.Voucher) { v.Kind, v.Shards = seckill.KindLimit, 2 }, "seckill vouchers only"},
		{"room admits none", func(v *seckill.Voucher) { v.WaitingRoom = &seckill.WaitingRoom{} }, "admit_per_second must be 1 to"},
		{"room admits too many", func(v *seckill.Voucher) {
			v.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: seckill.MaxAdmitPerSecond + 1}
		}, "admit_per_second must be 1 to"},
		{"room opens after", func(v *seckill.Voucher) {
			v.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: 10, PrequeueSeconds: -1}
		}, "prequeue_seconds must be 0 to"},
		{"room opens too early", func(v *seckill.Voucher) {
			v.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: 10, PrequeueSeconds: seckill.MaxPrequeueSeconds + 1}
		}, "prequeue_seconds must be 0 to"},
		{"adaptive room without a target", func(v *seckill.Voucher) {
			v.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: 10, Adaptive: &seckill.Adaptive{MinPerSecond: 1, MaxPerSecond: 20}}
		}, "waiting_room.adaptive.target_p99_ms must be 1 to"},
		{"adaptive room with no minimum", func(v *seckill.Voucher) {
			v.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: 10, Adaptive: &seckill.Adaptive{TargetP99Ms: 50, MaxPerSecond: 20}}
		}, "waiting_room.adaptive.min_per_second must be 1 to"},
		{"adaptive room's bounds crossed", func(v *seckill.Voucher) {
			v.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: 10, Adaptive: &seckill.Adaptive{TargetP99Ms: 50, MinPerSecond: 30, MaxPerSecond: 20}}
		}, "waiting_room.adaptive.max_per_second must be min_per_second to"},
		{"adaptive room starting outside its bounds", func(v *seckill.Voucher) {
			v.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: 100, Adaptive: &seckill.Adaptive{TargetP99Ms: 50, MinPerSecond: 1, MaxPerSecond: 20}}
		}, "waiting_room.admit_per_second must be within waiting_room.adaptive's"},
		{"room on a common voucher", func(v *seckill.Voucher) {
			v.Kind, v.WaitingRoom = seckill.KindCommon, &seckill.WaitingRoom{AdmitPerSecond: 10}
		}, "waiting_room is for seckill vouchers only"},
	} {
		v := validVoucher()
		tc.mutate(&v)
		requirePublic(t, v.Validate(), apperr.ErrInvalidInput, tc.says, tc.name)
	}
}

// An operator learns of every bad field at once, each by its JSON pointer.
func TestVoucherValidateNamesEveryField(t *testing.T) {
	v := validVoucher()
	v.Title, v.PriceCents, v.EndAt = "", -5, time.Time{}
	v.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: 0, PrequeueSeconds: -1, Mode: "raffle",
		Adaptive: &seckill.Adaptive{TargetP99Ms: 0, MinPerSecond: 1, MaxPerSecond: 5}}
	err := v.Validate()
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
	var got []string
	for _, f := range apperr.FieldsOf(err) {
		require.NotEmpty(t, f.Reason, f.Field)
		got = append(got, f.Field)
	}
	require.Equal(t, []string{"/title", "/price_cents", "/end_at", "/waiting_room/admit_per_second",
		"/waiting_room/prequeue_seconds", "/waiting_room/mode", "/waiting_room/adaptive/target_p99_ms"}, got)
	requirePublic(t, err, apperr.ErrInvalidInput, "title must be 1 to", "the message keeps the first reason")
}

func TestVoucherShardsAndRoomAccepted(t *testing.T) {
	v := validVoucher()
	v.Kind = seckill.KindSeckill
	require.Equal(t, 1, v.ShardCount(), "unset shards mean one bucket")
	v.Shards = seckill.MaxShards
	v.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: seckill.MaxAdmitPerSecond, PrequeueSeconds: seckill.MaxPrequeueSeconds}
	require.NoError(t, v.Validate())
	require.Equal(t, seckill.MaxShards, v.ShardCount())
}

func TestBuyRequestValidate(t *testing.T) {
	ok := seckill.BuyRequest{VoucherID: 1, UserID: 2, Quantity: 1}
	require.NoError(t, ok.Validate())
	for _, tc := range []struct {
		name string
		req  seckill.BuyRequest
		kind error
		says string
	}{
		{"voucher", seckill.BuyRequest{VoucherID: 0, UserID: 2, Quantity: 1}, apperr.ErrInvalidInput, "bad voucher id"},
		{"quantity", seckill.BuyRequest{VoucherID: 1, UserID: 2, Quantity: seckill.MaxQuantity + 1}, apperr.ErrInvalidInput, "quantity must be 1 to"},
		{"key", seckill.BuyRequest{VoucherID: 1, UserID: 2, Quantity: 1, RequestKey: string(make([]byte, seckill.MaxRequestKey+1))}, apperr.ErrInvalidInput, "Idempotency-Key is longer"},
		{"user", seckill.BuyRequest{VoucherID: 1, Quantity: 1}, apperr.ErrUnauthenticated, "bad user id"},
	} {
		requirePublic(t, tc.req.Validate(), tc.kind, tc.says, tc.name)
	}
}

func TestReservationValidate(t *testing.T) {
	ok := seckill.Reservation{OrderID: 9, VoucherID: 1, UserID: 2, Quantity: 1}
	require.NoError(t, ok.Validate())
	for _, tc := range []struct {
		name   string
		change func(*seckill.Reservation)
		says   string
	}{
		{"order", func(r *seckill.Reservation) { r.OrderID = 0 }, "bad order id"},
		{"voucher", func(r *seckill.Reservation) { r.VoucherID = -1 }, "bad voucher id"},
		{"user", func(r *seckill.Reservation) { r.UserID = 0 }, "bad user id"},
		{"no quantity", func(r *seckill.Reservation) { r.Quantity = 0 }, "quantity must be 1 to"},
		{"too many", func(r *seckill.Reservation) { r.Quantity = seckill.MaxQuantity + 1 }, "quantity must be 1 to"},
		{"key", func(r *seckill.Reservation) { r.RequestKey = string(make([]byte, seckill.MaxRequestKey+1)) }, "Idempotency-Key is longer"},
	} {
		r := ok
		tc.change(&r)
		requirePublic(t, r.Validate(), apperr.ErrInvalidInput, tc.says, tc.name)
	}
}

// requirePublic checks that err is of kind and carries a sentence for the
// caller that contains says: the gateway shows that sentence as it is.
func requirePublic(t *testing.T, err error, kind error, says, name string) {
	t.Helper()
	require.ErrorIs(t, err, kind, name)
	var pe *apperr.PublicError
	require.ErrorAs(t, err, &pe, name)
	require.Contains(t, pe.PublicMessage(), says, name)
	require.NotContains(t, pe.PublicMessage(), kind.Error()+":", "%s: the sentence is not prefixed with the kind", name)
}

func TestPublicError(t *testing.T) {
	cause := errors.New("token is expired")
	for _, tc := range []struct {
		name      string
		err       error
		text      string
		kind      error
		hasCause  bool
		toShopper string
	}{
		{"plain", apperr.Public(apperr.ErrForbidden, "not yours"), "forbidden: not yours", apperr.ErrForbidden, false, "not yours"},
		{"formatted", apperr.Invalidf("quantity must be 1 to %d", 100), "invalid input: quantity must be 1 to 100", apperr.ErrInvalidInput, false, "quantity must be 1 to 100"},
		{"with cause", &apperr.PublicError{Kind: apperr.ErrUnauthenticated, Message: "sign in again", Cause: cause},
			"unauthenticated: sign in again: token is expired", apperr.ErrUnauthenticated, true, "sign in again"},
	} {
		require.EqualError(t, tc.err, tc.text, tc.name)
		require.ErrorIs(t, tc.err, tc.kind, tc.name)
		require.Equal(t, tc.hasCause, errors.Is(tc.err, cause), tc.name)
		var pe *apperr.PublicError
		require.ErrorAs(t, fmt.Errorf("wrapped: %w", tc.err), &pe, tc.name)
		require.Equal(t, tc.toShopper, pe.PublicMessage(), tc.name)
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// onSale warms a fresh voucher id in the real Redis.
func onSale(t *testing.T, stock *redisstock.Store, total int64) seckill.Voucher {
	t.Helper()
	v := validVoucher()
	v.ID = 1 + rand.Int64N(1<<40)
	v.StockTotal, v.StockLeft, v.PerUserLimit = total, total, 5
	v.BeginAt = time.Now().Add(-time.Minute)
	require.NoError(t, stock.Warm(t.Context(), v))
	return v
}

// TestBuyReleasesWhatTheQueueRefused: when Kafka cannot take the message, the
// shopper gets 503 and the hold is gone, request key included, so a retry is
// a fresh attempt and nothing is held by a message that does not exist.
func TestBuyReleasesWhatTheQueueRefused(t *testing.T) {
	rdb := stack.Redis(t)
	stock := redisstock.New(redisstock.Config{Redis: rdb})
	v := onSale(t, stock, 3)
	ids, err := orderid.New(1)
	require.NoError(t, err)

	// A topic the broker does not have: every write fails.
	refusing, err := kafkaq.NewProducer(stack.KafkaBrokers, "no-such-topic-"+time.Now().Format("150405.000000"), discard())
	require.NoError(t, err)
	t.Cleanup(func() { refusing.Close() })
	buyer := seckill.NewBuyer(seckill.BuyerConfig{Stock: stock, Queue: refusing, IDs: ids, Log: discard()})

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	_, err = buyer.Buy(ctx, seckill.BuyRequest{VoucherID: v.ID, UserID: 7, Quantity: 2, RequestKey: "k1"})
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	require.NotErrorIs(t, err, seckill.ErrOutcomeUnknown, "nothing is held: the caller may give back what the attempt spent")
	snap, err := stock.Snapshot(t.Context(), v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(3), snap.Left, "the refused reservation gave its stock back")
	require.True(t, snap.Balanced())

	// With a working queue the same key is a new attempt that succeeds.
	topic := stack.NewTopic(t, 2)
	working, err := kafkaq.NewProducer(stack.KafkaBrokers, topic, discard())
	require.NoError(t, err)
	t.Cleanup(func() { working.Close() })
	res, err := seckill.NewBuyer(seckill.BuyerConfig{Stock: stock, Queue: working, IDs: ids, Log: discard()}).Buy(t.Context(),
		seckill.BuyRequest{VoucherID: v.ID, UserID: 7, Quantity: 2, RequestKey: "k1"})
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, int64(1), res.StockLeft)
}

// TestCatalogCreateNeverDisagrees: a seckill voucher exists in PostgreSQL
// only if Redis has it on sale, and the other way round.
func TestCatalogCreateNeverDisagrees(t *testing.T) {
	pool := stack.NewDatabase(t)
	store := pgstore.New(pool)
	rdb := stack.Redis(t)
	catalog := seckill.NewCatalog(seckill.CatalogConfig{Store: store, Stock: redisstock.New(redisstock.Config{Redis: rdb})})

	v, err := catalog.Create(t.Context(), validVoucher(), nil)
	require.NoError(t, err)
	got, err := catalog.Get(t.Context(), v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(10), got.StockLeft)

	// Redis unreachable: the operator is told, and PostgreSQL has nothing.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	broken := seckill.NewCatalog(seckill.CatalogConfig{Store: store, Stock: redisstock.New(redisstock.Config{Redis: dead})})
	_, err = broken.Create(t.Context(), validVoucher(), nil)
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	all, err := store.Vouchers(t.Context())
	require.NoError(t, err)
	require.Len(t, all, 1, "a voucher Redis could not put on sale is not stored")

	// Cached serves the buying path without PostgreSQL once fetched.
	c1, err := catalog.Cached(t.Context(), v.ID)
	require.NoError(t, err)
	require.Equal(t, v.ID, c1.ID)
	_, err = catalog.Cached(t.Context(), v.ID+1)
	require.True(t, errors.Is(err, apperr.ErrNotFound))
}

// TestBuyKeepsTheHoldWhenTheWriteIsUnclear: the broker takes the message but
// answers too late. The message may be written, so the hold stays (the
// workers or the reconciler end it). A retry of the same key never holds
// stock twice: while the order's fate is undecided it is refused 503 (a
// 202 could be let down by the reconciler, seckill/RULES.md), and once a
// worker persisted the order it gets that order.
func TestBuyKeepsTheHoldWhenTheWriteIsUnclear(t *testing.T) {
	rdb := stack.Redis(t)
	stock := redisstock.New(redisstock.Config{Redis: rdb})
	v := onSale(t, stock, 3)
	ids, err := orderid.New(2)
	require.NoError(t, err)
	topic := stack.NewTopic(t, 1)
	producer, err := kafkaq.NewProducer(stack.KafkaBrokers, topic, discard())
	require.NoError(t, err)
	t.Cleanup(func() { producer.Close() })
	buyer := seckill.NewBuyer(seckill.BuyerConfig{Stock: stock, Queue: producer, IDs: ids, Log: discard()})

	// The broker sits on the next produce request for a second and a half.
	stack.DelayProduce(t, topic, 1500*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	req := seckill.BuyRequest{VoucherID: v.ID, UserID: 9, Quantity: 1, RequestKey: "slow"}
	_, err = buyer.Buy(ctx, req)
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	require.NotErrorIs(t, err, seckill.ErrNotQueued)
	require.ErrorIs(t, err, seckill.ErrOutcomeUnknown, "the caller is told the order may still be made")

	snap, err := stock.Snapshot(t.Context(), v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), snap.Held, "the hold stays while its message may land")
	require.Equal(t, int64(1), snap.Pending)
	_, err = buyer.Buy(t.Context(), req)
	require.ErrorIs(t, err, seckill.ErrUndecided, "no 202 for an order whose fate is unknown")
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	require.ErrorIs(t, err, seckill.ErrOutcomeUnknown, "the retry's pass stays spent: the order may still stand")
	var ra interface{ RetryAfter() time.Duration }
	require.True(t, errors.As(err, &ra) && ra.RetryAfter() > 0, "the refusal says when to retry: %v", err)

	// A worker persists the message that landed: the order is decided.
	held, err := stock.UserHolds(t.Context(), req.UserID, []int64{v.ID})
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.NoError(t, stock.Confirm(t.Context(), held))
	again, err := buyer.Buy(t.Context(), req)
	require.NoError(t, err)
	require.True(t, again.Replayed, "a retry of the key answers with the same order")
	require.Equal(t, held[0].OrderID, again.OrderID)
	snap, err = stock.Snapshot(t.Context(), v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), snap.Held, "stock is held once")
}

// TestBuyWhileTheStockStateIsMissing: Redis lost a voucher PostgreSQL knows.
// A buy is told to come back (503 with a Retry-After) and asks the healers
// to restore it, never "not found"; a replayed key is answered from
// PostgreSQL; a sale past its end whose keys expired is ended.
func TestBuyWhileTheStockStateIsMissing(t *testing.T) {
	ctx := t.Context()
	rdb := stack.Redis(t)
	stock := redisstock.New(redisstock.Config{Redis: rdb})
	pool := stack.NewDatabase(t)
	pgstoretest.SpreadVoucherIDs(t, pool) // the tests share one Redis
	store := pgstore.New(pool)
	v, err := store.CreateVoucher(ctx, validVoucher(), nil, stock.Warm)
	require.NoError(t, err)
	ids, err := orderid.New(3)
	require.NoError(t, err)
	producer, err := kafkaq.NewProducer(stack.KafkaBrokers, stack.NewTopic(t, 1), discard())
	require.NoError(t, err)
	t.Cleanup(func() { producer.Close() })
	buyer := seckill.NewBuyer(seckill.BuyerConfig{Stock: stock, Queue: producer, IDs: ids, Log: discard(), HealRequests: stock, KeyedOrders: store})

	first := seckill.BuyRequest{VoucherID: v.ID, UserID: 21, Quantity: 1, RequestKey: "k1", EndsAt: v.EndAt}
	got, err := buyer.Buy(ctx, first)
	require.NoError(t, err)
	_, err = store.PersistBatch(ctx, []seckill.Reservation{{OrderID: got.OrderID, VoucherID: v.ID, UserID: 21,
		Quantity: 1, RequestKey: "k1", ReservedAt: time.Now().UTC()}}, time.Minute)
	require.NoError(t, err)
	require.NoError(t, stock.Unwarm(ctx, v.ID)) // Redis lost the voucher

	again, err := buyer.Buy(ctx, first)
	require.NoError(t, err)
	require.Equal(t, seckill.ReserveResult{OrderID: got.OrderID, Replayed: true}, again, "the replay is answered from PostgreSQL")

	_, err = buyer.Buy(ctx, seckill.BuyRequest{VoucherID: v.ID, UserID: 22, Quantity: 1, RequestKey: "k2", EndsAt: v.EndAt})
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	require.ErrorIs(t, err, seckill.ErrStockMissing)
	require.NotErrorIs(t, err, apperr.ErrNotFound)
	var ra interface{ RetryAfter() time.Duration }
	require.ErrorAs(t, err, &ra)
	require.Equal(t, seckill.RestoreRetryAfter, ra.RetryAfter())
	asked, err := stock.HealRequests(ctx, 5*time.Second)
	require.NoError(t, err)
	require.Contains(t, asked, v.ID, "the healers are asked to restore it")

	_, err = buyer.Buy(ctx, seckill.BuyRequest{VoucherID: v.ID, UserID: 23, Quantity: 1, EndsAt: time.Now().Add(-time.Second)})
	require.ErrorIs(t, err, seckill.ErrEnded, "a sale whose keys expired after its end is ended")
}

// An operator's new admit_per_second for an adaptive room must lie within
// its bounds (the rate in force starts again from it), and names the
// field when it does not.
func TestChangeKeepsAnAdaptiveRoomInItsBounds(t *testing.T) {
	v := validVoucher()
	v.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: 50, Adaptive: &seckill.Adaptive{TargetP99Ms: 50, MinPerSecond: 10, MaxPerSecond: 100}}
	now := v.BeginAt
	for _, rate := range []int64{9, 101} {
		_, err := seckill.Change{AdmitPerSecond: rate}.Apply(v, now)
		requirePublic(t, err, apperr.ErrInvalidInput, "admit_per_second must be within the room's adaptive bounds, 10 to 100", fmt.Sprint(rate))
	}
	got, err := seckill.Change{AdmitPerSecond: 100}.Apply(v, now)
	require.NoError(t, err)
	require.EqualValues(t, 100, got.WaitingRoom.AdmitPerSecond)
	require.Equal(t, v.WaitingRoom.Adaptive, got.WaitingRoom.Adaptive, "the bounds stay")
}
