package gateway

// The objects of gateway/openapi.yaml (seckill/api) from the domain's
// values, and the operator's objects into them: every conversion between
// the wire and the domain is here, so that a field the spec adds is added
// in one file, and a handler reads as what it does.

import (
	"time"

	"github.com/flashsale/seckill/gateway/auth"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/waitroom"
)

func voucherJSON(v seckill.Voucher) api.Voucher {
	st := v.State
	if st == "" {
		st = v.StateAt(time.Now())
	}
	return api.Voucher{
		State:           string(st),
		ID:              idString(v.ID),
		Title:           v.Title,
		Kind:            string(v.Kind),
		PriceCents:      v.PriceCents,
		Currency:        v.Currency,
		StockTotal:      v.StockTotal,
		StockLeft:       v.StockLeft,
		PerUserLimit:    v.PerUserLimit,
		BeginAt:         v.BeginAt.UTC(),
		EndAt:           v.EndAt.UTC(),
		CaptchaRequired: v.CaptchaRequired,
		Challenge:       v.Challenge(),
		Shards:          v.ShardCount(),
		WaitingRoom:     waitingRoomOut(v.WaitingRoom),
		Draw:            drawOut(v),
		Entry:           entryOut(v.Entry),
		GraceSeconds:    v.GraceSeconds,
	}
}

// entryOut is a voucher's entry rule, nil when it takes every shopper.
func entryOut(e *seckill.EntryRule) *api.Entry {
	if e == nil || (!e.TokenRequired && !e.Allowlist) {
		return nil
	}
	return &api.Entry{TokenRequired: e.TokenRequired, Allowlist: e.Allowlist}
}

func waitingRoomOut(r *seckill.WaitingRoom) *api.WaitingRoom {
	if r == nil {
		return nil
	}
	out := &api.WaitingRoom{AdmitPerSecond: &r.AdmitPerSecond, PrequeueSeconds: &r.PrequeueSeconds}
	if a := r.Adaptive; a != nil {
		out.Adaptive = &api.Adaptive{TargetP99Ms: &a.TargetP99Ms, MinPerSecond: &a.MinPerSecond, MaxPerSecond: &a.MaxPerSecond}
	}
	mode := string(seckill.RoomLine)
	if r.IsDraw() {
		mode = string(seckill.RoomDraw)
		pass := int64(r.DrawPass().Seconds())
		out.DrawPassSeconds = &pass
		if r.DrawHold {
			// Absent when false: the answers of draws without holds stay
			// as they were.
			out.DrawHold = &r.DrawHold
		}
	}
	out.Mode = &mode
	return out
}

// drawOut is a draw voucher's draw object, nil for the others.
func drawOut(v seckill.Voucher) *api.Draw {
	if !v.WaitingRoom.IsDraw() {
		return nil
	}
	d := &api.Draw{Commitments: []api.DrawCommitment{}}
	if f := v.Draw; f != nil {
		d.Entries = f.Entries
		d.Commitment, d.Seed, d.Cutoff = nonEmpty(f.Commitment), nonEmpty(f.Seed), nonEmpty(f.Cutoff)
		d.Beacon = beaconOut(f.Beacon)
		d.EntriesHash = nonEmpty(f.EntriesHash)
		d.Void, d.VoidReason = f.Void, nonEmpty(f.Why)
		for _, c := range f.Commitments[:f.NCommitments] {
			d.Commitments = append(d.Commitments, api.DrawCommitment{Kind: c.Kind, At: time.UnixMilli(c.AtMs).UTC(),
				Beacon: beaconOut(c.Beacon), EntriesHash: nonEmpty(c.EntriesHash)})
		}
	}
	return d
}

// beaconOut is a draw's beacon round, nil before one is committed.
func beaconOut(b seckill.BeaconFace) *api.Beacon {
	if b.Round == 0 {
		return nil
	}
	return &api.Beacon{Network: "drand", ChainHash: b.ChainHash, Round: b.Round,
		RoundAt: time.UnixMilli(b.RoundAtMs).UTC(), Signature: nonEmpty(b.Signature)}
}

// nonEmpty is s, or nil for "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func newDriftOut(st orders.Stats) *api.Drift {
	if st.Redis == nil || st.Drift == nil {
		return nil
	}
	problems := st.Drift.Problems
	if problems == nil {
		problems = []string{}
	}
	return &api.Drift{
		RedisOnSale: st.Redis.OnSale, RedisLeft: st.Redis.Left, RedisHeld: st.Redis.Held,
		Pending: st.Redis.Pending, InFlight: st.Drift.InFlight, OK: st.Drift.OK(), Problems: problems,
	}
}

// statsOut is a voucher's stats object: its orders by status, the drift
// between Redis and PostgreSQL, and queue, its waiting room's figures.
func statsOut(id int64, st orders.Stats, queue *api.QueueStats) api.Stats {
	return api.Stats{
		VoucherID:  idString(id),
		StockTotal: st.StockTotal,
		StockLeft:  st.StockLeft,
		Reserved:   st.Orders[orders.StatusReserved],
		Created:    st.Orders[orders.StatusCreated],
		Paid:       st.Orders[orders.StatusPaid],
		Cancelled:  st.Orders[orders.StatusCancelled],
		Failed:     st.Orders[orders.StatusFailed],
		Drift:      newDriftOut(st),
		Queue:      queue,
	}
}

// queueStatsOut is a waiting room's figures in a voucher's stats.
func queueStatsOut(st waitroom.Stats) *api.QueueStats {
	return &api.QueueStats{Waiting: st.Waiting, Admitted: st.Admitted, Expired: st.Expired, PassesUsed: st.PassesUsed}
}

// changesOut is the list of a voucher's changes, empty rather than null
// when there are none.
func changesOut(recs []seckill.ChangeRecord) []api.VoucherChangeRecord {
	out := make([]api.VoucherChangeRecord, 0, len(recs))
	for _, r := range recs {
		rec := api.VoucherChangeRecord{At: r.At.UTC(), By: r.By, AddStock: r.AddStock,
			AdmitPerSecond: r.AdmitPerSecond, StockTotal: r.StockTotal}
		if !r.EndAt.IsZero() {
			end := r.EndAt.UTC()
			rec.EndAt = &end
		}
		out = append(out, rec)
	}
	return out
}

// userOut is an account as the API shows it: never its password hash.
func userOut(u auth.User) api.User {
	return api.User{ID: idString(u.ID), Username: u.Username}
}

// newVoucherIn is the seckill.Voucher the body asks for; every missing or
// bad value is invalid_input naming its field, all of them at once.
func newVoucherIn(in api.NewVoucher) (seckill.Voucher, error) {
	var f apperr.Fields
	for _, m := range []struct {
		name    string
		missing bool
	}{
		{"title", in.Title == nil}, {"kind", in.Kind == nil}, {"price_cents", in.PriceCents == nil},
		{"stock", in.Stock == nil}, {"per_user_limit", in.PerUserLimit == nil},
		{"begin_at", in.BeginAt == nil}, {"end_at", in.EndAt == nil},
	} {
		if m.missing {
			f.Addf("/"+m.name, "%s is required", m.name)
		}
	}
	v := seckill.Voucher{CaptchaRequired: in.CaptchaRequired}
	if in.Title != nil {
		v.Title = *in.Title
	}
	if in.Kind != nil {
		v.Kind = seckill.Kind(*in.Kind)
	}
	if in.PriceCents != nil {
		v.PriceCents = *in.PriceCents
	}
	if in.Stock != nil {
		v.StockTotal, v.StockLeft = *in.Stock, *in.Stock
	}
	if in.Currency != nil {
		// Absent is the configured currency; sent, it must be one.
		v.Currency = *in.Currency
		if v.Currency == "" {
			f.Addf("/currency", "currency must be an ISO 4217 code in capitals, such as CNY, USD or JPY")
		}
	}
	if in.PerUserLimit != nil {
		v.PerUserLimit = *in.PerUserLimit
	}
	var err error
	if in.BeginAt != nil {
		if v.BeginAt, err = parseTime(*in.BeginAt, "begin_at"); err != nil {
			_ = f.Merge(err)
		}
	}
	if in.EndAt != nil {
		if v.EndAt, err = parseTime(*in.EndAt, "end_at"); err != nil {
			_ = f.Merge(err)
		}
	}
	if err := challengeIn(in, &v); err != nil {
		return seckill.Voucher{}, err
	}
	if in.Shards != nil {
		if *in.Shards < 1 {
			f.Addf("/shards", "shards must be 1 to %d", seckill.MaxShards)
		}
		v.Shards = *in.Shards
	}
	v.WaitingRoom = waitingRoomIn(in.WaitingRoom, &f)
	v.GraceSeconds = seckill.DefaultGraceSeconds
	if in.GraceSeconds != nil {
		v.GraceSeconds = *in.GraceSeconds
	}
	if e := in.Entry; e != nil && (e.TokenRequired || e.Allowlist) {
		v.Entry = &seckill.EntryRule{TokenRequired: e.TokenRequired, Allowlist: e.Allowlist}
	}
	if err := f.Merge(v.Validate()); err != nil {
		return seckill.Voucher{}, err
	}
	return v, f.Err()
}

// waitingRoomIn is the operator's waiting room: admit_per_second is
// required, prequeue_seconds defaults to 0 (no pre-queue), and an adaptive
// room needs all three of its figures. Missing figures are added to f.
func waitingRoomIn(r *api.WaitingRoom, f *apperr.Fields) *seckill.WaitingRoom {
	if r == nil {
		return nil
	}
	room := &seckill.WaitingRoom{}
	if r.AdmitPerSecond == nil {
		f.Addf("/waiting_room/admit_per_second", "waiting_room.admit_per_second is required")
	} else {
		room.AdmitPerSecond = *r.AdmitPerSecond
	}
	if r.PrequeueSeconds != nil {
		room.PrequeueSeconds = *r.PrequeueSeconds
	}
	if a := r.Adaptive; a != nil {
		ad := &seckill.Adaptive{}
		for _, m := range []struct {
			name string
			in   *int64
			out  *int64
		}{
			{"target_p99_ms", a.TargetP99Ms, &ad.TargetP99Ms},
			{"min_per_second", a.MinPerSecond, &ad.MinPerSecond},
			{"max_per_second", a.MaxPerSecond, &ad.MaxPerSecond},
		} {
			if m.in == nil {
				f.Addf("/waiting_room/adaptive/"+m.name, "waiting_room.adaptive.%s is required", m.name)
				continue
			}
			*m.out = *m.in
		}
		room.Adaptive = ad
	}
	if r.Mode != nil {
		room.Mode = seckill.RoomMode(*r.Mode)
	}
	if r.DrawPassSeconds != nil {
		room.DrawPassSeconds = *r.DrawPassSeconds
	}
	if r.DrawHold != nil {
		room.DrawHold = *r.DrawHold
	}
	return room
}

// voucherChange is the seckill.Change the body asks for; a bad value is
// invalid_input naming its field.
func voucherChange(in api.VoucherChange) (seckill.Change, error) {
	var ch seckill.Change
	var f apperr.Fields
	if in.AddStock != nil {
		if *in.AddStock < 1 || *in.AddStock > seckill.MaxStock {
			f.Addf("/add_stock", "add_stock must be 1 to %d", seckill.MaxStock)
		}
		ch.AddStock = *in.AddStock
	}
	if in.AdmitPerSecond != nil {
		if *in.AdmitPerSecond < 1 || *in.AdmitPerSecond > seckill.MaxAdmitPerSecond {
			f.Addf("/admit_per_second", "admit_per_second must be 1 to %d", seckill.MaxAdmitPerSecond)
		}
		ch.AdmitPerSecond = *in.AdmitPerSecond
	}
	if in.EndAt != nil {
		end, err := parseTime(*in.EndAt, "end_at")
		if err := f.Merge(err); err != nil {
			return ch, err
		}
		ch.EndAt = end
	}
	ch.GraceSeconds = in.GraceSeconds
	if err := f.Err(); err != nil {
		return ch, err
	}
	return ch, ch.Validate()
}

// challengeIn reads the voucher's challenge: "captcha" and captcha_required
// true are the same, and a body saying both must agree.
func challengeIn(in api.NewVoucher, v *seckill.Voucher) error {
	if in.Challenge == nil {
		return nil
	}
	switch *in.Challenge {
	case seckill.ChallengeNone:
	case seckill.ChallengeCaptcha:
		v.CaptchaRequired = true
		return nil
	case seckill.ChallengePoW:
		v.ProofOfWork = true
	default:
		return apperr.InvalidField("/challenge", "challenge must be none, captcha or pow")
	}
	if in.CaptchaRequired {
		return apperr.InvalidField("/challenge", "captcha_required true asks for challenge captcha, not %s", *in.Challenge)
	}
	return nil
}
