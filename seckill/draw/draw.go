// Package draw is a sale by verifiable draw instead of a race: shoppers
// enter during a window before the sale, and at its start every entry is
// ranked by a ticket nobody, the operator included, could know in advance.
//
// The outcome comes from a public randomness beacon (seckill/beacon): when
// the voucher is made, its draw commits to a drand round whose time is
// after begin_at. Each entry gets an opaque random entry id. At begin_at
// the entries freeze and their hash, SHA-256 of the sorted entry ids each
// followed by a newline, is published. When the round is out, its
// randomness, SHA-256 of the round's signature, decides every ticket:
// HMAC-SHA256(key = randomness, message = "<voucher_id>:<entry_id>"), in
// hex; the lowest tickets win. Until the round is signed, no value that
// decides the outcome exists anywhere, so nobody who reads the stores can
// enter only winning accounts. Anyone checks a draw from public data alone;
// the README shows how with curl, openssl and drand's library.
//
// This file is the arithmetic alone, without I/O; the entries in Redis are
// in store.go, the record in record.go, the drawing in drawer.go.
package draw

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Randomness is a beacon round's randomness: it decides every ticket.
type Randomness [sha256.Size]byte

// RandomnessOf is SHA-256 of a round's signature, as drand defines it.
func RandomnessOf(signature []byte) Randomness { return sha256.Sum256(signature) }

// String is the randomness in hex.
func (r Randomness) String() string { return hex.EncodeToString(r[:]) }

// NewEntryID is a fresh opaque entry id: 16 random bytes in hex. It says
// nothing about the shopper and nothing about the outcome.
func NewEntryID(src io.Reader) (string, error) {
	if src == nil {
		src = rand.Reader
	}
	var b [16]byte
	if _, err := io.ReadFull(src, b[:]); err != nil {
		return "", fmt.Errorf("draw: new entry id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// EntriesHash is the hex SHA-256 of the entry ids sorted (as bytes), each
// followed by "\n": what `sort | sha256sum` prints of the entry list.
func EntriesHash(ids []string) string {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	h := sha256.New()
	for _, id := range sorted {
		h.Write([]byte(id))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// EntryList is the sorted entry ids, one a line, as GET
// /api/v1/vouchers/{id}/draw/entries serves them.
func EntryList(ids []string) []byte {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	var b strings.Builder
	for _, id := range sorted {
		b.WriteString(id)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// Ticket is an entry's rank key; lower ranks first.
type Ticket [sha256.Size]byte

// String is the ticket in hex, as openssl prints the HMAC. Hex strings
// compare as the bytes do, so tickets can be compared as text too.
func (t Ticket) String() string { return hex.EncodeToString(t[:]) }

// Compare orders tickets: -1 if t ranks before u, 0 if equal, +1 after.
func (t Ticket) Compare(u Ticket) int { return bytes.Compare(t[:], u[:]) }

// ParseTicket reads a ticket written as 64 hex digits.
func ParseTicket(h string) (Ticket, error) {
	var t Ticket
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != len(t) {
		return Ticket{}, fmt.Errorf("draw: a ticket is %d hex digits, got %q", 2*len(t), h)
	}
	copy(t[:], b)
	return t, nil
}

// TicketOf is the rank key of entryID in voucherID's draw:
// HMAC-SHA256(key = randomness, message = "<voucher_id>:<entry_id>").
func TicketOf(r Randomness, voucherID int64, entryID string) Ticket {
	m := hmac.New(sha256.New, r[:])
	var buf [64]byte
	b := strconv.AppendInt(buf[:0], voucherID, 10)
	b = append(b, ':')
	b = append(b, entryID...)
	m.Write(b)
	var t Ticket
	m.Sum(t[:0])
	return t
}

// WinnersFor is how many entries win a draw of stock units when each
// winner may buy up to perUserLimit: as many as it takes to cover the
// stock with what they can take, the last one maybe taking less. A limit
// below 1 counts as 1.
func WinnersFor(stock, perUserLimit int64) int64 {
	if stock <= 0 {
		return 0
	}
	perUserLimit = max(perUserLimit, 1)
	return (stock + perUserLimit - 1) / perUserLimit
}

// Result is what a shopper's entry came to.
type Result string

// The results of an entry once drawn (the export's result column).
const (
	// Won: among the lowest tickets; the entry has a pass to buy.
	Won Result = "won"
	// Waitlisted: not among them; the entry wins, in ticket order, when a
	// winner's pass expires unused or their hold times out.
	Waitlisted Result = "waitlisted"
	// Lost: the sale is over and the entry never won.
	Lost Result = "lost"
)

// Entry is one entry of a draw: its id, its shopper and, once ranked, its
// ticket.
type Entry struct {
	EntryID string
	UserID  int64
	Ticket  Ticket
}

// Draw is a draw's ranking: every entry in ticket order, the first Winners
// of them won.
type Draw struct {
	VoucherID  int64
	Randomness Randomness
	// Ranked is every entry, lowest ticket first.
	Ranked []Entry
	// Winners is how many of Ranked won.
	Winners int
}

// Rank draws voucherID's stock among entries with the round's randomness:
// each entry is ranked by TicketOf, and the first WinnersFor(stock,
// perUserLimit) win. The order of entries does not matter.
func Rank(r Randomness, voucherID int64, entries []Entry, stock, perUserLimit int64) Draw {
	ranked := make([]Entry, len(entries))
	for i, e := range entries {
		ranked[i] = Entry{EntryID: e.EntryID, UserID: e.UserID, Ticket: TicketOf(r, voucherID, e.EntryID)}
	}
	slices.SortFunc(ranked, func(a, b Entry) int {
		if c := a.Ticket.Compare(b.Ticket); c != 0 {
			return c
		}
		// Equal tickets would take a collision of SHA-256; the entry id
		// still makes the order total.
		return strings.Compare(a.EntryID, b.EntryID)
	})
	w := min(WinnersFor(stock, perUserLimit), int64(len(ranked)))
	return Draw{VoucherID: voucherID, Randomness: r, Ranked: ranked, Winners: int(w)}
}

// Cutoff is the highest winning ticket; ok is false when nobody won.
func (d Draw) Cutoff() (t Ticket, ok bool) {
	if d.Winners == 0 {
		return Ticket{}, false
	}
	return d.Ranked[d.Winners-1].Ticket, true
}

// ResultAt is the result of the entry at rank i (0-based) of d.Ranked.
func (d Draw) ResultAt(i int) Result {
	if i < d.Winners {
		return Won
	}
	return Waitlisted
}

// Users is every entrant in ticket order: the line the waiting room seats.
func (d Draw) Users() []int64 {
	out := make([]int64, len(d.Ranked))
	for i, e := range d.Ranked {
		out[i] = e.UserID
	}
	return out
}
