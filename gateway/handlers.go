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
	"github.com/flashsale/seckill/seckill/apperr"
)

// HeaderIdempotencyKey names a buy attempt so that retries hold stock once.
const HeaderIdempotencyKey = "Idempotency-Key"

// --- the wire shapes of gateway/openapi.yaml. Ids are strings (browsers lose precision
// above 2^53), times are UTC, money is cents.

type credentialsIn struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type userOut struct {
	ID       string `json:"id"`
	Username string `json:"username"`
}

type sessionOut struct {
	Token     string    `json:"token"`
	UserID    string    `json:"user_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

type voucherOut struct {
	ID              string       `json:"id"`
	Title           string       `json:"title"`
	Kind            seckill.Kind `json:"kind"`
	PriceCents      int64        `json:"price_cents"`
	StockTotal      int64        `json:"stock_total"`
	StockLeft       int64        `json:"stock_left"`
	PerUserLimit    int64        `json:"per_user_limit"`
	BeginAt         time.Time    `json:"begin_at"`
	EndAt           time.Time    `json:"end_at"`
	CaptchaRequired bool         `json:"captcha_required"`
	// State is where the sale stands (scheduled, on_sale, paused, sold_out,
	// ended), as of the catalog's last refresh.
	State seckill.State `json:"state"`
	// Shards is how many Redis buckets hold the stock (1 for most).
	Shards int `json:"shards"`
	// WaitingRoom is the voucher's line, null when buying needs no pass.
	WaitingRoom *waitingRoomJSON `json:"waiting_room"`
}

// waitingRoomJSON is a voucher's waiting room, out and in. Pointers tell a
// missing figure from zero on the way in.
type waitingRoomJSON struct {
	AdmitPerSecond  *int64 `json:"admit_per_second"`
	PrequeueSeconds *int64 `json:"prequeue_seconds"`
}

func waitingRoomOut(r *seckill.WaitingRoom) *waitingRoomJSON {
	if r == nil {
		return nil
	}
	return &waitingRoomJSON{AdmitPerSecond: &r.AdmitPerSecond, PrequeueSeconds: &r.PrequeueSeconds}
}

// room is the operator's waiting room: admit_per_second is required,
// prequeue_seconds defaults to 0 (no pre-queue).
func (r *waitingRoomJSON) room() (*seckill.WaitingRoom, error) {
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
	return room, nil
}

func voucherJSON(v seckill.Voucher) voucherOut {
	st := v.State
	if st == "" {
		st = v.StateAt(time.Now())
	}
	return voucherOut{
		State:           st,
		ID:              idString(v.ID),
		Title:           v.Title,
		Kind:            v.Kind,
		PriceCents:      v.PriceCents,
		StockTotal:      v.StockTotal,
		StockLeft:       v.StockLeft,
		PerUserLimit:    v.PerUserLimit,
		BeginAt:         v.BeginAt.UTC(),
		EndAt:           v.EndAt.UTC(),
		CaptchaRequired: v.CaptchaRequired,
		Shards:          v.ShardCount(),
		WaitingRoom:     waitingRoomOut(v.WaitingRoom),
	}
}

// voucherIn is the operator's new voucher. Pointers tell "missing" from zero.
type voucherIn struct {
	Title           *string `json:"title"`
	Kind            *string `json:"kind"`
	PriceCents      *int64  `json:"price_cents"`
	Stock           *int64  `json:"stock"`
	PerUserLimit    *int64  `json:"per_user_limit"`
	BeginAt         *string `json:"begin_at"`
	EndAt           *string `json:"end_at"`
	CaptchaRequired bool    `json:"captcha_required"`
	// Shards defaults to 1; 0 is refused rather than read as the default.
	Shards      *int             `json:"shards"`
	WaitingRoom *waitingRoomJSON `json:"waiting_room"`
}

type buyIn struct {
	Quantity      *int64 `json:"quantity"`
	CaptchaID     string `json:"captcha_id"`
	CaptchaAnswer string `json:"captcha_answer"`
}

type purchaseOut struct {
	OrderID string        `json:"order_id"`
	Status  orders.Status `json:"status"`
}

type statsOut struct {
	VoucherID  string `json:"voucher_id"`
	StockTotal int64  `json:"stock_total"`
	StockLeft  int64  `json:"stock_left"`
	Reserved   int64  `json:"reserved"`
	Created    int64  `json:"created"`
	Paid       int64  `json:"paid"`
	Cancelled  int64  `json:"cancelled"`
	Failed     int64  `json:"failed"`
	// Drift extends the v1 stats for seckill vouchers: Redis's view beside
	// PostgreSQL's, and every disagreement in words. Absent for other kinds.
	Drift *driftOut `json:"drift,omitempty"`
	// Queue is the waiting room's figures; absent for a voucher without one.
	Queue *queueStatsOut `json:"queue,omitempty"`
}

// driftOut is the drift report of one seckill voucher.
type driftOut struct {
	RedisOnSale bool     `json:"redis_on_sale"`
	RedisLeft   int64    `json:"redis_left"`
	RedisHeld   int64    `json:"redis_held"`
	Pending     int64    `json:"pending"`
	InFlight    int64    `json:"in_flight"`
	OK          bool     `json:"ok"`
	Problems    []string `json:"problems"`
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
	var in credentialsIn
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	u, err := s.deps.Accounts.Register(c.UserContext(), in.Username, in.Password)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(userOut{ID: idString(u.ID), Username: u.Username})
}

func (s *Server) login(c *fiber.Ctx) error {
	if err := s.allowCredentials(c); err != nil {
		return err
	}
	var in credentialsIn
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
	return c.JSON(sessionOut{Token: token, UserID: idString(uid), ExpiresAt: exp.UTC()})
}

// --- vouchers (the catalog routes are in catalog.go)

func (s *Server) createVoucher(c *fiber.Ctx) error {
	var in voucherIn
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
	if v.WaitingRoom, err = in.WaitingRoom.room(); err != nil {
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
	return c.JSON(statsOut{
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

func newDriftOut(st orders.Stats) *driftOut {
	if st.Redis == nil || st.Drift == nil {
		return nil
	}
	problems := st.Drift.Problems
	if problems == nil {
		problems = []string{}
	}
	return &driftOut{
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

// newPipeline builds the buy from the dependencies: the kind's sellers, the
// steps, the waiting rooms and the replays (gateway/buy).
func (s *Server) newPipeline() (*buy.Pipeline, error) {
	d := buy.Deps{
		Catalog: s.deps.Catalog,
		Steps:   s.deps.Buy,
		Seckill: buy.SeckillSeller{Buyer: s.deps.Buyer, Keys: s.deps.BuyerRequests},
		Replays: s.deps.Replays,
		Orders:  s.deps.Orders,
		Logger:  s.log,
	}
	if s.deps.SyncBuyer != nil {
		d.Sync = buy.SyncSeller{Buyer: s.deps.SyncBuyer, Keys: s.deps.SyncRequests}
	}
	if s.deps.Room != nil {
		d.Room = s.deps.Room
	}
	if s.metrics != nil {
		d.Outcome = s.metrics.countBuy
	}
	return buy.New(d)
}

// buy is POST /api/v1/vouchers/{id}/orders: decode, buy, encode.
func (s *Server) buy(c *fiber.Ctx) error {
	vid, err := parseID(c.Params("id"), "the voucher id")
	if err != nil {
		return err
	}
	key, err := idempotencyKey(c.Get(HeaderIdempotencyKey))
	if err != nil {
		return err
	}
	var in buyIn
	if err := decodeBuy(c, &in); err != nil {
		return err
	}
	qty := int64(1)
	if in.Quantity != nil {
		qty = *in.Quantity
	}
	a := &buy.Attempt{
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
	out := make([]notify.APIOrder, 0, len(list))
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
