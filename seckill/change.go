package seckill

import (
	"time"

	"github.com/flashsale/seckill/seckill/apperr"
)

// Change is an operator's change of a running sale (PATCH
// /api/v1/admin/vouchers/{id}). A zero field changes nothing.
type Change struct {
	// AddStock is how many units to put on sale besides those there are.
	AddStock int64
	// AdmitPerSecond is the waiting room's new admission rate.
	AdmitPerSecond int64
	// EndAt is the sale's new end, later than the one it has.
	EndAt time.Time
	// GraceSeconds, when set, is the voucher's new grace for a missed
	// turn (0 is a value: no grace).
	GraceSeconds *int64
	// By names who made the change (the fingerprint of the operator's
	// token), recorded with it.
	By string
}

// ChangeRecord is one change made to a running sale, as the record keeps
// it: the change (By included), when it was made by the record's clock,
// and the voucher's stock total after it.
type ChangeRecord struct {
	Change
	At         time.Time
	StockTotal int64
}

// Validate checks what can be judged without the voucher: every error
// names its field.
func (c Change) Validate() error {
	switch {
	case c.AddStock == 0 && c.AdmitPerSecond == 0 && c.EndAt.IsZero() && c.GraceSeconds == nil:
		return apperr.InvalidField("", "send at least one of add_stock, admit_per_second, end_at and grace_seconds")
	case c.GraceSeconds != nil && (*c.GraceSeconds < 0 || *c.GraceSeconds > MaxGraceSeconds):
		return apperr.InvalidField("/grace_seconds", "grace_seconds must be 0 to %d", MaxGraceSeconds)
	case c.AddStock < 0 || c.AddStock > MaxStock:
		return apperr.InvalidField("/add_stock", "add_stock must be 1 to %d", MaxStock)
	case c.AdmitPerSecond < 0 || c.AdmitPerSecond > MaxAdmitPerSecond:
		return apperr.InvalidField("/admit_per_second", "admit_per_second must be 1 to %d", MaxAdmitPerSecond)
	case !c.EndAt.IsZero() && outOfYears(c.EndAt):
		return apperr.InvalidField("/end_at", "end_at must be in the years %d to %d (UTC)", MinYear, MaxYear)
	}
	return nil
}

// Apply returns v with the change made, judged at now (the record's clock):
// an ended sale is apperr.ErrConflict (it cannot be steered back to life); a value
// that does not fit v is apperr.ErrInvalidInput naming its field.
func (c Change) Apply(v Voucher, now time.Time) (Voucher, error) {
	if err := c.Validate(); err != nil {
		return Voucher{}, err
	}
	if !now.Before(v.EndAt) {
		return Voucher{}, apperr.Publicf(apperr.ErrConflict, "voucher %d: its sale ended at %s; an ended sale cannot be changed",
			v.ID, v.EndAt.UTC().Format(time.RFC3339))
	}
	if c.AddStock > 0 {
		if v.StockTotal+c.AddStock > MaxStock {
			return Voucher{}, apperr.InvalidField("/add_stock", "add_stock would make the stock %d, above %d", v.StockTotal+c.AddStock, MaxStock)
		}
		v.StockTotal += c.AddStock
		v.StockLeft += c.AddStock
	}
	if c.AdmitPerSecond > 0 {
		if v.WaitingRoom == nil {
			return Voucher{}, apperr.InvalidField("/admit_per_second", "admit_per_second is for a voucher with a waiting room; this one has none")
		}
		room := *v.WaitingRoom
		if a := room.Adaptive; a != nil && (c.AdmitPerSecond < a.MinPerSecond || c.AdmitPerSecond > a.MaxPerSecond) {
			return Voucher{}, apperr.InvalidField("/admit_per_second", "admit_per_second must be within the room's adaptive bounds, %d to %d", a.MinPerSecond, a.MaxPerSecond)
		}
		room.AdmitPerSecond = c.AdmitPerSecond
		v.WaitingRoom = &room
	}
	if !c.EndAt.IsZero() {
		if !c.EndAt.After(v.EndAt) {
			return Voucher{}, apperr.InvalidField("/end_at", "end_at must be later than the sale's end, %s", v.EndAt.UTC().Format(time.RFC3339))
		}
		v.EndAt = c.EndAt
	}
	if c.GraceSeconds != nil {
		v.GraceSeconds = *c.GraceSeconds
	}
	return v, nil
}
