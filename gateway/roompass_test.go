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
	mu       sync.Mutex
	restored int
}

func (r *passRoom) Join(context.Context, waitroom.Line, int64) (waitroom.Status, error) {
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

func (r *passRoom) Stats(context.Context, int64) (waitroom.Stats, error) {
	return waitroom.Stats{}, nil
}
func (r *passRoom) Reopen(context.Context, waitroom.Line) error { return nil }

func (r *passRoom) given() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.restored
}

// An admitted shopper whose buy loses the last unit (409 sold_out) keeps
// the pass: units come back, and the turn is theirs until it expires. Over
// the limit, the pass is spent.
func TestRoomPassGivenBackOnSoldOut(t *testing.T) {
	t.Parallel()
	room := &passRoom{}
	b := setup(t, func(_ *Config, d *Deps) { d.Room = room })
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
	require.Equal(t, 409, buy())
	require.Equal(t, 1, room.given(), "sold out: the pass is given back")
	b.buyer.setFn(func(seckill.BuyRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{}, fmt.Errorf("voucher %d: %w", v.ID, seckill.ErrLimitExceeded)
	})
	require.Equal(t, 409, buy())
	require.Equal(t, 1, room.given(), "over the limit: the pass is spent")
}
