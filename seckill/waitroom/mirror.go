package waitroom

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Copy is the durable copy of the rooms' places (orders/pgstore).
type Copy interface {
	// SaveRoom records, in one write, the new places of voucherID's line
	// and the admissions (the pass expiry of users already recorded);
	// saving the same again changes nothing.
	SaveRoom(ctx context.Context, voucherID int64, joined []Saved, admitted []Saved) error
}

// DefaultMirrorInterval is how often a Mirror copies each room's journal:
// what a Redis data loss can take from a room is at most about this long
// of joins and admissions.
const DefaultMirrorInterval = 200 * time.Millisecond

// mirrorBatch bounds the journal entries one copy reads of one room.
const mirrorBatch = 1000

// Mirror copies the journal of every room (see Config.Recovery) to a Copy.
// Every gateway runs one: each entry is taken from Redis by exactly one of
// them (LPOP), and one whose write failed is put back in front.
type Mirror struct {
	room     *Room
	copy     Copy
	lines    func(ctx context.Context) ([]Line, error)
	interval time.Duration
	log      *slog.Logger
}

// MirrorConfig is what NewMirror builds a Mirror from; a zero field means
// its default.
type MirrorConfig struct {
	// Room is the rooms' Redis side.
	Room *Room
	// Copy is where the places go (orders/pgstore).
	Copy Copy
	// Lines lists the rooms to copy, read at every tick.
	Lines func(ctx context.Context) ([]Line, error)
	// Interval is how often each room's journal is copied
	// (DefaultMirrorInterval).
	Interval time.Duration
	// Log gets the failures of a copy (none: discarded).
	Log *slog.Logger
}

// NewMirror returns a mirror of the rooms cfg.Lines lists to cfg.Copy. It
// starts nothing: Run does.
func NewMirror(cfg MirrorConfig) *Mirror {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultMirrorInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Mirror{room: cfg.Room, copy: cfg.Copy, lines: cfg.Lines, interval: cfg.Interval, log: cfg.Log.With("component", "waitroom")}
}

// Run copies every interval until ctx ends, then returns nil: a failing
// copy is logged and its entries copied at a later tick.
func (m *Mirror) Run(ctx context.Context) error {
	every(ctx, m.interval, m.Tick)
	return nil
}

// Tick copies what each room's journal holds now. A room that fails is
// logged and left for the next tick.
func (m *Mirror) Tick(ctx context.Context) {
	lines, err := m.lines(ctx)
	if err != nil {
		m.log.Warn("waitroom: cannot list the rooms to copy", "err", err)
		return
	}
	for _, l := range lines {
		if err := m.copyRoom(ctx, l.VoucherID); err != nil && ctx.Err() == nil {
			m.log.Warn("waitroom: room not copied to PostgreSQL; trying again (a Redis data loss now would take these places)",
				"voucher_id", l.VoucherID, "err", err)
		}
	}
}

func (m *Mirror) copyRoom(ctx context.Context, voucherID int64) error {
	k := keysOf(voucherID)
	for {
		entries, err := m.room.rdb.LPopCount(ctx, k.journal, mirrorBatch).Result()
		if errors.Is(err, redis.Nil) || (err == nil && len(entries) == 0) {
			return nil
		}
		if err != nil {
			return unavailable("read journal", err)
		}
		joined, admitted := parseJournal(entries)
		if err := m.copy.SaveRoom(ctx, voucherID, joined, admitted); err != nil {
			back := make([]any, len(entries))
			for i, e := range entries { // LPUSH reverses: the batch goes back in its order
				back[len(entries)-1-i] = e
			}
			if perr := m.room.rdb.LPush(context.WithoutCancel(ctx), k.journal, back...).Err(); perr != nil {
				return errors.Join(err, unavailable("put journal back", perr))
			}
			return err
		}
		if len(entries) < mirrorBatch {
			return nil
		}
	}
}

// parseJournal reads the entries queue_join.lua and queue_admit.lua append:
// "j:<user>:<place>" and "a:<expiry ms>:<user>,<user>...". Malformed ones are
// skipped (nothing else writes the list).
func parseJournal(entries []string) (joined, admitted []Saved) {
	for _, e := range entries {
		kind, rest, _ := strings.Cut(e, ":")
		a, b, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		switch kind {
		case "j":
			u, err1 := strconv.ParseInt(a, 10, 64)
			s, err2 := strconv.ParseInt(b, 10, 64)
			if err1 == nil && err2 == nil {
				joined = append(joined, Saved{UserID: u, Score: s})
			}
		case "a":
			ms, err := strconv.ParseInt(a, 10, 64)
			if err != nil {
				continue
			}
			for _, f := range strings.Split(b, ",") {
				if u, err := strconv.ParseInt(f, 10, 64); err == nil {
					admitted = append(admitted, Saved{UserID: u, PassExpiresAt: time.UnixMilli(ms)})
				}
			}
		}
	}
	return joined, admitted
}
