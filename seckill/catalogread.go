package seckill

// How the catalog reads the record (PostgreSQL) and the live stock into a
// new snapshot: shared reads, paced lookups of unknown ids.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flashsale/seckill/seckill/apperr"
)

// awaitLookupTurn waits until LookupGap has passed since the last read of
// the record began, so lookups of unknown ids are paced.
func (c *Catalog) awaitLookupTurn(ctx context.Context) error {
	c.mu.Lock()
	never, wait := c.lastStart.IsZero(), c.lookupGap-c.now().Sub(c.lastStart)
	c.mu.Unlock()
	if never || wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for the catalog: %w", apperr.ErrUnavailable, ctx.Err())
	}
}

// reload makes sure a read of the record that began at or after since has
// finished, and returns how it ended. Callers share reads: one that is in
// flight serves every caller whose since it satisfies; an older one is
// waited for and followed by a new one. The read itself runs without the
// caller's cancellation (others may be waiting on it), within readTimeout.
func (c *Catalog) reload(ctx context.Context, since time.Time) error {
	for {
		c.mu.Lock()
		f := c.flight
		if f == nil && !c.lastStart.IsZero() && !c.lastStart.Before(since) {
			err := c.lastErr
			c.mu.Unlock()
			return err
		}
		if f == nil {
			f = &recordRead{started: c.now(), done: make(chan struct{})}
			c.flight = f
			c.mu.Unlock()
			f.err = c.readRecord(context.WithoutCancel(ctx))
			c.mu.Lock()
			c.flight, c.lastStart, c.lastErr = nil, f.started, f.err
			c.mu.Unlock()
			close(f.done)
			return f.err
		}
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for the catalog: %w", apperr.ErrUnavailable, ctx.Err())
		}
		if !f.started.Before(since) {
			return f.err
		}
	}
}

// readRecord reads every voucher from the record and the live stock of the
// seckill ones, and publishes the result.
func (c *Catalog) readRecord(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.readTimeout)
	defer cancel()
	c.records.Add(1)
	rows, err := c.store.Vouchers(ctx)
	if err != nil {
		c.mu.Lock()
		first := !c.stale
		c.stale = true
		c.mu.Unlock()
		if first {
			c.log.WarnContext(ctx, "voucher record unavailable; serving the last catalog until it answers", "err", err)
		}
		if !errors.Is(err, apperr.ErrUnavailable) {
			err = fmt.Errorf("%w: catalog: %w", apperr.ErrUnavailable, err)
		}
		return err
	}
	for i := range rows {
		rows[i].Currency = rows[i].CurrencyOr(c.currency)
	}
	left, lerr := c.stock.StockLeft(ctx, seckillIDs(rows, time.Time{})...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale {
		c.stale = false
		c.log.InfoContext(ctx, "voucher record answers again; catalog refreshed")
	}
	c.rows, c.readOnce = rows, true
	if lerr == nil {
		c.live = left
	}
	c.publish()
	return nil
}

// refreshStock reads the live stock of the seckill vouchers not yet ended
// and publishes it. A failure keeps the last figures (the reservation is
// the judge of stock; the catalog only shows it).
func (c *Catalog) refreshStock(ctx context.Context) {
	c.mu.Lock()
	ids := seckillIDs(c.rows, c.now().Add(-ClockMargin))
	c.mu.Unlock()
	if len(ids) == 0 {
		c.mu.Lock()
		c.publish() // states move with the clock
		c.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.stockEvery*5)
	defer cancel()
	left, err := c.stock.StockLeft(ctx, ids...)
	faces, ferr := c.readFaces(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		for id, n := range left {
			c.live[id] = n
		}
	}
	if ferr == nil {
		c.faces = faces
	}
	c.publish()
}

// readFaces reads the faces of the draws not yet ended, nil without any.
func (c *Catalog) readFaces(ctx context.Context) (map[int64]DrawFace, error) {
	if c.draws == nil {
		return nil, nil
	}
	c.mu.Lock()
	var ids []int64
	for _, v := range c.rows {
		if v.WaitingRoom.IsDraw() && v.EndAt.After(c.now().Add(-ClockMargin)) {
			ids = append(ids, v.ID)
		}
	}
	c.mu.Unlock()
	if len(ids) == 0 {
		return nil, nil
	}
	return c.draws.DrawFaces(ctx, ids...)
}

// seckillIDs are the ids of the seckill vouchers among rows whose sale ends
// after endsAfter.
func seckillIDs(rows []Voucher, endsAfter time.Time) []int64 {
	var ids []int64
	for _, v := range rows {
		if v.Kind == KindSeckill && v.EndAt.After(endsAfter) {
			ids = append(ids, v.ID)
		}
	}
	return ids
}

// publish builds the catalog from the last record and live stock, with the
// states of now, and makes it current if anything differs. Callers hold mu.
func (c *Catalog) publish() {
	now := c.now()
	vs := make([]Voucher, len(c.rows))
	for i, v := range c.rows {
		if n, ok := c.live[v.ID]; ok && v.Kind == KindSeckill {
			v.StockLeft = n
		}
		if f, ok := c.faces[v.ID]; ok && v.WaitingRoom.IsDraw() {
			v.Draw = &f
		}
		v.State = v.StateAt(now)
		vs[i] = v
	}
	cur := c.cur.Load()
	if cur == nil {
		c.cur.Store(NewCatalogSnapshot(vs, now))
		return
	}
	if slices.EqualFunc(cur.vouchers, vs, Voucher.Same) {
		return
	}
	c.cur.Store(cur.Next(vs, now))
}
