package eligibility

import (
	"context"

	"github.com/flashsale/seckill/seckill"
)

// Gate is the check a shopper passes before joining a voucher's line or
// entering its draw: Check before anything that costs the shopper a
// captcha or the store a write, Claim as the last step before the join.
type Gate struct {
	verifier *Verifier
	store    *Store
}

// NewGate returns the gate of the merchants' keys and the store.
func NewGate(verifier *Verifier, store *Store) *Gate {
	return &Gate{verifier: verifier, store: store}
}

// Check judges userID's entry of v with the entry token token (empty: none
// sent) by v's rule: nil, or a refusal wrapping seckill.ErrNotEligible. A
// voucher without a rule takes everyone (a zero Entry). The token is
// verified before the allowlist is read, so a forged flood costs no I/O.
func (g *Gate) Check(ctx context.Context, v seckill.Voucher, userID int64, token string) (Entry, error) {
	rule := v.Entry
	if rule == nil || (!rule.TokenRequired && !rule.Allowlist) {
		return Entry{}, nil
	}
	var e Entry
	if rule.TokenRequired {
		var err error
		if e, err = g.verifier.Verify(token, v.ID, userID); err != nil {
			return Entry{}, err
		}
	}
	if rule.Allowlist {
		ok, err := g.store.Allowed(ctx, v, userID, e.Person)
		if err != nil {
			return Entry{}, err
		}
		if !ok {
			return Entry{}, refuse("this voucher takes entries only from its merchant's list, and this account is not on it; ask the merchant")
		}
	}
	return e, nil
}

// Claim gives e's person the place userID is taking in v's line or draw;
// a second account of the same person is refused (seckill.ErrNotEligible).
// An entry without a person (no token required) claims nothing.
func (g *Gate) Claim(ctx context.Context, v seckill.Voucher, userID int64, e Entry) error {
	if e.Person == "" {
		return nil
	}
	return g.store.Claim(ctx, v, e.Person, userID)
}

// AddAllowlist adds list to v's allowlist (Store.AddAllowlist).
func (g *Gate) AddAllowlist(ctx context.Context, v seckill.Voucher, list Allowlist) (int64, error) {
	return g.store.AddAllowlist(ctx, v, list)
}

// ClearAllowlist empties v's allowlist (Store.ClearAllowlist).
func (g *Gate) ClearAllowlist(ctx context.Context, v seckill.Voucher) error {
	return g.store.ClearAllowlist(ctx, v)
}
