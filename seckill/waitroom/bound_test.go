package waitroom_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// freshVoucherID is a voucher id no other test, nor an earlier run on the
// same Redis, uses: far above the fixed ids of the package's other tests.
func freshVoucherID() int64 { return 1<<40 + rand.Int64N(1<<40) }

// boundSale is the sale of TestRoomNeverAdmitsBeyondTheUnitsLeft: its
// shoppers wait in line and, when admitted, buy as the gateway does (claim
// the pass, reserve, settle the claim).
type boundSale struct {
	room  *waitroom.Room
	stock *redisstock.Store
	v     seckill.Voucher
	line  waitroom.Line
	// lag is the longest wait between a claim and its reservation: a
	// loaded gateway between the two round trips.
	lag time.Duration

	orders          sync.Map // userID -> order id
	bought, refused atomic.Int64
}

// buyWhenAdmitted waits for user's pass and buys with it, until they have
// bought (or found no unit) or ctx ends.
func (s *boundSale) buyWhenAdmitted(ctx context.Context, user int64) error {
	for ctx.Err() == nil {
		st, err := s.room.Status(ctx, s.line, user)
		if err != nil {
			return err
		}
		if st.State != waitroom.StateAdmitted || st.Pass == "" {
			time.Sleep(time.Millisecond)
			continue
		}
		p, err := s.room.Claim(ctx, s.v.ID, user, st.Pass, "")
		if err != nil {
			return err
		}
		time.Sleep(time.Duration(rand.Int64N(int64(s.lag))))
		res, err := s.stock.Reserve(ctx, seckill.Reservation{OrderID: 1 + rand.Int64N(1<<50), VoucherID: s.v.ID,
			UserID: user, Quantity: 1, ReservedAt: time.Now()})
		if errors.Is(err, seckill.ErrSoldOut) {
			// An admitted shopper found no unit: the room let out one pass
			// too many. The gateway gives the pass back; the test counts.
			s.refused.Add(1)
			return s.room.Restore(ctx, p)
		}
		if err != nil {
			return err
		}
		s.orders.Store(user, res.OrderID)
		s.bought.Add(1)
		return s.room.Spend(ctx, p)
	}
	return ctx.Err()
}

// TestRoomNeverAdmitsBeyondTheUnitsLeft: admitted shoppers buy at once, and
// each reservation reaches the stock up to 20 ms after its pass was claimed
// (a loaded gateway), while two admitters (two gateways) step the room every
// 2 ms, each bounded by the stock Redis has left as it read it. However the
// steps fall between a claim and its reservation, the room never lets out
// more passes than units can still be bought: exactly the stock's worth of
// shoppers is admitted, every admitted buy finds a unit, and the rest wait,
// sold out. When units come back, exactly as many more are admitted, and
// they buy them. On both Redis shapes, a voucher of one bucket and one of
// three. (Before claims were counted, a claim whose reservation had not
// landed was neither an unused pass nor sold, and a step in that gap let
// one more shopper in, who then found the voucher sold out.)
func TestRoomNeverAdmitsBeyondTheUnitsLeft(t *testing.T) {
	id := freshVoucherID() // -count=N runs again on the same Redis
	for _, sh := range shapes(t) {
		for _, shards := range []int{1, 3} {
			id++
			t.Run(sh.name+"/shards="+strconv.Itoa(shards), func(t *testing.T) {
				testRoomBound(t, sh.rdb, id, shards)
			})
		}
	}
}

func testRoomBound(t *testing.T, rdb redis.UniversalClient, id int64, shards int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const units, shoppers, returned = 12, 40, 4
	tm, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	stock := redisstock.New(redisstock.Config{Redis: rdb})
	v := seckill.Voucher{ID: id, Title: "bound", Kind: seckill.KindSeckill, PriceCents: 100,
		StockTotal: units, StockLeft: units, PerUserLimit: 1, Shards: shards,
		BeginAt: tm.Add(-time.Second), EndAt: tm.Add(time.Hour),
		WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 10000}}
	require.NoError(t, stock.Warm(ctx, v))
	line, ok := waitroom.LineOf(v)
	require.True(t, ok)
	room := waitroom.New(waitroom.Config{Redis: rdb, Secret: secret, Recovery: redisstock.OnSaleKey})
	sale := &boundSale{room: room, stock: stock, v: v, line: line, lag: 20 * time.Millisecond}
	for u := int64(1); u <= shoppers; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}

	targets := func(ctx context.Context) ([]waitroom.Target, error) {
		left, err := stock.StockLeft(ctx, id)
		if err != nil {
			return nil, err
		}
		return []waitroom.Target{{Line: line, Passes: max(left[id], 0)}}, nil
	}
	admitting, stopAdmitting := context.WithCancel(ctx)
	var admitters sync.WaitGroup
	for range 2 {
		a := waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: room, Targets: targets, Interval: 2 * time.Millisecond})
		admitters.Go(func() { _ = a.Run(admitting) })
	}
	defer func() { stopAdmitting(); admitters.Wait() }()

	// buy runs the shoppers in line until units are bought, or ctx ends.
	buy := func(units int64) {
		t.Helper()
		buying, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		errs := make(chan error, shoppers)
		for u := int64(1); u <= shoppers; u++ {
			if _, done := sale.orders.Load(u); done {
				continue
			}
			wg.Go(func() {
				if err := sale.buyWhenAdmitted(buying, u); err != nil && buying.Err() == nil {
					errs <- err
				}
			})
		}
		for sale.bought.Load() < units && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		// A few more steps with nothing left: still nobody more.
		time.Sleep(200 * time.Millisecond)
		stop()
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
	admitted := func() int64 {
		st, err := room.Stats(ctx, id)
		require.NoError(t, err)
		return st.Admitted
	}

	buy(units)
	require.EqualValues(t, units, sale.bought.Load(), "the stock sold")
	require.Zero(t, sale.refused.Load(), "an admitted shopper found no unit: the room let out a pass too many")
	require.EqualValues(t, units, admitted(), "admitted beyond the units that could be bought")
	st, err := room.Status(ctx, line, units+1)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateSoldOut, st.State, "the next in line waits, sold out")
	require.EqualValues(t, 1, st.Position)

	// Units come back (holds released): exactly as many more are admitted.
	n := 0
	sale.orders.Range(func(user, order any) bool {
		released, err := stock.Release(ctx, id, order.(int64), seckill.ReleaseAny)
		require.NoError(t, err)
		require.True(t, released)
		n++
		return n < returned
	})
	buy(units + returned)
	require.EqualValues(t, units+returned, sale.bought.Load())
	require.Zero(t, sale.refused.Load(), "an admitted shopper found no returned unit")
	require.EqualValues(t, units+returned, admitted(), "admitted beyond the units back")
	left, err := stock.StockLeft(ctx, id)
	require.NoError(t, err)
	require.Zero(t, left[id])
}

// A claimed pass holds its unit back from admission until its buy is
// settled, and a settled claim until a step is given a landed count read
// after it: the stock figure the step was given may predate the
// reservation. A claim never settled (its gateway died) holds the unit only
// until the claim's lifetime; a step given a landed count older than the
// claims the room still keeps admits nobody, and answers the count to give.
func TestClaimHoldsItsUnitUntilSettled(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret, ClaimTTL: 300 * time.Millisecond})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: freshVoucherID(), BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour), AdmitPerSecond: 1000}
	for u := int64(1); u <= 6; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	claim := func(u int64) waitroom.Pass {
		t.Helper()
		st, err := room.Status(ctx, line, u)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateAdmitted, st.State, "user %d", u)
		p, err := room.Claim(ctx, line.VoucherID, u, st.Pass, "")
		require.NoError(t, err)
		return p
	}
	admit := func(passes, landed, want int64, why string) waitroom.Step {
		t.Helper()
		time.Sleep(5 * time.Millisecond) // rate credit is never the limit
		step, err := room.Admit(ctx, line, passes, landed)
		require.NoError(t, err)
		require.Equal(t, want, step.Admitted, why)
		return step
	}

	// Two units: two admitted; one buys, its reservation not in the stock
	// yet (the stock still says 2).
	step := admit(2, 0, 2, "two units, two passes")
	p1 := claim(1)
	step = admit(2, step.Landed, 0, "a claim in flight holds its unit")
	require.NoError(t, room.Spend(ctx, p1))
	before := step.Landed
	step = admit(2, before, 0, "settled after the landed count given: the stock read may predate it")
	require.EqualValues(t, before+1, step.Landed)
	step = admit(1, step.Landed, 0, "read after: the stock shows the unit sold, the unused pass holds the other")

	// A pass given back is counted as unused again.
	p2 := claim(2)
	require.NoError(t, room.Restore(ctx, p2))
	step = admit(1, step.Landed, 0, "the restored pass holds the unit")
	p2 = claim(2)

	// User 2's gateway dies: the claim is never settled. Past its
	// lifetime, a step settles it, and once given a landed count from
	// then, the unit it held goes to the next in line (the stock says 1:
	// the reservation never came).
	time.Sleep(400 * time.Millisecond)
	step = admit(1, step.Landed, 0, "settled by this step: the stock read may predate it")
	step = admit(1, step.Landed, 1, "the dead claim's unit goes to the line")
	require.NoError(t, room.Spend(ctx, p2), "a late spend of a claim already settled does nothing")
	step = admit(1, step.Landed, 0, "user 3's pass holds the unit")
	require.EqualValues(t, 2, step.Landed, "user 1's spend and the dead claim")

	// Settled claims are kept a few seconds: a step given a landed count
	// older than what the room kept admits nobody (two units came back,
	// say), then is exact again.
	p3 := claim(3)
	require.NoError(t, room.Spend(ctx, p3))
	stale := step.Landed
	time.Sleep(5200 * time.Millisecond)
	step = admit(2, stale, 0, "what settled after the landed count given is forgotten: nothing is known")
	admit(2, step.Landed, 2, "with the count the step answered, exact again")
}
