package draw

// The draws in Redis. Keys (hash tag {v42}, the voucher's, so they share a
// Redis Cluster slot with its stock and its waiting room; the layout is
// this file's alone):
//
//	draw:{v42}:meta     hash  seed (hex, set once when entries open), frozen, drawn, cutoff, winners, entries
//	draw:{v42}:entries  set   userID
//
// Exactly once, fleet-wide: every gateway runs the draw when begin_at
// comes (Drawer). draw_freeze.lua first closes the entries for good
// (frozen), so every drawer reads the same entries, and the ranking is a
// pure function of the seed and the entries: racing drawers all compute the
// same draw. Seating it in the waiting room (waitroom.Room.Seat) happens
// once, in one script; the drawers that come later only read what it
// seated. Publishing the seed comes after the seating, so nobody learns the
// seed while the result could still change.

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// Store is the fleet's draws in Redis. It is safe for concurrent use;
// every instance makes its own over the shared Redis.
type Store struct {
	rdb           redis.UniversalClient
	room          *waitroom.Room
	rand          io.Reader
	grace         time.Duration
	enter, freeze *redis.Script
}

// Config is what New builds a Store from; a zero field means its default.
type Config struct {
	// Redis holds the draws; the same Redis as Room's.
	Redis redis.UniversalClient
	// Room seats each draw's ranking: its winners get the room's passes,
	// and its waitlist is the room's line.
	Room *waitroom.Room
	// Rand is where seeds come from (crypto/rand).
	Rand io.Reader
	// Grace is how long after the sale's end the keys live
	// (seckill.DefaultStateGrace).
	Grace time.Duration
}

// New returns the draws of cfg.
func New(cfg Config) *Store {
	if cfg.Grace <= 0 {
		cfg.Grace = seckill.DefaultStateGrace
	}
	return &Store{rdb: cfg.Redis, room: cfg.Room, rand: cfg.Rand, grace: cfg.Grace,
		enter: redis.NewScript(lua.DrawEnter), freeze: redis.NewScript(lua.DrawFreeze)}
}

type keys struct{ meta, entries string }

func keysOf(voucherID int64) keys {
	p := "draw:{v" + strconv.FormatInt(voucherID, 10) + "}:"
	return keys{meta: p + "meta", entries: p + "entries"}
}

func (k keys) list() []string { return []string{k.meta, k.entries} }

func (s *Store) expireAt(l waitroom.Line) int64 { return l.EndAt.Add(s.grace).UnixMilli() }

// EntryStatus is a shopper's entry in a draw, as read.
type EntryStatus struct {
	// Entered is true once the shopper entered.
	Entered bool
	// Entries counts every entry so far.
	Entries int64
	// At is Redis's time of the read.
	At time.Time
}

// Codes of draw_enter.lua.
const (
	codeNotEntered = iota
	codeEntered
	codeNotOpen
	codeClosed
)

// Enter enters userID in l's draw, once: entering again keeps the entry.
// Before the window (PrequeueSeconds before BeginAt) it is
// seckill.ErrNotStarted; from BeginAt on, a new entry is seckill.ErrEnded
// (the draw is made of the entries in before it).
func (s *Store) Enter(ctx context.Context, l waitroom.Line, userID int64) (EntryStatus, error) {
	return s.run(ctx, "enter", l, userID)
}

// Entered reads userID's entry in l's draw.
func (s *Store) Entered(ctx context.Context, l waitroom.Line, userID int64) (EntryStatus, error) {
	return s.run(ctx, "read", l, userID)
}

// Open sets l's seed once its window has opened, so that the commitment is
// out before anyone enters; the first entry would set it too.
func (s *Store) Open(ctx context.Context, l waitroom.Line) error {
	_, err := s.run(ctx, "open", l, 0)
	return err
}

func (s *Store) run(ctx context.Context, mode string, l waitroom.Line, userID int64) (EntryStatus, error) {
	seed, err := NewSeed(s.rand)
	if err != nil {
		return EntryStatus{}, err
	}
	res, err := s.enter.Run(ctx, s.rdb, keysOf(l.VoucherID).list(), mode, userID, l.Opens().UnixMilli(),
		l.BeginAt.UnixMilli(), seed.String(), s.expireAt(l)).Int64Slice()
	if err != nil {
		return EntryStatus{}, unavailable("draw "+mode, err)
	}
	if len(res) != 3 {
		return EntryStatus{}, fmt.Errorf("draw: draw_enter.lua answered %v", res)
	}
	e := EntryStatus{Entered: res[0] == codeEntered, Entries: res[1], At: time.UnixMilli(res[2])}
	switch res[0] {
	case codeNotOpen:
		return EntryStatus{}, apperr.Public(seckill.ErrNotStarted,
			"entries to this draw open at "+l.Opens().UTC().Format(time.RFC3339)+"; enter then")
	case codeClosed:
		return EntryStatus{}, apperr.Public(seckill.ErrEnded,
			"entries to this draw closed at "+l.BeginAt.UTC().Format(time.RFC3339)+", when it was drawn")
	}
	return e, nil
}

// Outcome is what Draw found or did.
type Outcome struct {
	// Due is false before BeginAt (by Redis's clock): nothing was done.
	Due bool
	// Drew is true when this call seated the draw; false when it was
	// seated before, by this instance or another.
	Drew bool
	// Draw is the ranking, its Winners those seated.
	Draw Draw
}

// Draw draws l's sale once BeginAt has come, stock units with up to
// perUserLimit each, and seats the ranking in the waiting room. Any number
// of instances may call it, at any time, as often as they like: only the
// first seats, the others compute the same ranking and read what was
// seated.
func (s *Store) Draw(ctx context.Context, l waitroom.Line, stock, perUserLimit int64) (Outcome, error) {
	seed, ok, err := s.freezeEntries(ctx, l)
	if err != nil || !ok {
		return Outcome{}, err
	}
	users, err := s.entries(ctx, l.VoucherID)
	if err != nil {
		return Outcome{}, err
	}
	d := Rank(seed, l.VoucherID, users, stock, perUserLimit)
	seated, err := s.room.Seat(ctx, l, d.Users(), int64(d.Winners))
	if err != nil {
		return Outcome{}, err
	}
	if !seated.Now && seated.Size != int64(len(d.Ranked)) {
		// The entries are not those seated: Redis lost the draw's keys
		// (and its seed) while the room's line was restored. The seated
		// ranking stands; another seed must not be published as its.
		return Outcome{Due: true}, fmt.Errorf("draw: voucher %d: %d entries, but %d were seated: the draw's state was lost, its seed is not published",
			l.VoucherID, len(d.Ranked), seated.Size)
	}
	// The first seating stands, whatever stock this instance saw.
	d.Winners = int(min(seated.Winners, int64(len(d.Ranked))))
	f := []any{"drawn", "1", "winners", d.Winners, "entries", len(d.Ranked)}
	if cut, ok := d.Cutoff(); ok {
		f = append(f, "cutoff", cut.String())
	}
	if err := s.rdb.HSet(ctx, keysOf(l.VoucherID).meta, f...).Err(); err != nil {
		return Outcome{}, unavailable("publish the draw", err)
	}
	return Outcome{Due: true, Drew: seated.Now, Draw: d}, nil
}

// freezeEntries closes l's entries once BeginAt has come and answers the
// seed; ok is false before.
func (s *Store) freezeEntries(ctx context.Context, l waitroom.Line) (Seed, bool, error) {
	fresh, err := NewSeed(s.rand)
	if err != nil {
		return Seed{}, false, err
	}
	res, err := s.freeze.Run(ctx, s.rdb, keysOf(l.VoucherID).list(), l.BeginAt.UnixMilli(),
		fresh.String(), s.expireAt(l)).Slice()
	if err != nil {
		return Seed{}, false, unavailable("close the entries", err)
	}
	if len(res) != 3 {
		return Seed{}, false, fmt.Errorf("draw: draw_freeze.lua answered %v", res)
	}
	if frozen, _ := res[0].(int64); frozen != 1 {
		return Seed{}, false, nil
	}
	h, _ := res[1].(string)
	seed, err := ParseSeed(h)
	return seed, err == nil, err
}

// entries reads every entrant of voucherID's draw, a page at a time.
func (s *Store) entries(ctx context.Context, voucherID int64) ([]int64, error) {
	var users []int64
	it := s.rdb.SScan(ctx, keysOf(voucherID).entries, 0, "", 1000).Iterator()
	for it.Next(ctx) {
		u, err := strconv.ParseInt(it.Val(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("draw: entry %q: %w", it.Val(), err)
		}
		users = append(users, u)
	}
	if err := it.Err(); err != nil {
		return nil, unavailable("read the entries", err)
	}
	return users, nil
}

// Info is a draw's public face: the voucher's draw object.
type Info struct {
	// Commitment is the hex SHA-256 of the seed; empty before entries
	// open.
	Commitment string
	// Seed is set once the draw is published.
	Seed *Seed
	// Entries counts the entries.
	Entries int64
	// Cutoff is the highest winning ticket, set once the draw is published
	// with at least one winner.
	Cutoff *Ticket
	// Winners is how many won at the draw.
	Winners int64
}

// Info reads voucherID's draw.
func (s *Store) Info(ctx context.Context, voucherID int64) (Info, error) {
	all, err := s.infos(ctx, voucherID)
	if err != nil {
		return Info{}, err
	}
	return all[0], nil
}

// infos reads the draws of ids, in one round trip.
func (s *Store) infos(ctx context.Context, ids ...int64) ([]Info, error) {
	metas := make([]*redis.SliceCmd, len(ids))
	counts := make([]*redis.IntCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			k := keysOf(id)
			metas[i] = p.HMGet(ctx, k.meta, "seed", "drawn", "cutoff", "winners")
			counts[i] = p.SCard(ctx, k.entries)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("read the draws", err)
	}
	out := make([]Info, len(ids))
	for i := range ids {
		f := metas[i].Val()
		str := func(j int) string { v, _ := f[j].(string); return v }
		info := Info{Entries: counts[i].Val()}
		if h := str(0); h != "" {
			seed, err := ParseSeed(h)
			if err != nil {
				return nil, err
			}
			info.Commitment = seed.Commitment()
			if str(1) == "1" {
				info.Seed = &seed
				info.Winners, _ = strconv.ParseInt(str(3), 10, 64)
				if t, err := parseTicket(str(2)); err == nil {
					info.Cutoff = &t
				}
			}
		}
		out[i] = info
	}
	return out, nil
}

// DrawFaces reads the public faces of the draws of voucherIDs for the
// catalog (seckill.DrawFaces); a draw whose entries have not opened is
// left out.
func (s *Store) DrawFaces(ctx context.Context, voucherIDs ...int64) (map[int64]seckill.DrawFace, error) {
	all, err := s.infos(ctx, voucherIDs...)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]seckill.DrawFace, len(all))
	for i, info := range all {
		if info.Commitment != "" {
			out[voucherIDs[i]] = info.Face()
		}
	}
	return out, nil
}

// Face is info as the voucher shows it.
func (info Info) Face() seckill.DrawFace {
	f := seckill.DrawFace{Commitment: info.Commitment, Entries: info.Entries}
	if info.Seed != nil {
		f.Seed = info.Seed.String()
	}
	if info.Cutoff != nil {
		f.Cutoff = info.Cutoff.String()
	}
	return f
}

func parseTicket(h string) (Ticket, error) {
	s, err := ParseSeed(h) // a ticket is 32 bytes in hex too
	return Ticket(s), err
}

// Export writes l's entry list as CSV, user_id,ticket,result, in rank
// order, for an audit: won for every entry that won (at the draw or from
// the waitlist since), waitlisted for the others while the sale is on, lost
// once it is over. Before the draw it is ErrNotDrawn.
func (s *Store) Export(ctx context.Context, l waitroom.Line, w io.Writer) error {
	info, err := s.Info(ctx, l.VoucherID)
	if err != nil {
		return err
	}
	if info.Seed == nil {
		return ErrNotDrawn
	}
	seated, ok, err := s.room.Seated(ctx, l.VoucherID)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotDrawn
	}
	users, err := s.entries(ctx, l.VoucherID)
	if err != nil {
		return err
	}
	d := Rank(*info.Seed, l.VoucherID, users, 0, 1)
	over := seated.Closed || !time.Now().Before(l.EndAt)
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"user_id", "ticket", "result"}); err != nil {
		return fmt.Errorf("draw: export: %w", err)
	}
	for i, e := range d.Ranked {
		r := Waitlisted
		switch {
		case int64(i) < seated.Head:
			r = Won
		case over:
			r = Lost
		}
		if err := cw.Write([]string{strconv.FormatInt(e.UserID, 10), e.Ticket.String(), string(r)}); err != nil {
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

// ErrNotDrawn is the answer about a draw that has not been made yet.
var ErrNotDrawn = apperr.Public(seckill.ErrNotStarted, "this voucher has not been drawn yet")

func unavailable(what string, err error) error {
	return fmt.Errorf("draw: %s: %w: %w", what, apperr.ErrUnavailable, err)
}
