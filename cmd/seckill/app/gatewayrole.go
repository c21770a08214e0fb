package app

// The gateway role's wiring: the HTTP face and what only it needs.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/gateway/auth"
	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/orders/payment/stripepay"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/salereport"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/draw"
	"github.com/flashsale/seckill/seckill/eligibility"
	"github.com/flashsale/seckill/seckill/fleethealth"
	"github.com/flashsale/seckill/seckill/hoard"
	"github.com/flashsale/seckill/seckill/orderid"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/flashsale/seckill/seckill/waitroom"
	"github.com/flashsale/seckill/web"
)

// buildGateway builds the HTTP face and what only it needs: the order id
// lease, the Kafka producer and the WebSocket hub.
func (s *System) buildGateway(ctx context.Context) error {
	var err error
	s.lease, err = orderid.LeaseNode(ctx, s.rdb, s.log)
	if err != nil {
		return fmt.Errorf("order id node: %w", err)
	}
	ids, err := orderid.New(s.lease.Node())
	if err != nil {
		return err
	}
	s.producer, err = kafkaq.NewProducer(s.cfg.KafkaBrokers, s.cfg.KafkaTopic, s.log, kafkaq.WithMetrics(s.metrics.kafka), kafkaq.WithTracer(s.tracer()))
	if err != nil {
		return fmt.Errorf("kafka producer: %w", err)
	}
	s.hub, err = notify.NewHub(notify.HubConfig{Redis: s.rdb, Log: s.log, Registerer: s.registry, Tracer: s.tracer()})
	if err != nil {
		return err
	}
	tokens, err := auth.NewTokens([]byte(s.cfg.JWTSecret), s.cfg.TokenTTL)
	if err != nil {
		return err
	}
	s.room = s.newRoom()
	if s.feed, err = waitroom.NewFeed(waitroom.FeedConfig{Room: s.room, Out: s.hub, Registerer: s.registry, Log: s.log}); err != nil {
		return err
	}
	s.adapter, err = waitroom.NewAdapter(waitroom.AdapterConfig{Redis: s.rdb, Vouchers: waitroom.CatalogVouchers(s.catalog),
		Health: fleetHealth(fleethealth.NewBoard(s.rdb)), Rule: waitroom.Rule{MaxLag: s.cfg.RoomMaxLag}, Grace: s.cfg.StateGrace, Registerer: s.registry, Log: s.log})
	if err != nil {
		return err
	}
	admitMetrics, err := waitroom.NewAdmitMetrics(s.registry)
	if err != nil {
		return err
	}
	s.admitter = waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: s.room, Metrics: admitMetrics,
		Targets: s.adapter.Targets(waitroom.CatalogTargets(s.catalog, s.stock, s.store)), Log: s.log,
		OnStep: func(id int64, st waitroom.Step) { s.sales.Step(id, st.Admitted, st.Waiting) }})
	drawMetrics, err := draw.NewMetrics(s.registry)
	if err != nil {
		return err
	}
	s.drawer = draw.NewDrawer(draw.DrawerConfig{Draws: s.draws, Targets: draw.CatalogTargets(s.catalog), Log: s.log, Metrics: drawMetrics})
	s.mirror = waitroom.NewMirror(waitroom.MirrorConfig{Room: s.room, Copy: s.store, Lines: s.roomLines, Log: s.log})
	active := orders.NewActiveCache(s.store, time.Second)
	gates, err := s.buildEdge()
	if err != nil {
		return err
	}
	// The fleet's voucher changes and returned stock, read again at once.
	s.announcements = redisstock.NewWatcher(redisstock.WatcherConfig{Redis: s.rdb, Log: s.log, On: map[string]func(int64){
		redisstock.CatalogChannel: s.catalog.Changed,
		redisstock.StockChannel:   s.catalog.StockChanged,
	}})
	caps, err := s.cfg.sizeConnCaps(s.log)
	if err != nil {
		return err
	}
	reader := orders.NewReader(orders.ReaderConfig{Record: s.store, Stock: s.stock, Active: active.IDs})
	entryKeys, err := eligibility.ParseKeys(s.cfg.EntryTokenKeys)
	if err != nil {
		return err
	}
	entries := eligibility.NewGate(eligibility.NewVerifier(entryKeys, nil), eligibility.NewStore(s.rdb, s.cfg.StateGrace))
	pipeline, err := s.buildBuy(gates, ids, reader)
	if err != nil {
		return err
	}
	life := s.lifecycle(s.store)
	s.server, err = gateway.New(gateway.Config{
		AdminToken:      s.cfg.AdminToken,
		AllowedOrigins:  s.cfg.AllowedOrigins,
		TrustedProxies:  s.cfg.TrustedProxies,
		MaxConns:        caps.maxConns,
		MaxConnsPerAddr: s.cfg.ConnsPerAddr,
		// Registering takes a solved captcha (SECKILL_REGISTER_CHALLENGE).
		RegisterChallenge: s.cfg.RegisterChallenge,
	}, gateway.Deps{
		Catalog:    s.catalog,
		Buy:        pipeline,
		Gates:      gates.Gates(),
		Captchas:   gates.Captchas,
		Challenges: gates.Challenges,
		Breaker:    gates.Breaker,
		Orders:     reader,
		Stats:      s.statsService(),
		Accounts:   auth.NewAccounts(userStore{s.store}, tokens),
		Tokens:     tokens,
		Checks:     s.checks(),
		Static:     web.FS(),
		Logger:     s.log,
		Tracer:     s.tracer(),

		// The gateway's collectors: requests, latency by route, buy outcomes.
		Registerer: s.registry,

		Lifecycle: life,
		// Payments through the provider, its webhook and operators' refunds.
		Payments:       life,
		PaymentMetrics: s.metrics.pay,
		StripeEvents:   s.stripeEvents(),
		// Order status pushed on GET /api/v1/ws, from every instance's changes.
		Live: gateway.Live{Feed: s.hub, MaxPublicSockets: caps.maxSockets,
			SignedInReserve:   caps.liveReserve(),
			MaxSocketsPerAddr: s.cfg.WSPerAddr, AnonymousMaxAge: s.cfg.WSAnonMaxAge,
			MessageRate: s.cfg.WSMsgRate, MessageBurst: s.cfg.WSMsgBurst},
		Room:       s.room,
		AdmitRates: s.adapter,
		Draws:      s.draws,
		Holds:      s.drawHolds(),
		// The sale report: attempts counted in memory, the report read from
		// PostgreSQL (orders/salereport).
		Sales:   s.sales,
		Reports: salereport.NewReports(s.store),
		// Named operators' tokens and the trail of every operator's change.
		Operators: s.store,
		// Who may join a line or enter a draw: entry tokens, allowlists.
		Eligibility: entries,
		// Where shoppers want their turn told: push subscriptions, address.
		Reminders: s.reminder.Store(),
		PushKey:   s.reminder.PublicKey(),
	})
	return err
}

// requestOrders finds a request key's order in the stock's record of
// accepted requests, then in PostgreSQL (a key the stock no longer has:
// its sale state expired or is being restored; or one whose order the stock
// calls undecided, which PostgreSQL has once a worker persisted it).
type requestOrders struct {
	stock *redisstock.Store
	store *pgstore.Store
}

// RequestOrder implements buy.RequestOrders.
func (r requestOrders) RequestOrder(ctx context.Context, voucherID, userID int64, key string) (int64, bool, error) {
	id, found, err := r.stock.RequestOrder(ctx, voucherID, redisstock.Request{UserID: userID, Key: key})
	if err == nil && found {
		return id, true, nil
	}
	pid, pfound, perr := r.store.OrderIDByRequestKey(ctx, userID, voucherID, key)
	switch {
	case perr == nil && pfound:
		return pid, true, nil
	case perr != nil:
		return 0, false, perr
	}
	// PostgreSQL has no such order; the stock's failure (if any) stays
	// the answer, since it may have known one.
	return 0, false, err
}

// stockRequests are the requests the stock accepted (buy.RequestKeys).
type stockRequests struct{ stock *redisstock.Store }

// RequestKnown implements buy.RequestKeys.
func (r stockRequests) RequestKnown(ctx context.Context, voucherID, userID int64, key string) (bool, error) {
	return r.stock.RequestKnown(ctx, voucherID, redisstock.Request{UserID: userID, Key: key})
}

// roomSecret keys the waiting rooms' HMACs (passes, pre-queue places). It is
// derived from the token secret, which every gateway of the fleet shares,
// under a label of its own so that neither key tells anything of the other.
func roomSecret(jwtSecret string) []byte {
	m := hmac.New(sha256.New, []byte(jwtSecret))
	m.Write([]byte("seckill waiting room"))
	return m.Sum(nil)
}

// userStore adapts the PostgreSQL store to the accounts' needs.
type userStore struct{ store *pgstore.Store }

func (u userStore) CreateUser(ctx context.Context, username, passwordHash string) (int64, error) {
	return u.store.CreateUser(ctx, username, passwordHash)
}

func (u userStore) UserByName(ctx context.Context, username string) (auth.User, error) {
	usr, err := u.store.UserByName(ctx, username)
	return auth.User{ID: usr.ID, Username: usr.Username, PasswordHash: usr.PasswordHash}, err
}

// buildBuy builds the buy of the gateway: each kind's seller, the gates'
// steps with the unpaid strikes' check, the waiting rooms and the replays,
// in the order buy.Pipeline runs them.
func (s *System) buildBuy(gates *edge.Edge, ids seckill.OrderIDs, reader *orders.Reader) (*buy.Pipeline, error) {
	steps := gates.Steps()
	// The strikes judged from this gateway's copy of who has any, so a
	// buy of a shopper without strikes reads none (seckill/hoard/watch.go).
	s.strikesWatch = s.strikes.Watch(hoard.WatchConfig{Log: s.log})
	steps.Hoard = s.strikesWatch
	return buy.New(buy.Deps{
		Catalog: s.catalog,
		Steps:   steps,
		// A replayed Idempotency-Key needs no new captcha, whatever the kind.
		Seckill: buy.SeckillSeller{Keys: stockRequests{s.stock},
			Buyer: seckill.NewBuyer(seckill.BuyerConfig{Stock: s.stock, Queue: s.producer, IDs: ids, Log: s.log,
				HealRequests: s.stock, KeyedOrders: s.store, OrderFences: s.store})},
		// Limit and common vouchers: sold in PostgreSQL (cmd/seckill/app/lifecycle.go).
		Sync:    buy.SyncSeller{Buyer: s.syncBuyer(ids), Keys: s.store},
		Room:    s.room,
		Replays: requestOrders{stock: s.stock, store: s.store},
		Orders:  reader,
		Logger:  s.log,
	})
}

// stripeEvents is the check of Stripe's webhook deliveries, nil (every
// delivery refused) when Stripe is not the provider. A nil *Stripe must
// not become a non-nil interface.
// drawHolds are the draws' card holds, nil unless the provider holds money
// (Stripe): a nil interface, not a typed nil, so the gateway refuses them.
func (s *System) drawHolds() gateway.DrawHolds {
	if h := s.holds(s.store); h != nil {
		return h
	}
	return nil
}

// holds are the draws' card holds through Stripe over store, nil with
// another provider.
func (s *System) holds(store *pgstore.Store) *orders.Holds {
	if s.stripe == nil {
		return nil
	}
	return orders.NewHolds(orders.HoldsConfig{Record: store, Authorizer: s.stripe, Provider: stripepay.Name,
		Currency: s.cfg.Currency, Log: s.log})
}

func (s *System) stripeEvents() payment.Verifier {
	if s.stripe == nil {
		return nil
	}
	return s.stripe
}
