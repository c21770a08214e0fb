// Package draw is a sale by verifiable draw instead of a race: shoppers
// enter during a window before the sale, and at its start every entry is
// ranked by a key nobody could know in advance, winners first.
//
// The rank is checkable by anyone. When entries open, the sale publishes
// the commitment SHA-256(seed) of a secret random 32-byte seed; at the draw
// it publishes the seed. Each entry's rank key (its ticket) is
// HMAC-SHA256(key = seed, message = "<voucher_id>:<user_id>"), and the
// winners are the entries with the lowest tickets. So a shopper checks the
// seed against the commitment (the operator could not pick a seed after
// seeing the entries), computes their own ticket and compares it with the
// cut-off, the highest winning ticket; an auditor recomputes every ticket of
// the exported entry list. The README shows how with sha256sum and openssl.
//
// This file is the arithmetic alone, without I/O; the entries and the draw
// in Redis are in store.go.
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
)

// SeedSize is the length of a draw's seed in bytes.
const SeedSize = 32

// Seed is the secret of one draw: it decides every ticket.
type Seed [SeedSize]byte

// NewSeed draws a seed from src (crypto/rand.Reader when nil).
func NewSeed(src io.Reader) (Seed, error) {
	if src == nil {
		src = rand.Reader
	}
	var s Seed
	if _, err := io.ReadFull(src, s[:]); err != nil {
		return Seed{}, fmt.Errorf("draw: new seed: %w", err)
	}
	return s, nil
}

// ParseSeed reads a seed written as 64 hex digits.
func ParseSeed(h string) (Seed, error) {
	var s Seed
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != SeedSize {
		return Seed{}, fmt.Errorf("draw: a seed is %d hex digits, got %q", 2*SeedSize, h)
	}
	copy(s[:], b)
	return s, nil
}

// String is the seed in hex, as published at the draw.
func (s Seed) String() string { return hex.EncodeToString(s[:]) }

// Commitment is the hex SHA-256 of the seed's 32 bytes, published when
// entries open: it binds the draw to a seed chosen before any entry.
func (s Seed) Commitment() string {
	sum := sha256.Sum256(s[:])
	return hex.EncodeToString(sum[:])
}

// Ticket is an entry's rank key; lower ranks first.
type Ticket [sha256.Size]byte

// String is the ticket in hex, as openssl prints the HMAC. Hex strings
// compare as the bytes do, so tickets can be compared as text too.
func (t Ticket) String() string { return hex.EncodeToString(t[:]) }

// Compare orders tickets: -1 if t ranks before u, 0 if equal, +1 after.
func (t Ticket) Compare(u Ticket) int { return bytes.Compare(t[:], u[:]) }

// TicketOf is the rank key of userID's entry in voucherID's draw:
// HMAC-SHA256(key = seed, message = "<voucher_id>:<user_id>") in decimal.
func TicketOf(s Seed, voucherID, userID int64) Ticket {
	m := hmac.New(sha256.New, s[:])
	var buf [48]byte
	b := strconv.AppendInt(buf[:0], voucherID, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, userID, 10)
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

// Entry is one ranked entry of a draw.
type Entry struct {
	UserID int64
	Ticket Ticket
}

// Draw is a draw's ranking: every entry in ticket order, the first Winners
// of them won.
type Draw struct {
	VoucherID int64
	Seed      Seed
	// Ranked is every entry, lowest ticket first.
	Ranked []Entry
	// Winners is how many of Ranked won.
	Winners int
}

// Rank draws voucherID's stock among users with seed: each user is ranked
// by TicketOf, and the first WinnersFor(stock, perUserLimit) win. The
// order of users does not matter, nor does a user listed twice (an
// account has one entry).
func Rank(s Seed, voucherID int64, users []int64, stock, perUserLimit int64) Draw {
	uniq := slices.Clone(users)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	ranked := make([]Entry, len(uniq))
	for i, u := range uniq {
		ranked[i] = Entry{UserID: u, Ticket: TicketOf(s, voucherID, u)}
	}
	slices.SortFunc(ranked, func(a, b Entry) int {
		if c := a.Ticket.Compare(b.Ticket); c != 0 {
			return c
		}
		// Equal tickets would take a collision of SHA-256; the user id
		// still makes the order total.
		return cmpInt(a.UserID, b.UserID)
	})
	w := min(WinnersFor(stock, perUserLimit), int64(len(ranked)))
	return Draw{VoucherID: voucherID, Seed: s, Ranked: ranked, Winners: int(w)}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
