package gateway

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// passRoom is a waiting room that admits everyone and records the passes
// given back.
type passRoom struct {
	mu              sync.Mutex
	restored, spent int
}

func (r *passRoom) JoinIn(context.Context, waitroom.Line, int64, waitroom.Lane) (waitroom.Status, error) {
	return waitroom.Status{}, apperr.ErrUnavailable
}

func (r *passRoom) Status(context.Context, waitroom.Line, int64) (waitroom.Status, error) {
	return waitroom.Status{}, apperr.ErrUnavailable
}

func (r *passRoom) Check(voucherID, userID int64, _ string) (waitroom.Pass, error) {
	return waitroom.Pass{VoucherID: voucherID, UserID: userID, ExpiresAt: time.Now().Add(time.Minute)}, nil
}

func (r *passRoom) Claim(_ context.Context, voucherID, userID int64, pass, _ string) (waitroom.Pass, error) {
	return r.Check(voucherID, userID, pass)
}

func (r *passRoom) Restore(context.Context, waitroom.Pass) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restored++
	return nil
}

func (r *passRoom) Spend(context.Context, waitroom.Pass) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spent++
	return nil
}

func (r *passRoom) settled() (restored, spent int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.restored, r.spent
}

func (r *passRoom) Stats(context.Context, int64) (waitroom.Stats, error) {
	return waitroom.Stats{}, nil
}
func (r *passRoom) Reopen(context.Context, waitroom.Line) error { return nil }

// An admitted shopper whose buy loses the last unit (409 sold_out) keeps
// the pass: units come back, and the turn is theirs until it expires. Over
// the limit, or bought, the pass is spent: the claim is settled, so the
// room stops holding a unit back for it.
func TestRoomPassGivenBackOnSoldOut(t *testing.T) {
	t.Parallel()
	room := &passRoom{}
	b := setup(t, func(_ *Config, d *testDeps) { d.Room = room })
	now := time.Now().UTC()
	v := b.catalog.put(seckill.Voucher{Title: "Line", Kind: seckill.KindSeckill, PriceCents: 100, StockTotal: 10,
		StockLeft: 10, PerUserLimit: 1, BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour),
		WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 5}})
	buy := func() int {
		resp, _ := b.do(t, "POST", fmt.Sprintf("/api/v1/vouchers/%d/orders", v.ID), "",
			"Authorization", bearerOf(b.shopper), HeaderSeckillPass, "p")
		return resp.StatusCode
	}
	b.buyer.setFn(func(seckill.BuyRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{}, fmt.Errorf("voucher %d: %w", v.ID, seckill.ErrSoldOut)
	})
	settled := func() [2]int {
		restored, spent := room.settled()
		return [2]int{restored, spent}
	}
	require.Equal(t, 409, buy())
	require.Equal(t, [2]int{1, 0}, settled(), "sold out: the pass is given back")
	b.buyer.setFn(func(seckill.BuyRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{}, fmt.Errorf("voucher %d: %w", v.ID, seckill.ErrLimitExceeded)
	})
	require.Equal(t, 409, buy())
	require.Equal(t, [2]int{1, 1}, settled(), "over the limit: the pass is spent")
	b.buyer.setFn(func(seckill.BuyRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{OrderID: 7, StockLeft: 9}, nil
	})
	require.Equal(t, 202, buy())
	require.Equal(t, [2]int{1, 2}, settled(), "bought: the pass is spent")
}
