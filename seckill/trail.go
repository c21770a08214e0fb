package seckill

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"regexp"
	"time"

	"github.com/flashsale/seckill/seckill/apperr"
)

// Operators and their trail (deploy/OPERATING.md, "Operators"): each
// operator has a token of their own, named and scoped, and every change an
// operator makes is one Action in an append-only trail, written in the
// change's own transaction where the change is PostgreSQL's.

// Scope is what an operator's token may do.
type Scope string

// The scopes: read sees (stats, reports, exports, the trail, the breaker's
// state); write also changes (vouchers, pauses, the breaker).
const (
	ScopeRead  Scope = "read"
	ScopeWrite Scope = "write"
)

// Valid says whether s is a scope.
func (s Scope) Valid() bool { return s == ScopeRead || s == ScopeWrite }

// Allows says whether a token of scope s may do what needs scope need.
func (s Scope) Allows(need Scope) bool {
	return s == ScopeWrite || (s == ScopeRead && need == ScopeRead)
}

// RootOperator is the name the trail gives SECKILL_ADMIN_TOKEN, the
// bootstrap credential every process is configured with: whoever holds it
// is recorded as root, never as someone in particular. No named operator
// may take the name.
const RootOperator = "root"

// CLIPrefix begins the name the trail gives a change made with the seckill
// command (an operator with the services' own credentials): "cli:" and the
// account that ran it.
const CLIPrefix = "cli:"

// Operator is one named operator's credential. The token itself is never
// stored: only its SHA-256, which is enough to recognise it (a token is 32
// random bytes, so no dictionary reaches it).
type Operator struct {
	Name        string
	Scope       Scope
	TokenSHA256 [sha256.Size]byte
	CreatedAt   time.Time
	// RevokedAt is when the token stopped working; zero while it works.
	RevokedAt time.Time
}

// operatorName is what a named operator may be called: short, plain, and
// the same in a log line, a URL and a shell.
var operatorName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidateOperatorName refuses a name the trail could confuse: one that is
// not 1 to 64 of a-z, 0-9, '.', '_' and '-' (a letter or digit first), or
// root.
func ValidateOperatorName(name string) error {
	if name == RootOperator {
		return apperr.Invalidf("%q is the name of SECKILL_ADMIN_TOKEN in the trail: choose another", RootOperator)
	}
	if !operatorName.MatchString(name) {
		return apperr.Invalidf("an operator's name is 1 to 64 of a-z, 0-9, '.', '_' and '-', beginning with a letter or digit")
	}
	return nil
}

// operatorTokenPrefix marks an operator's token, so that one pasted in the
// wrong place (a log, a chat) is recognised for what it is.
const operatorTokenPrefix = "sko_"

// NewOperatorToken returns a fresh operator token and its SHA-256, the
// only form in which it is stored.
func NewOperatorToken() (token string, digest [sha256.Size]byte) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	token = operatorTokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, sha256.Sum256([]byte(token))
}

// The kinds of Action: every change an operator can make.
const (
	ActionCreateVoucher  = "voucher.create"
	ActionPauseVoucher   = "voucher.pause"
	ActionResumeVoucher  = "voucher.resume"
	ActionChangeVoucher  = "voucher.change"
	ActionSwitchBreaker  = "breaker.switch"
	ActionClearStrikes   = "hoard.clear"
	ActionAddOperator    = "operator.add"
	ActionRevokeOperator = "operator.revoke"
	ActionAddAllowlist   = "allowlist.add"
	ActionClearAllowlist = "allowlist.clear"
	ActionRefundOrder    = "order.refund"
)

// Action is one change an operator made, as the trail keeps it: who, what,
// to what, when (the record's clock), through which request, and the
// change itself as JSON. The trail is append-only: an Action is never
// changed or removed.
type Action struct {
	ID       int64
	At       time.Time
	Operator string
	Kind     string
	// Target names what was changed: "voucher:42", "breaker", "user:42",
	// "operator:alice". A voucher's creation is given the new voucher's by
	// the record.
	Target    string
	RequestID string
	// Key is the request's Idempotency-Key ("" for none): one operator's
	// key makes one change, ever.
	Key string
	// Request is the SHA-256 of what the key stands for (the method, the
	// path and the body), so that the same key sent with another request
	// is told apart from a retry.
	Request []byte
	// Change is what was asked, as JSON (an object).
	Change json.RawMessage
}

// ErrKeyUsed marks a change refused because the operator's Idempotency-Key
// already made one: the record keeps one change per key. The stores wrap it
// together with apperr.ErrConflict; the gateway answers a retry of the same
// request with the first answer instead.
var ErrKeyUsed = errors.New("idempotency key used")

// Answer is the HTTP answer to an operator's keyed change, kept so that a
// retry with the same key is answered as the first was, without changing
// anything again.
type Answer struct {
	Status      int
	ContentType string
	Body        []byte
}

// KeyedChange is what an operator's Idempotency-Key made: its Action, and
// the answer given if it was kept (Answered).
type KeyedChange struct {
	Action   Action
	Answer   Answer
	Answered bool
}
