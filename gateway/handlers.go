package gateway

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// HeaderIdempotencyKey names a buy attempt so that retries hold stock once.
const HeaderIdempotencyKey = "Idempotency-Key"

// --- the objects of gateway/openapi.yaml (seckill/api) from the domain's values

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
	}
	out.Mode = &mode
	return out
}

// drawOut is a draw voucher's draw object, nil for the others.
func drawOut(v seckill.Voucher) *api.Draw {
	if !v.WaitingRoom.IsDraw() {
		return nil
	}
	d := &api.Draw{}
	if f := v.Draw; f != nil {
		d.Entries = f.Entries
		d.Commitment, d.Seed, d.Cutoff = nonEmpty(f.Commitment), nonEmpty(f.Seed), nonEmpty(f.Cutoff)
	}
	return d
}

// nonEmpty is s, or nil for "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// waitingRoomIn is the operator's waiting room: admit_per_second is
// required, prequeue_seconds defaults to 0 (no pre-queue), and an adaptive
// room needs all three of its figures.
func waitingRoomIn(r *api.WaitingRoom) (*seckill.WaitingRoom, error) {
	if r == nil {
		return nil, nil
	}
	if r.AdmitPerSecond == nil {
		return nil, invalid("waiting_room.admit_per_second is required")
	}
	room := &seckill.WaitingRoom{AdmitPerSecond: *r.AdmitPerSecond}
	if r.PrequeueSeconds != nil {
		room.PrequeueSeconds = *r.PrequeueSeconds
	}
	if a := r.Adaptive; a != nil {
		switch {
		case a.TargetP99Ms == nil:
			return nil, invalid("waiting_room.adaptive.target_p99_ms is required")
		case a.MinPerSecond == nil:
			return nil, invalid("waiting_room.adaptive.min_per_second is required")
		case a.MaxPerSecond == nil:
			return nil, invalid("waiting_room.adaptive.max_per_second is required")
		}
		room.Adaptive = &seckill.Adaptive{TargetP99Ms: *a.TargetP99Ms, MinPerSecond: *a.MinPerSecond, MaxPerSecond: *a.MaxPerSecond}
	}
	if r.Mode != nil {
		room.Mode = seckill.RoomMode(*r.Mode)
	}
	if r.DrawPassSeconds != nil {
		room.DrawPassSeconds = *r.DrawPassSeconds
	}
	return room, nil
}

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
		StockTotal:      v.StockTotal,
		StockLeft:       v.StockLeft,
		PerUserLimit:    v.PerUserLimit,
		BeginAt:         v.BeginAt.UTC(),
		EndAt:           v.EndAt.UTC(),
		CaptchaRequired: v.CaptchaRequired,
		Shards:          v.ShardCount(),
		WaitingRoom:     waitingRoomOut(v.WaitingRoom),
		Draw:            drawOut(v),
	}
}

// --- accounts

// allowCredentials asks the per-IP limit (Gates.Credentials) of the
// anonymous routes that cost us something: registration, login, captchas.
func (s *Server) allowCredentials(c *fiber.Ctx) error {
	if s.deps.Gates.Credentials == nil {
		return nil
	}
	return s.deps.Gates.Credentials.Allow(c.UserContext(), s.clientKey(c))
}

func (s *Server) register(c *fiber.Ctx) error {
	if err := s.allowCredentials(c); err != nil {
		return err
	}
	var in api.Credentials
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	u, err := s.deps.Accounts.Register(c.UserContext(), in.Username, in.Password)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(api.User{ID: idString(u.ID), Username: u.Username})
}

func (s *Server) login(c *fiber.Ctx) error {
	if err := s.allowCredentials(c); err != nil {
		return err
	}
	var in api.Credentials
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	names := s.deps.Gates.LoginName
	charged := names != nil && in.Username != ""
	if charged {
		if err := names.Take(c.UserContext(), in.Username); err != nil {
			return err
		}
	}
	token, uid, exp, err := s.deps.Accounts.Login(c.UserContext(), in.Username, in.Password)
	if charged && !errors.Is(err, apperr.ErrUnauthenticated) {
		// Only wrong credentials spend the budget: the owner's successes
		// (and our own failures) leave it to the owner.
		names.Refund(context.WithoutCancel(c.UserContext()), in.Username)
	}
	if err != nil {
		return err
	}
	return c.JSON(api.Session{Token: token, UserID: idString(uid), ExpiresAt: exp.UTC()})
}

// --- vouchers (the catalog routes are in catalog.go)

func (s *Server) createVoucher(c *fiber.Ctx) error {
	var in api.NewVoucher
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	for _, f := range []struct {
		name    string
		missing bool
	}{
		{"title", in.Title == nil}, {"kind", in.Kind == nil}, {"price_cents", in.PriceCents == nil},
		{"stock", in.Stock == nil}, {"per_user_limit", in.PerUserLimit == nil},
		{"begin_at", in.BeginAt == nil}, {"end_at", in.EndAt == nil},
	} {
		if f.missing {
			return invalid(f.name + " is required")
		}
	}
	begin, err := parseTime(*in.BeginAt, "begin_at")
	if err != nil {
		return err
	}
	end, err := parseTime(*in.EndAt, "end_at")
	if err != nil {
		return err
	}
	v := seckill.Voucher{
		Title:           *in.Title,
		Kind:            seckill.Kind(*in.Kind),
		PriceCents:      *in.PriceCents,
		StockTotal:      *in.Stock,
		StockLeft:       *in.Stock,
		PerUserLimit:    *in.PerUserLimit,
		BeginAt:         begin,
		EndAt:           end,
		CaptchaRequired: in.CaptchaRequired,
	}
	if in.Shards != nil {
		if *in.Shards < 1 {
			return apperr.Invalidf("shards must be 1 to %d", seckill.MaxShards)
		}
		v.Shards = *in.Shards
	}
	if v.WaitingRoom, err = waitingRoomIn(in.WaitingRoom); err != nil {
		return err
	}
	if err := v.Validate(); err != nil {
		return err
	}
	created, err := s.deps.Catalog.Create(c.UserContext(), v)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(voucherJSON(created))
}

func (s *Server) voucherStats(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "the voucher id")
	if err != nil {
		return err
	}
	st, err := s.deps.Stats.Stats(c.UserContext(), id)
	if err != nil {
		return err
	}
	queue, err := s.queueStats(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(api.Stats{
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
	})
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

// --- buying

// idempotencyKey validates the header and returns the gateway's own copy
// (the key travels on to Redis and Kafka, long after fasthttp reuses its
// buffer). Visible ASCII only: it is stored and logged.
func idempotencyKey(h string) (string, error) {
	if h == "" {
		return "", nil
	}
	if len(h) > seckill.MaxRequestKey {
		return "", apperr.Invalidf("the Idempotency-Key header must be at most %d characters", seckill.MaxRequestKey)
	}
	for i := 0; i < len(h); i++ {
		if h[i] < 0x21 || h[i] > 0x7e {
			return "", invalid("the Idempotency-Key header must be visible ASCII characters without spaces")
		}
	}
	return strings.Clone(h), nil
}

// buy is POST /api/v1/vouchers/{id}/orders: decode, buy, encode.
func (s *Server) buy(c *fiber.Ctx) (err error) {
	vid, err := parseID(c.Params("id"), "the voucher id")
	if err != nil {
		return err
	}
	var a *buy.Attempt
	defer func() { s.recordAttempt(a, err) }()
	key, err := idempotencyKey(c.Get(HeaderIdempotencyKey))
	if err != nil {
		return err
	}
	var in api.BuyRequest
	if err := decodeBuy(c, &in); err != nil {
		return err
	}
	qty := int64(1)
	if in.Quantity != nil {
		qty = *in.Quantity
	}
	a = &buy.Attempt{
		Request:       seckill.BuyRequest{VoucherID: vid, UserID: userIDOf(c), Quantity: qty, RequestKey: key},
		ClientKey:     s.clientKey(c),
		CaptchaID:     in.CaptchaID,
		CaptchaAnswer: in.CaptchaAnswer,
		Pass:          strings.Clone(c.Get(HeaderSeckillPass)),
	}
	if err := a.Request.Validate(); err != nil {
		return err
	}
	reachedPipeline(c.UserContext())
	p, err := s.pipeline.Buy(c.UserContext(), a)
	for k, vs := range a.Header() {
		for _, v := range vs {
			c.Response().Header.Add(k, v)
		}
	}
	if err != nil {
		return err
	}
	return writePurchase(c, p.OrderID, p.Status)
}

// --- orders

func (s *Server) listOrders(c *fiber.Ctx) error {
	uid := userIDOf(c)
	list, err := s.deps.Orders.List(c.UserContext(), uid)
	if err != nil {
		return err
	}
	// Newest first, whatever mix of Redis holds and rows the reader merged.
	slices.SortStableFunc(list, func(a, b orders.Order) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	out := make([]api.Order, 0, len(list))
	for _, o := range list {
		if o.UserID != uid {
			continue // never show someone else's order, whatever the reader did
		}
		out = append(out, notify.OrderJSON(o))
	}
	return c.JSON(out)
}

func (s *Server) getOrder(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "the order id")
	if err != nil {
		return err
	}
	uid := userIDOf(c)
	o, err := s.deps.Orders.Get(c.UserContext(), uid, id)
	if err != nil {
		return err
	}
	if o.UserID != uid {
		// The contract: someone else's order is 404, not 403: its existence is
		// not the caller's business.
		return apperr.ErrNotFound
	}
	return c.JSON(notify.OrderJSON(o))
}
