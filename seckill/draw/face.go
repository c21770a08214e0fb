package draw

// The draws' public faces (the voucher's draw object), the entry list
// anyone may read after the draw, and the operator's export.

import (
	"context"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// faceTTL is how long a face read from the record serves before it is
// read again; an ended draw's never changes.
const faceTTL = time.Second

// DrawFaces reads the public faces of the draws of voucherIDs for the
// catalog (seckill.DrawFaces): from memory when read less than a second
// ago (an ended draw's for good), else from the record, in one query for
// all, and the entry counts from Redis.
func (s *Store) DrawFaces(ctx context.Context, voucherIDs ...int64) (map[int64]seckill.DrawFace, error) {
	out := make(map[int64]seckill.DrawFace, len(voucherIDs))
	var stale []int64
	now := time.Now()
	s.mu.Lock()
	for _, id := range voucherIDs {
		if c, ok := s.faces[id]; ok && (c.face.Void || c.face.Beacon.Signature != "" || now.Sub(c.at) < faceTTL) {
			out[id] = c.face
			continue
		}
		stale = append(stale, id)
	}
	s.mu.Unlock()
	if len(stale) == 0 {
		return out, nil
	}
	commits, err := s.record.Commitments(ctx, stale...)
	if err != nil {
		return nil, err
	}
	states, err := s.record.DrawStates(ctx, stale...)
	if err != nil {
		return nil, err
	}
	counts := make(map[int64]int64, len(stale))
	for _, id := range stale {
		if st, ok := states[id]; ok && st.Signature != "" {
			counts[id] = st.Entries
			continue
		}
		n, err := s.rdb.HGet(ctx, EntriesKey(id), "~n").Int64()
		if err == nil {
			counts[id] = n
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range stale {
		f, err := faceOf(commits[id], states[id], counts[id])
		if err != nil {
			return nil, fmt.Errorf("draw: voucher %d: %w", id, err)
		}
		out[id] = f
		s.faces[id] = cachedFace{face: f, at: now}
	}
	return out, nil
}

func faceOf(commits []Commitment, st State, entries int64) (seckill.DrawFace, error) {
	f := seckill.DrawFace{Entries: entries, Void: st.Void != "", Why: st.Void, Cutoff: st.Cutoff}
	for _, c := range commits {
		dc := seckill.DrawCommitment{Kind: c.Kind, AtMs: c.At.UnixMilli()}
		switch c.Kind {
		case KindBeacon:
			var b BeaconCommitment
			if err := json.Unmarshal(c.Body, &b); err != nil {
				return f, err
			}
			dc.Beacon = seckill.BeaconFace{ChainHash: b.ChainHash, Round: b.Round, RoundAtMs: b.RoundAt.UnixMilli()}
			f.Beacon = dc.Beacon
			f.Beacon.Signature = st.Signature
		case KindEntriesHash:
			var e EntriesCommitment
			if err := json.Unmarshal(c.Body, &e); err != nil {
				return f, err
			}
			dc.EntriesHash = e.EntriesHash
			f.EntriesHash = e.EntriesHash
		}
		if f.NCommitments < len(f.Commitments) {
			f.Commitments[f.NCommitments] = dc
			f.NCommitments++
		}
	}
	return f, nil
}

// Face reads voucherID's draw as the voucher shows it (from the record,
// or memory within a second).
func (s *Store) Face(ctx context.Context, voucherID int64) (seckill.DrawFace, error) {
	all, err := s.DrawFaces(ctx, voucherID)
	if err != nil {
		return seckill.DrawFace{}, err
	}
	return all[voucherID], nil
}

// EntryList is GET /api/v1/vouchers/{id}/draw/entries: every entry id of
// voucherID's draw, sorted, one a line; ErrNotDrawn before the draw. The
// list never changes once drawn, so each instance reads it from the record
// once and serves it from memory.
func (s *Store) EntryList(ctx context.Context, voucherID int64) ([]byte, error) {
	s.mu.Lock()
	b, ok := s.lists[voucherID]
	s.mu.Unlock()
	if ok {
		return b, nil
	}
	f, err := s.Face(ctx, voucherID)
	if err != nil {
		return nil, err
	}
	if f.Beacon.Signature == "" {
		return nil, ErrNotDrawn
	}
	entries, err := s.record.Entries(ctx, voucherID)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.EntryID
	}
	b = EntryList(ids)
	s.mu.Lock()
	if len(s.lists) >= 16 { // a few sales' lists at a time: the oldest read go
		for k := range s.lists {
			delete(s.lists, k)
			break
		}
	}
	s.lists[voucherID] = b
	s.mu.Unlock()
	return b, nil
}

// RandomnessFrom is the randomness of a drawn face; ok false before.
func RandomnessFrom(f seckill.DrawFace) (Randomness, bool) {
	sig, err := hex.DecodeString(f.Beacon.Signature)
	if err != nil || len(sig) == 0 {
		return Randomness{}, false
	}
	return RandomnessOf(sig), true
}

// Export writes l's entries as CSV, user_id,ticket,result, in
// rank order, for the operator's audit: won for every entry that won (at
// the draw or from the waitlist since), waitlisted for the others while
// the sale is on, lost once it is over. Before the draw it is ErrNotDrawn.
func (s *Store) Export(ctx context.Context, l waitroom.Line, w io.Writer) error {
	f, err := s.Face(ctx, l.VoucherID)
	if err != nil {
		return err
	}
	r, ok := RandomnessFrom(f)
	if !ok {
		return ErrNotDrawn
	}
	seated, ok, err := s.room.Seated(ctx, l.VoucherID)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotDrawn
	}
	entries, err := s.record.Entries(ctx, l.VoucherID)
	if err != nil {
		return err
	}
	d := Rank(r, l.VoucherID, entries, 0, 1)
	over := seated.Closed || !time.Now().Before(l.EndAt)
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"user_id", "ticket", "result"}); err != nil {
		return fmt.Errorf("draw: export: %w", err)
	}
	for i, e := range d.Ranked {
		res := Waitlisted
		switch {
		case int64(i) < seated.Head:
			res = Won
		case over:
			res = Lost
		}
		if err := cw.Write([]string{strconv.FormatInt(e.UserID, 10), e.Ticket.String(), string(res)}); err != nil {
			return fmt.Errorf("draw: export: %w", err)
		}
		if i%1000 == 999 {
			cw.Flush()
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("draw: export: %w", err)
	}
	return nil
}
