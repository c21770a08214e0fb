package draw

import (
	"context"
	"time"
)

// Record is the durable side of the draws, in PostgreSQL
// (orders/pgstore implements it): every commitment a draw showed,
// append-only; when its entries opened and how it ended; its frozen
// entries.
type Record interface {
	// Commit records voucherID's commitment of kind ("beacon" or
	// "entries_hash") unless one of that kind is recorded, and answers
	// the one recorded: racing drawers all get the first.
	Commit(ctx context.Context, voucherID int64, kind string, body []byte) (Commitment, error)
	// Commitments are the commitments of ids, oldest first.
	Commitments(ctx context.Context, ids ...int64) (map[int64][]Commitment, error)
	// OpenDraw records that voucherID's entries opened, unless recorded,
	// and answers the draw's state; fresh is true when this call recorded
	// it.
	OpenDraw(ctx context.Context, voucherID int64) (st State, fresh bool, err error)
	// DrawStates are the states of ids' draws (none before they opened).
	DrawStates(ctx context.Context, ids ...int64) (map[int64]State, error)
	// VoidDraw ends voucherID's draw as void, unless it ended.
	VoidDraw(ctx context.Context, voucherID int64, why string) error
	// EndDraw ends voucherID's draw as drawn, unless it ended.
	EndDraw(ctx context.Context, voucherID int64, st State) error
	// SaveEntries records frozen entries; saving one again changes nothing.
	SaveEntries(ctx context.Context, voucherID int64, entries []Entry) error
	// Entries are voucherID's recorded entries, in no order.
	Entries(ctx context.Context, voucherID int64) ([]Entry, error)
}

// Commitment is one recorded commitment of a draw.
type Commitment struct {
	Kind string
	// Body is the commitment as JSON: a BeaconCommitment or an
	// EntriesCommitment.
	Body []byte
	At   time.Time
}

// Kinds of commitments.
const (
	KindBeacon      = "beacon"
	KindEntriesHash = "entries_hash"
)

// BeaconCommitment is the round a draw takes its randomness from.
type BeaconCommitment struct {
	Network   string    `json:"network"`
	ChainHash string    `json:"chain_hash"`
	Round     uint64    `json:"round"`
	RoundAt   time.Time `json:"round_at"`
}

// EntriesCommitment is the hash of a draw's frozen entries.
type EntriesCommitment struct {
	EntriesHash string `json:"entries_hash"`
	Entries     int64  `json:"entries"`
}

// State is a draw's life in the record.
type State struct {
	OpenedAt time.Time
	// Void, when not empty, says why the draw is void.
	Void string
	// Signature (hex), Entries, Winners and Cutoff are set once drawn.
	Signature        string
	Entries, Winners int64
	Cutoff           string
}

// Ended reports whether the draw was made or voided.
func (s State) Ended() bool { return s.Void != "" || s.Signature != "" }
