package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/gateway/auth"
	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/orderid"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/flashsale/seckill/seckill/waitroom"
	"github.com/flashsale/seckill/web"
)

// system is one process's wiring: connections to the services and the roles
// built on them.
type system struct {
	cfg      Config
	log      *slog.Logger
	registry *prometheus.Registry
	metrics  processMetrics

	// rdb is a cluster client or a plain one (openRedis); nothing else
	// knows which.
	rdb redis.UniversalClient
	// pool and store serve the gateway: the catalog, accounts, order
	// reads, synchronous buys, pay and cancel (SECKILL_DB_GATEWAY_CONNS).
	pool  *pgxpool.Pool
	store *pgstore.Store
	// workPool and workStore serve the workers, the sweeper and the
	// reconciler (SECKILL_DB_WORKER_CONNS).
	workPool  *pgxpool.Pool
	workStore *pgstore.Store
	stock     *redisstock.Store
	events    *notify.Publisher
	catalog   *seckill.Catalog

	// Built only for the roles that need them.
	lease    *orderid.Lease
	producer *kafkaq.Producer
	hub      *notify.Hub
	server   *gateway.Server
	// room, feed and admitter are the waiting rooms (seckill/waitroom):
	// every gateway admits (the clock is in Redis, so the fleet together
	// admits each room's rate) and pushes its own sockets' places.
	room     *waitroom.Room
	feed     *waitroom.Feed
	admitter *waitroom.Admitter

	// onListen, when set, is told the address once the process listens
	// (dev mode prints its banner then, not before).
	onListen func(addr string)
}

// newSystem connects to Redis and PostgreSQL and builds what the configured
// roles need. Kafka connections are made by the roles that use them.
func newSystem(ctx context.Context, cfg Config, log *slog.Logger) (_ *system, err error) {
	s := &system{cfg: cfg, log: log, registry: prometheus.NewRegistry()}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if s.metrics, err = newProcessMetrics(s.registry); err != nil {
		return nil, err
	}

	if s.rdb, err = openRedis(ctx, cfg); err != nil {
		return nil, err
	}

	// Two pools, so that no crowd of one side can take the connections the
	// other needs: a flood of logins, order reads or synchronous buys
	// waits in the gateway's pool while the workers keep persisting
	// reservations through theirs. pgxpool connects lazily, so a process
	// without the worker roles never opens the second one's connections.
	if s.pool, err = openPool(ctx, cfg.DatabaseURL, cfg.DBGatewayConns); err != nil {
		return nil, err
	}
	if s.workPool, err = openPool(ctx, cfg.DatabaseURL, cfg.DBWorkerConns); err != nil {
		return nil, err
	}

	s.store = pgstore.New(s.pool)
	s.workStore = pgstore.New(s.workPool)
	s.stock = redisstock.New(s.rdb, redisstock.WithMetrics(s.metrics.stock),
		redisstock.WithStateGrace(cfg.StateGrace), redisstock.WithIdempotencyWindow(cfg.IdempotencyWindow))
	s.events = notify.NewPublisher(s.rdb)
	s.catalog = seckill.NewCatalog(s.store, s.stock, time.Second, seckill.WithCatalogLogger(s.log),
		seckill.WithAnnouncer(redisstock.NewAnnouncer(s.rdb)))

	if cfg.hasRole(roleGateway) {
		if err := s.buildGateway(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openPool opens a pool of at most maxConns connections to the database and
// checks that it answers.
func openPool(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("SECKILL_DATABASE_URL: %w", err)
	}
	pcfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgresql: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgresql at %s does not answer: %w", pcfg.ConnConfig.Host, err)
	}
	return pool, nil
}

// buildGateway builds the HTTP face and what only it needs: the order id
// lease, the Kafka producer and the WebSocket hub.
func (s *system) buildGateway(ctx context.Context) error {
	var err error
	s.lease, err = orderid.LeaseNode(ctx, s.rdb, s.log)
	if err != nil {
		return fmt.Errorf("order id node: %w", err)
	}
	ids, err := orderid.New(s.lease.Node())
	if err != nil {
		return err
	}
	s.producer, err = kafkaq.NewProducer(s.cfg.KafkaBrokers, s.cfg.KafkaTopic, s.log, kafkaq.WithMetrics(s.metrics.kafka))
	if err != nil {
		return fmt.Errorf("kafka producer: %w", err)
	}
	s.hub, err = notify.NewHub(s.rdb, s.log, notify.Options{Registerer: s.registry})
	if err != nil {
		return err
	}
	tokens, err := auth.NewTokens([]byte(s.cfg.JWTSecret), s.cfg.TokenTTL)
	if err != nil {
		return err
	}
	s.room = waitroom.New(s.rdb, roomSecret(s.cfg.JWTSecret), waitroom.WithGrace(s.cfg.StateGrace))
	if s.feed, err = s.room.NewFeed(s.hub, waitroom.FeedOptions{Registerer: s.registry, Logger: s.log}); err != nil {
		return err
	}
	s.admitter = waitroom.NewAdmitter(s.room, s.roomTargets, 0, s.log)
	active := orders.NewActiveCache(s.store, time.Second)
	gates, err := s.buildEdge(ctx)
	if err != nil {
		return err
	}
	if err := s.startCatalog(ctx); err != nil {
		return err
	}
	s.server, err = gateway.New(gateway.Config{
		AdminToken:     s.cfg.AdminToken,
		AllowedOrigins: s.cfg.AllowedOrigins,
		TrustedProxies: s.cfg.TrustedProxies,
	}, gateway.Deps{
		Catalog: s.catalog,
		Buyer: seckill.NewBuyer(gates.ObserveStock(s.stock), s.producer, ids, s.log,
			seckill.WithHealRequests(s.stock), seckill.WithKeyedOrders(s.store)),
		Gates:    gates.Gates(),
		Captchas: gates.Captchas,
		Breaker:  gates.Breaker,
		Orders:   orders.NewReader(s.store, s.stock, active.IDs),
		Stats:    s.statsService(),
		Accounts: auth.NewAccounts(userStore{s.store}, tokens),
		Tokens:   tokens,
		Checks:   s.checks(),
		Static:   web.FS(),
		Metrics:  promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}),
		Logger:   s.log,

		// The gateway's collectors: requests, latency by route, buy outcomes.
		Registerer: s.registry,

		// Limit and common vouchers: sold in PostgreSQL (cmd/seckill/lifecycle.go).
		SyncBuyer: s.syncBuyer(ids),
		Lifecycle: s.lifecycle(s.store),
		// Order status pushed on GET /api/v1/ws, from every instance's changes.
		Live: gateway.Live{Feed: s.hub},
		Room: s.room,
	})
	return err
}

// roomSecret keys the waiting rooms' HMACs (passes, pre-queue places). It is
// derived from the token secret, which every gateway of the fleet shares,
// under a label of its own so that neither key tells anything of the other.
func roomSecret(jwtSecret string) []byte {
	m := hmac.New(sha256.New, []byte(jwtSecret))
	m.Write([]byte("seckill waiting room"))
	return m.Sum(nil)
}

// roomTargets are the rooms to step, from the catalog in memory: every
// voucher with a waiting room that is not paused; a sold-out or ended one
// closes, and a room lets out at most as many unused passes as stock is left.
func (s *system) roomTargets(ctx context.Context) ([]waitroom.Target, error) {
	snap, err := s.catalog.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []waitroom.Target
	for _, v := range snap.Vouchers() {
		line, ok := waitroom.LineOf(v)
		if !ok || v.Paused {
			continue
		}
		out = append(out, waitroom.Target{Line: line, Passes: max(v.StockLeft, 0),
			Over: v.StockLeft <= 0 || !now.Before(v.EndAt)})
	}
	return out, nil
}

// startCatalog keeps this instance's catalog in memory (the catalog routes
// and the buying path's first gate read it) until ctx ends: its refresh
// loops, and the announcements of the fleet, voucher changes on
// redisstock.CatalogChannel and stock coming back on redisstock.StockChannel
// (the sold-out flag's channel, on which every release is announced).
func (s *system) startCatalog(ctx context.Context) error {
	if _, err := redisstock.Watch(ctx, s.rdb, s.log, map[string]func(int64){
		redisstock.CatalogChannel: s.catalog.Changed,
		redisstock.StockChannel:   s.catalog.StockChanged,
	}); err != nil {
		return fmt.Errorf("catalog announcements: %w", err)
	}
	s.catalog.Start(ctx)
	return nil
}

// newConsumer makes the workers' consumer with its dead-letter topic (made
// when the cluster lacks it) and closes that when the consumer is closed.
func (s *system) newConsumer(cfg kafkaq.ConsumerConfig, dead func() (*kafkaq.DeadLetters, error)) (*deadLetterConsumer, error) {
	dl, err := dead()
	if err != nil {
		return nil, fmt.Errorf("kafka dead-letter topic %s: %w", s.cfg.deadLetterTopic(), err)
	}
	cfg.DeadLetters = dl
	c, err := kafkaq.NewConsumer(cfg)
	if err != nil {
		_ = dl.Close()
		return nil, fmt.Errorf("kafka consumer: %w", err)
	}
	return &deadLetterConsumer{Consumer: c, dl: dl}, nil
}

func (s *system) deadLetters() (*kafkaq.DeadLetters, error) {
	return kafkaq.NewDeadLetters(s.cfg.KafkaBrokers, s.cfg.deadLetterTopic())
}

// deadLetterConsumer is the consumer with its dead-letter producer.
type deadLetterConsumer struct {
	*kafkaq.Consumer
	dl *kafkaq.DeadLetters
}

// Close closes both.
func (c *deadLetterConsumer) Close() error {
	return errors.Join(c.Consumer.Close(), c.dl.Close())
}

// checks are what /readyz asks.
func (s *system) checks() []gateway.Check {
	return []gateway.Check{
		{Name: "redis", Ping: func(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }},
		{Name: "postgresql", Ping: s.pool.Ping},
		{Name: "kafka", Ping: func(ctx context.Context) error { return dialAny(ctx, s.cfg.KafkaBrokers) }},
	}
}

// dialAny reports whether at least one broker accepts a connection.
func dialAny(ctx context.Context, addrs []string) error {
	var d net.Dialer
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", a)
		if err == nil {
			return c.Close()
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// run plays the configured roles until ctx ends, then shuts them down in
// order: stop taking requests, let in-flight ones finish, let the consumer
// commit what it persisted.
func (s *system) run(ctx context.Context) error {
	// Bind first: a taken port is the likeliest start-up failure, and
	// nothing may be running yet when it happens.
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (SECKILL_HTTP_ADDR): %w; is another seckill running?", s.cfg.HTTPAddr, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	fail := func(role string, err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("%s: %w", role, err)
		}
		cancel()
	}

	if s.server != nil {
		if err := s.hub.Start(ctx); err != nil {
			ln.Close()
			return fmt.Errorf("notify hub: %w", err)
		}
		ps, err := s.feed.Subscribe(ctx)
		if err != nil {
			ln.Close()
			s.hub.Stop()
			return fmt.Errorf("waiting room feed: %w", err)
		}
		wg.Go(func() { s.feed.Run(ctx, ps) })
		wg.Go(func() { s.admitter.Run(ctx) })
		if s.onListen != nil {
			s.onListen(ln.Addr().String())
		}
		s.log.Info("gateway listening", "url", "http://"+ln.Addr().String())
		wg.Go(func() { fail("gateway", s.server.Serve(ln)) })
		wg.Go(func() {
			select {
			case <-s.lease.Lost():
				fail("order ids", errors.New("lost the order id node lease; stopping so no id is handed out twice"))
			case <-ctx.Done():
			}
		})
	} else {
		srv := s.opsServer()
		s.log.Info("health and metrics listening", "url", "http://"+ln.Addr().String())
		wg.Go(func() {
			<-ctx.Done()
			shut, done := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
			defer done()
			_ = srv.Shutdown(shut)
		})
		wg.Go(func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				fail("ops http", err)
			}
		})
	}
	if s.cfg.hasRole(roleWorker) {
		consumer, err := s.newConsumer(kafkaq.ConsumerConfig{
			Brokers: s.cfg.KafkaBrokers, Topic: s.cfg.KafkaTopic, Group: s.cfg.KafkaGroup, Log: s.log,
			Metrics: s.metrics.kafka,
			// A batch waits up to 50 ms to fill. With kafkaq's 5 ms the
			// workers persisted batches of ~14 orders in a flash crowd, and
			// their per-transaction cost took a quarter of the accepted rate
			// from the gateways on the same machine; at 50 ms the batches
			// are ~45 orders and 202 -> created stays under 100 ms at p99
			// (make bench).
			Linger: 50 * time.Millisecond,
		}, s.deadLetters)
		if err != nil {
			fail("worker", err)
		} else {
			worker := orders.NewWorker(s.workStore, s.stock, s.releaser(), s.events, orders.WorkerConfig{PayTimeout: s.cfg.PayTimeout, Log: s.log, Metrics: s.metrics.orders})
			wg.Go(func() {
				// role=worker on the consumer's goroutines (and those it
				// starts): make bench reports the worker's CPU apart.
				pprof.Do(ctx, pprof.Labels(profileRole, "worker"), func(ctx context.Context) {
					defer consumer.Close()
					fail("worker", consumer.Run(ctx, worker.Handle))
				})
			})
			s.log.Info("order worker consuming", "topic", s.cfg.KafkaTopic, "group", s.cfg.KafkaGroup)
		}
	}
	if err := s.startSweeper(ctx, &wg, fail); err != nil {
		fail("sweeper", err)
	}

	<-ctx.Done()
	s.log.Info("shutting down: finishing in-flight requests and batches", "timeout", s.cfg.ShutdownTimeout)
	if s.server != nil {
		shut, done := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
		if err := s.server.Shutdown(shut); err != nil {
			s.log.Warn("gateway shutdown", "err", err)
		}
		done()
		s.hub.Stop()
	}
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// opsServer serves health and metrics for a process without the gateway.
func (s *system) opsServer() *http.Server {
	return &http.Server{
		Handler:           gateway.OpsHandler(s.checks(), promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}), s.log),
		ReadHeaderTimeout: 5 * time.Second,
	}
}

// close releases every connection; safe on a half-built system.
func (s *system) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.producer != nil {
		if err := s.producer.Close(); err != nil {
			s.log.Warn("kafka producer close", "err", err)
		}
	}
	if s.lease != nil {
		if err := s.lease.Close(ctx); err != nil {
			s.log.Warn("order id lease release", "err", err)
		}
	}
	if s.workPool != nil {
		s.workPool.Close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
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
