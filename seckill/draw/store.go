package draw

// The draws' entries in Redis. Key (hash tag {v42}, the voucher's, so it
// shares a Redis Cluster slot with its stock and its waiting room; the
// layout is this file's alone):
//
//	draw:{v42}:entries  hash  u:<userID> -> entry id; ~open, ~frozen, ~n
//
// Nothing that decides the outcome is in Redis, nor anywhere else, before
// the draw: the outcome is the beacon round's, signed after begin_at. The
// record (PostgreSQL, Record) keeps the commitments, when entries opened,
// the frozen entries and how the draw ended. Exactly once, fleet-wide:
// every gateway runs the draw from begin_at (Drawer); draw_freeze.lua
// closes the entries for good, so every drawer reads the same entries, and
// the ranking is a pure function of the round and the entries, so racing
// drawers all compute the same draw; the waiting room seats it slice by
// slice, each slice once (waitroom.Room.Seat).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/beacon"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// Store is the fleet's draws. It is safe for concurrent use; every
// instance makes its own over the shared Redis and PostgreSQL.
type Store struct {
	rdb           redis.UniversalClient
	room          *waitroom.Room
	record        Record
	beacon        *beacon.Client
	rand          io.Reader
	grace         time.Duration
	log           *slog.Logger
	enter, freeze *redis.Script

	mu    sync.Mutex
	faces map[int64]cachedFace
	lists map[int64][]byte
}

type cachedFace struct {
	face seckill.DrawFace
	at   time.Time
}

// Config is what New builds a Store from; a zero field means its default.
type Config struct {
	// Redis holds the entries; the same Redis as Room's.
	Redis redis.UniversalClient
	// Room seats each draw's ranking: its winners get the room's passes,
	// and its waitlist is the room's line.
	Room *waitroom.Room
	// Record is the draws' durable side (PostgreSQL).
	Record Record
	// Beacon reads and verifies the rounds.
	Beacon *beacon.Client
	// Rand is where entry ids come from (crypto/rand).
	Rand io.Reader
	// Grace is how long after the sale's end the keys live
	// (seckill.DefaultStateGrace).
	Grace time.Duration
	// Log gets what an operator must know (a void draw); none: discarded.
	Log *slog.Logger
}

// New returns the draws of cfg.
func New(cfg Config) *Store {
	if cfg.Grace <= 0 {
		cfg.Grace = seckill.DefaultStateGrace
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Store{rdb: cfg.Redis, room: cfg.Room, record: cfg.Record, beacon: cfg.Beacon, rand: cfg.Rand,
		grace: cfg.Grace, log: cfg.Log.With("component", "draw"),
		enter: redis.NewScript(lua.DrawEnter), freeze: redis.NewScript(lua.DrawFreeze),
		faces: map[int64]cachedFace{}, lists: map[int64][]byte{}}
}

// EntriesKey is the Redis key of voucherID's entries.
func EntriesKey(voucherID int64) string {
	return "draw:{v" + strconv.FormatInt(voucherID, 10) + "}:entries"
}

func (s *Store) expireAt(l waitroom.Line) int64 { return l.EndAt.Add(s.grace).UnixMilli() }

// CommitBeacon commits v's draw to the first round of the beacon's chain
// after v's begin_at, unless it is committed: when the voucher is made (and
// again by the drawer, should that have failed).
func (s *Store) CommitBeacon(ctx context.Context, v seckill.Voucher) (BeaconCommitment, error) {
	ch, err := s.beacon.Chain(ctx)
	if err != nil {
		return BeaconCommitment{}, err
	}
	round, at := ch.RoundAt(v.BeginAt)
	body, _ := json.Marshal(BeaconCommitment{Network: beacon.Network, ChainHash: ch.Hash, Round: round, RoundAt: at.UTC()})
	c, err := s.record.Commit(ctx, v.ID, KindBeacon, body)
	if err != nil {
		return BeaconCommitment{}, err
	}
	var b BeaconCommitment
	if err := json.Unmarshal(c.Body, &b); err != nil {
		return BeaconCommitment{}, fmt.Errorf("draw: voucher %d: beacon commitment %s: %w", v.ID, c.Body, err)
	}
	s.forget(v.ID)
	return b, nil
}

// EntryStatus is a shopper's entry in a draw, as read.
type EntryStatus struct {
	// Entered is true once the shopper entered; EntryID is their entry.
	Entered bool
	EntryID string
	// Entries counts every entry so far.
	Entries int64
	// At is Redis's time of the read.
	At time.Time
}

// Codes of draw_enter.lua and draw_freeze.lua.
const (
	codeNotEntered = 0
	codeEntered    = 1
	codeNotOpen    = 2
	codeClosed     = 3
	codeUnmarked   = 4
	codeMarked     = 5
)

// ErrVoid is the answer of a draw that is void.
var ErrVoid = apperr.Public(seckill.ErrEnded, "this draw is void: its entries were lost before it was made")

// Enter enters userID in l's draw, once: entering again keeps the entry.
// Before the window (PrequeueSeconds before BeginAt) it is
// seckill.ErrNotStarted; from BeginAt on, a new entry is seckill.ErrEnded.
func (s *Store) Enter(ctx context.Context, l waitroom.Line, userID int64) (EntryStatus, error) {
	e, code, err := s.run(ctx, "enter", l, userID)
	if err == nil && code == codeUnmarked {
		if err := s.Open(ctx, l); err != nil {
			return EntryStatus{}, err
		}
		e, code, err = s.run(ctx, "enter", l, userID)
	}
	if err != nil {
		return EntryStatus{}, err
	}
	switch code {
	case codeNotOpen:
		return EntryStatus{}, apperr.Publicf(seckill.ErrNotStarted,
			"entries to this draw open at %s; enter then", l.Opens().UTC().Format(time.RFC3339))
	case codeClosed:
		return EntryStatus{}, apperr.Publicf(seckill.ErrEnded,
			"entries to this draw closed at %s, when they froze", l.BeginAt.UTC().Format(time.RFC3339))
	case codeUnmarked:
		return EntryStatus{}, ErrVoid
	}
	return e, nil
}

// Entered reads userID's entry in l's draw.
func (s *Store) Entered(ctx context.Context, l waitroom.Line, userID int64) (EntryStatus, error) {
	e, _, err := s.run(ctx, "read", l, userID)
	return e, err
}

// Open opens l's entries once its window has opened, in three steps: a
// mark in Redis ('p'), the record in PostgreSQL, then the mark confirmed
// ('ok', which entries need). Only the opener that made the mark records
// the opening: one that finds it recorded already made its mark in place
// of a lost one, so the entries were lost from Redis, and the draw is void,
// never opened again silently. Others wait for the mark's maker, or take
// over a mark left unconfirmed for markTakeover (its maker died).
func (s *Store) Open(ctx context.Context, l waitroom.Line) error {
	checked := false
	for attempt := 0; ; attempt++ {
		e, code, err := s.run(ctx, "open", l, 0)
		if err != nil || code == codeEntered || code == codeNotOpen {
			return err
		}
		if !checked {
			// Entries open only once the round that decides them is
			// committed to.
			commits, err := s.record.Commitments(ctx, l.VoucherID)
			if err != nil {
				return err
			}
			if !hasKind(commits[l.VoucherID], KindBeacon) {
				return apperr.Public(apperr.ErrUnavailable, "this draw is not committed to its beacon round yet; enter again in a few seconds")
			}
			checked = true
		}
		var st State
		switch age, _ := strconv.ParseInt(e.EntryID, 10, 64); {
		case code == codeMarked:
			var fresh bool
			if st, fresh, err = s.record.OpenDraw(ctx, l.VoucherID); err != nil {
				return err
			}
			if st.Void == "" && !fresh {
				return s.void(ctx, l, st.OpenedAt)
			}
		case time.Duration(age)*time.Millisecond > markTakeover:
			if st, _, err = s.record.OpenDraw(ctx, l.VoucherID); err != nil {
				return err
			}
		default:
			states, err := s.record.DrawStates(ctx, l.VoucherID)
			if err != nil {
				return err
			}
			var ok bool
			if st, ok = states[l.VoucherID]; !ok {
				// The mark's maker is recording the opening: wait for it.
				if attempt >= 40 {
					return apperr.Public(apperr.ErrUnavailable, "this draw's entries are opening; enter again in a moment")
				}
				select {
				case <-ctx.Done():
					return unavailable("open the entries", ctx.Err())
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
		}
		if st.Void != "" {
			return ErrVoid
		}
		if _, code, err = s.run(ctx, "confirm", l, 0); err != nil {
			return err
		}
		if code == codeUnmarked {
			return s.void(ctx, l, st.OpenedAt)
		}
		return nil
	}
}

// markTakeover is how long an opening mark may stay unconfirmed before
// another opener takes over (its maker died between the two steps; no
// entry is taken meanwhile).
const markTakeover = 5 * time.Second

func hasKind(cs []Commitment, kind string) bool {
	for _, c := range cs {
		if c.Kind == kind {
			return true
		}
	}
	return false
}

// void ends l's draw as void: its entries, open since opened, are gone
// from Redis before the draw.
func (s *Store) void(ctx context.Context, l waitroom.Line, opened time.Time) error {
	why := fmt.Sprintf("the entries, open since %s, were lost from Redis before the draw", opened.UTC().Format(time.RFC3339))
	if err := s.record.VoidDraw(ctx, l.VoucherID, why); err != nil {
		return err
	}
	s.forget(l.VoucherID)
	s.log.ErrorContext(ctx, "draw void: its entries were lost before it was made; it is not drawn again",
		"voucher_id", l.VoucherID, "why", why,
		"operator", "nobody can win this draw and nothing is sold by it; to sell its stock, make a new voucher "+
			"(a new draw with its own commitments), tell the entrants, and find why Redis lost the key "+EntriesKey(l.VoucherID))
	return ErrVoid
}

func (s *Store) run(ctx context.Context, mode string, l waitroom.Line, userID int64) (EntryStatus, int64, error) {
	id := ""
	if mode == "enter" {
		var err error
		if id, err = NewEntryID(s.rand); err != nil {
			return EntryStatus{}, 0, err
		}
	}
	res, err := s.enter.Run(ctx, s.rdb, []string{EntriesKey(l.VoucherID)}, mode, userID, l.Opens().UnixMilli(),
		l.BeginAt.UnixMilli(), id, s.expireAt(l)).Slice()
	if err != nil {
		return EntryStatus{}, 0, unavailable("draw "+mode, err)
	}
	if len(res) != 4 {
		return EntryStatus{}, 0, fmt.Errorf("draw: draw_enter.lua answered %v", res)
	}
	code, _ := res[0].(int64)
	n, _ := res[1].(int64)
	ms, _ := res[2].(int64)
	eid, _ := res[3].(string)
	return EntryStatus{Entered: code == codeEntered && eid != "", EntryID: eid, Entries: n, At: time.UnixMilli(ms)}, code, nil
}

// Extend moves the expiry of l's entries to l's end plus the grace: a
// sale whose end moved later keeps its draw as long as its stock and room.
func (s *Store) Extend(ctx context.Context, l waitroom.Line) error {
	if err := s.rdb.PExpireAt(ctx, EntriesKey(l.VoucherID), time.UnixMilli(s.expireAt(l))).Err(); err != nil {
		return unavailable("extend the entries", err)
	}
	return nil
}

// readEntries reads every entry of voucherID's draw from Redis, a page
// at a time.
func (s *Store) readEntries(ctx context.Context, voucherID int64) ([]Entry, error) {
	var out []Entry
	it := s.rdb.HScan(ctx, EntriesKey(voucherID), 0, "u:*", 1000).Iterator()
	for it.Next(ctx) {
		field := it.Val()
		if !it.Next(ctx) {
			break
		}
		uid, err := strconv.ParseInt(strings.TrimPrefix(field, "u:"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("draw: entry %q: %w", field, err)
		}
		out = append(out, Entry{EntryID: it.Val(), UserID: uid})
	}
	if err := it.Err(); err != nil {
		return nil, unavailable("read the entries", err)
	}
	return out, nil
}

// forget drops the cached face of voucherID, so the next read is the
// record's.
func (s *Store) forget(voucherID int64) {
	s.mu.Lock()
	delete(s.faces, voucherID)
	s.mu.Unlock()
}

// ErrNotDrawn is the answer about a draw that has not been made yet.
var ErrNotDrawn = apperr.Public(seckill.ErrNotStarted, "this voucher has not been drawn yet")

func unavailable(what string, err error) error {
	return fmt.Errorf("draw: %s: %w: %w", what, apperr.ErrUnavailable, err)
}

var errNoBeacon = errors.New("draw: no beacon round committed")
