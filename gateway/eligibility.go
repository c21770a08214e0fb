package gateway

// Who may join a voucher's line or enter its draw (gateway/openapi.yaml,
// Entry and EntryToken; seckill/eligibility/README.md): the check both the
// line and the draw go through before the join, and the operator's
// allowlist upload.

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/eligibility"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// HeaderEntryToken carries the merchant's entry token on a join of a
// voucher whose entry requires one.
const HeaderEntryToken = "Seckill-Entry-Token"

// maxAllowlistUpload is the most entries one upload carries (the body
// limit allows about as many user ids; send a long list in several).
const maxAllowlistUpload = 500

// Eligibility is the entry check and the allowlists (*eligibility.Gate
// and its Store implement it).
type Eligibility interface {
	// Check judges a shopper's entry with the token sent ("" when none);
	// a refusal wraps seckill.ErrNotEligible.
	Check(ctx context.Context, v seckill.Voucher, userID int64, token string) (eligibility.Entry, error)
	// Claim gives the entry's person the place being taken; another
	// account of the same person is seckill.ErrNotEligible.
	Claim(ctx context.Context, v seckill.Voucher, userID int64, e eligibility.Entry) error
	// AddAllowlist adds to the voucher's allowlist and returns its size.
	AddAllowlist(ctx context.Context, v seckill.Voucher, list eligibility.Allowlist) (int64, error)
	// ClearAllowlist empties it.
	ClearAllowlist(ctx context.Context, v seckill.Voucher) error
}

// hasEntryRule reports whether v takes entries only from some shoppers.
func hasEntryRule(v seckill.Voucher) bool {
	return v.Entry != nil && (v.Entry.TokenRequired || v.Entry.Allowlist)
}

// entryCheck is the first half of the eligibility step of a join: the
// token and the allowlist, before the captcha is spent.
func (s *Server) entryCheck(c *fiber.Ctx, v seckill.Voucher) (eligibility.Entry, error) {
	if !hasEntryRule(v) {
		return eligibility.Entry{}, nil
	}
	if s.deps.Eligibility == nil {
		return eligibility.Entry{}, apperr.Public(apperr.ErrUnavailable, "entries to this voucher cannot be checked on this server")
	}
	token := strings.TrimSpace(c.Get(HeaderEntryToken))
	return s.deps.Eligibility.Check(c.UserContext(), v, userIDOf(c), token)
}

// entryClaim is its second half, the last step before the join: the
// person's one place.
func (s *Server) entryClaim(c *fiber.Ctx, v seckill.Voucher, e eligibility.Entry) error {
	if !hasEntryRule(v) {
		return nil
	}
	return s.deps.Eligibility.Claim(c.UserContext(), v, userIDOf(c), e)
}

// laneOf is the room's lane of an entry: a voucher that requires entry
// tokens splits its pre-queue by lane; any other keeps one.
func laneOf(v seckill.Voucher, e eligibility.Entry) waitroom.Lane {
	switch {
	case v.Entry == nil || !v.Entry.TokenRequired:
		return waitroom.LaneNone
	case e.Lane == eligibility.LanePriority:
		return waitroom.LanePriority
	}
	return waitroom.LaneStandard
}

// allowlistVoucher is the voucher of an allowlist route: one that takes
// entries from its allowlist.
func (s *Server) allowlistVoucher(c *fiber.Ctx) (seckill.Voucher, error) {
	id, err := parseID(c.Params("id"), "id", "the voucher id")
	if err != nil {
		return seckill.Voucher{}, err
	}
	v, err := s.deps.Catalog.Voucher(c.UserContext(), id)
	if err != nil {
		return seckill.Voucher{}, err
	}
	if v.Entry == nil || !v.Entry.Allowlist {
		return seckill.Voucher{}, apperr.Public(apperr.ErrConflict,
			"this voucher takes no allowlist: create it with entry.allowlist set")
	}
	if s.deps.Eligibility == nil {
		return seckill.Voucher{}, apperr.Public(apperr.ErrUnavailable, "allowlists are not available on this server")
	}
	return v, nil
}

// addAllowlist is POST /api/v1/admin/vouchers/{id}/allowlist: user ids
// and person keys added to the voucher's allowlist.
func (s *Server) addAllowlist(c *fiber.Ctx, act *seckill.Action) error {
	v, err := s.allowlistVoucher(c)
	if err != nil {
		return err
	}
	var in api.Allowlist
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	list, err := allowlistIn(in)
	if err != nil {
		return err
	}
	n, err := s.deps.Eligibility.AddAllowlist(c.UserContext(), v, list)
	if err != nil {
		return err
	}
	// The trail keeps the counts, not the keys: a person key is the
	// merchant's, for the check alone.
	sum := fmt.Appendf(nil, `{"user_ids":%d,"person_keys":%d}`, len(list.UserIDs), len(list.Persons))
	if err := s.recordAllowlist(c, act, v, seckill.ActionAddAllowlist, sum); err != nil {
		return err
	}
	return c.JSON(api.AllowlistSize{VoucherID: idString(v.ID), Entries: n})
}

// clearAllowlist is DELETE /api/v1/admin/vouchers/{id}/allowlist.
func (s *Server) clearAllowlist(c *fiber.Ctx, act *seckill.Action) error {
	v, err := s.allowlistVoucher(c)
	if err != nil {
		return err
	}
	if err := s.deps.Eligibility.ClearAllowlist(c.UserContext(), v); err != nil {
		return err
	}
	if err := s.recordAllowlist(c, act, v, seckill.ActionClearAllowlist, []byte("{}")); err != nil {
		return err
	}
	return c.JSON(api.AllowlistSize{VoucherID: idString(v.ID), Entries: 0})
}

// recordAllowlist writes an allowlist change in the operators' trail.
func (s *Server) recordAllowlist(c *fiber.Ctx, act *seckill.Action, v seckill.Voucher, kind string, change []byte) error {
	describe(act, kind, voucherTarget(v.ID), change)
	if s.deps.Operators == nil {
		return nil
	}
	if _, err := s.deps.Operators.RecordAction(c.UserContext(), *act); err != nil {
		return apperr.Public(apperr.ErrUnavailable,
			"the allowlist changed, but its entry in the operators' trail was not written; send the change again")
	}
	return nil
}

// allowlistIn is an upload's list; a bad entry is invalid_input naming it.
func allowlistIn(in api.Allowlist) (eligibility.Allowlist, error) {
	var out eligibility.Allowlist
	if len(in.UserIDs)+len(in.PersonKeys) == 0 {
		return out, apperr.InvalidField("/user_ids", "user_ids or person_keys must name at least one entry")
	}
	if len(in.UserIDs)+len(in.PersonKeys) > maxAllowlistUpload {
		return out, apperr.InvalidField("", "one upload carries at most %d entries; send a longer list in several", maxAllowlistUpload)
	}
	for i, s := range in.UserIDs {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 1 {
			return out, apperr.InvalidField(fmt.Sprintf("/user_ids/%d", i), "user_ids/%d must be a user id (a positive integer as a string)", i)
		}
		out.UserIDs = append(out.UserIDs, id)
	}
	for i, p := range in.PersonKeys {
		if p == "" || len(p) > eligibility.MaxPersonLen {
			return out, apperr.InvalidField(fmt.Sprintf("/person_keys/%d", i), "person_keys/%d must be 1 to %d bytes", i, eligibility.MaxPersonLen)
		}
		out.Persons = append(out.Persons, p)
	}
	return out, nil
}
