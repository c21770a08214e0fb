package draw

// Making a draw: freeze the entries, record them and their hash, wait for
// the committed round, verify it, rank, seat, record the result.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flashsale/seckill/seckill/beacon"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// Outcome is what Draw found or did.
type Outcome struct {
	// Due is false before BeginAt (by Redis's clock): nothing was done.
	Due bool
	// Done is true once the draw has ended (made or void): nothing is
	// left to do.
	Done bool
	// Drew is true when this call seated the draw; false when it was
	// seated before, by this instance or another.
	Drew bool
	// Draw is the ranking, its Winners those seated; Round the beacon's.
	Draw  Draw
	Round beacon.Round
}

// saveBatch is how many entries one statement records.
const saveBatch = 5000

// Draw makes v's draw once BeginAt has come and its beacon round is out:
// stock units with up to perUserLimit each, seated in the waiting room.
// Any number of instances may call it, at any time, as often as they
// like: the entries freeze once, every instance computes the same ranking,
// and it is seated once.
func (s *Store) Draw(ctx context.Context, l waitroom.Line, stock, perUserLimit int64) (Outcome, error) {
	id := l.VoucherID
	states, err := s.record.DrawStates(ctx, id)
	if err != nil {
		return Outcome{}, err
	}
	if st, ok := states[id]; ok && st.Ended() {
		return Outcome{Due: true, Done: true}, nil
	}
	commits, err := s.record.Commitments(ctx, id)
	if err != nil {
		return Outcome{}, err
	}
	var bc *BeaconCommitment
	var ec *EntriesCommitment
	for _, c := range commits[id] {
		switch c.Kind {
		case KindBeacon:
			bc = new(BeaconCommitment)
			err = json.Unmarshal(c.Body, bc)
		case KindEntriesHash:
			ec = new(EntriesCommitment)
			err = json.Unmarshal(c.Body, ec)
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("draw: voucher %d: commitment %s: %w", id, c.Body, err)
		}
	}
	if bc == nil {
		return Outcome{}, fmt.Errorf("%w for voucher %d", errNoBeacon, id)
	}
	if ec == nil {
		// The next call draws, from the entries recorded now.
		due, err := s.freezeEntries(ctx, l)
		return Outcome{Due: due}, err
	}
	// The round first: until it is out there is nothing to read.
	round, err := s.beacon.Round(ctx, bc.Round)
	if errors.Is(err, beacon.ErrNotYet) {
		return Outcome{Due: true}, nil
	}
	if err != nil {
		return Outcome{Due: true}, err
	}
	entries, err := s.record.Entries(ctx, id)
	if err != nil {
		return Outcome{Due: true}, err
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.EntryID
	}
	if h := EntriesHash(ids); h != ec.EntriesHash {
		return Outcome{Due: true}, fmt.Errorf("draw: voucher %d: the recorded entries hash to %s, not to the %s committed", id, h, ec.EntriesHash)
	}
	d := Rank(RandomnessOf(round.Signature), id, entries, stock, perUserLimit)
	seated, err := s.room.Seat(ctx, l, d.Users(), int64(d.Winners))
	if err != nil {
		return Outcome{Due: true}, err
	}
	if !seated.Now && seated.Size != int64(len(d.Ranked)) {
		return Outcome{Due: true}, fmt.Errorf("draw: voucher %d: %d entries, but %d were seated: the room's line is not this draw's",
			id, len(d.Ranked), seated.Size)
	}
	// The first seating stands, whatever stock this instance saw.
	d.Winners = int(min(seated.Winners, int64(len(d.Ranked))))
	st := State{Signature: hex.EncodeToString(round.Signature), Entries: int64(len(d.Ranked)), Winners: int64(d.Winners)}
	if cut, ok := d.Cutoff(); ok {
		st.Cutoff = cut.String()
	}
	if err := s.record.EndDraw(ctx, id, st); err != nil {
		return Outcome{Due: true}, err
	}
	s.forget(id)
	return Outcome{Due: true, Done: true, Drew: seated.Now, Draw: d, Round: round}, nil
}

// freezeEntries closes l's entries once BeginAt has come, records them
// and commits to their hash; due is false before BeginAt. Entries lost
// from Redis after they opened make the draw void.
func (s *Store) freezeEntries(ctx context.Context, l waitroom.Line) (due bool, err error) {
	for attempt := 0; ; attempt++ {
		res, err := s.freeze.Run(ctx, s.rdb, []string{EntriesKey(l.VoucherID)}, l.BeginAt.UnixMilli(), s.expireAt(l)).Int64Slice()
		if err != nil {
			return false, unavailable("close the entries", err)
		}
		if len(res) != 3 {
			return false, fmt.Errorf("draw: draw_freeze.lua answered %v", res)
		}
		switch res[0] {
		case 0:
			return false, nil
		case 1:
			return true, s.commitEntries(ctx, l.VoucherID)
		}
		// Not open in Redis: never opened (nobody ran while the window was
		// open) or lost. Opening tells (a loss makes the draw void).
		if attempt > 0 {
			return true, fmt.Errorf("draw: voucher %d: its entries cannot be opened", l.VoucherID)
		}
		if err := s.Open(ctx, l); err != nil {
			return true, err
		}
	}
}

// commitEntries records voucherID's frozen entries and commits to their
// hash: all of them first, so whoever commits has recorded every entry.
func (s *Store) commitEntries(ctx context.Context, voucherID int64) error {
	entries, err := s.readEntries(ctx, voucherID)
	if err != nil {
		return err
	}
	for i := 0; i < len(entries); i += saveBatch {
		if err := s.record.SaveEntries(ctx, voucherID, entries[i:min(i+saveBatch, len(entries))]); err != nil {
			return err
		}
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.EntryID
	}
	body, _ := json.Marshal(EntriesCommitment{EntriesHash: EntriesHash(ids), Entries: int64(len(ids))})
	if _, err := s.record.Commit(ctx, voucherID, KindEntriesHash, body); err != nil {
		return err
	}
	s.forget(voucherID)
	return nil
}
