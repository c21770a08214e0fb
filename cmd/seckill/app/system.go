package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/notify/remind"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/orders/payment/stripepay"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/salereport"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/beacon"
	"github.com/flashsale/seckill/seckill/draw"
	"github.com/flashsale/seckill/seckill/hoard"
	"github.com/flashsale/seckill/seckill/orderid"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/flashsale/seckill/seckill/tracing"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// System is one process's wiring: connections to the services and the roles
// built on them.
type System struct {
	cfg      Config
	log      *slog.Logger
	registry *prometheus.Registry
	metrics  processMetrics
	// tracing is the tracer provider (cmd/seckill/app/tracing.go); off,
	// and every part unwrapped, without SECKILL_OTLP_ENDPOINT.
	tracing *tracing.Provider

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
	// strikes is the one hoard.Store of the process: the lifecycle's
	// strikes reach the gateway's strikesWatch at once (seckill/hoard).
	strikes      *hoard.Store
	strikesWatch *hoard.Watch
	events       *notify.Publisher
	catalog      *seckill.Catalog
	// payer takes the money (SECKILL_PAYMENT_PROVIDER); stripe is set too
	// when it is Stripe, to check its webhook deliveries.
	payer  payment.Provider
	stripe *stripepay.Stripe

	// Built only for the roles that need them.
	lease    *orderid.Lease
	producer *kafkaq.Producer
	hub      *notify.Hub
	server   *gateway.Server
	// edge is the gates of the buying path.
	edge *edge.Edge
	// announcements tell the catalog of the fleet's voucher changes and
	// returned stock.
	announcements *redisstock.Watcher
	// room, feed and admitter are the waiting rooms (seckill/waitroom):
	// every gateway admits (the clock is in Redis, so the fleet together
	// admits each room's rate) and pushes its own sockets' places.
	room *waitroom.Room
	// reminder tells shoppers of their turn when their tab is closed
	// (gateway role only; remind.go).
	reminder *remind.Reminder
	feed     *waitroom.Feed
	admitter *waitroom.Admitter
	// draws are the sales by draw (seckill/draw), read by the catalog;
	// every gateway's drawer opens them and makes them at begin_at (once,
	// fleet-wide).
	draws  *draw.Store
	drawer *draw.Drawer
	// mirror copies the rooms' journals to PostgreSQL (cmd/seckill/app/roomcopy.go).
	mirror *waitroom.Mirror
	// sales counts what every sale does, for its report; every role
	// records into it (attempts, the line, payments, timeouts).
	sales *salereport.Recorder
	// adapter moves adaptive rooms' rates with the fleet's health
	// (cmd/seckill/app/fleethealth.go) and knows every room's rate in force.
	adapter *waitroom.Adapter
	// lag reads the workers' consumer lag, beside the sweeper (its drain).
	lag func(ctx context.Context) (int64, error)

	// onListen, when set, is told the gateway's and the ops listener's
	// addresses once the process listens (dev mode prints its banner then,
	// not before).
	onListen func(addr, opsAddr string)
}

// NewSystem connects to Redis and PostgreSQL and builds what the configured
// roles need. Kafka connections are made by the roles that use them.
func NewSystem(ctx context.Context, cfg Config, log *slog.Logger) (_ *System, err error) {
	s := &System{cfg: cfg, log: log, registry: prometheus.NewRegistry()}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if s.metrics, err = newProcessMetrics(s.registry); err != nil {
		return nil, err
	}

	if s.tracing, err = openTracing(ctx, cfg, log); err != nil {
		return nil, err
	}
	if s.rdb, err = openRedis(ctx, cfg); err != nil {
		return nil, err
	}
	if s.tracing.Enabled() {
		s.rdb.AddHook(tracing.RedisHook(s.tracing))
	}

	// Two pools, so that no crowd of one side can take the connections the
	// other needs: a flood of logins, order reads or synchronous buys
	// waits in the gateway's pool while the workers keep persisting
	// reservations through theirs. pgxpool connects lazily, so a process
	// without the worker roles never opens the second one's connections.
	if s.pool, err = openPool(ctx, cfg.DatabaseURL, cfg.DBGatewayConns, 0, tracing.PgxTracer(s.tracing, log)); err != nil {
		return nil, err
	}
	if s.workPool, err = openPool(ctx, cfg.DatabaseURL, cfg.DBWorkerConns, cfg.DBWorkerIdleTx, tracing.PgxTracer(s.tracing, log)); err != nil {
		return nil, err
	}

	s.store = pgstore.New(s.pool)
	s.workStore = pgstore.New(s.workPool)
	s.stock = redisstock.New(redisstock.Config{Redis: s.rdb, Metrics: s.metrics.stock,
		StateGrace: cfg.StateGrace, IdempotencyWindow: cfg.IdempotencyWindow,
		WaitReplicas: cfg.WaitReplicas(), WaitTimeout: cfg.RedisWaitTimeout, Tracer: s.tracer(),
		ReserveBatch: cfg.ReserveBatch, UserLimit: redisstock.UserLimit{Rate: cfg.UserRate, Burst: cfg.UserBurst}})
	s.strikes = newHoard(cfg, s.rdb)
	s.events = notify.NewPublisher(s.rdb)
	if err := s.buildPayer(); err != nil {
		return nil, err
	}
	s.sales = salereport.NewRecorder(salereport.RecorderConfig{Store: s.store, Log: s.log})
	if cfg.HasRole(RoleGateway) {
		if s.reminder, err = s.buildReminder(); err != nil {
			return nil, err
		}
	}
	s.draws = draw.New(draw.Config{Redis: s.rdb, Room: s.newRoom(), Record: s.store, Grace: cfg.StateGrace, Log: s.log,
		Beacon: beacon.New(beacon.Config{URLs: cfg.DrandURLs, ChainHash: cfg.DrandChainHash})})
	s.catalog = seckill.NewCatalog(seckill.CatalogConfig{Store: s.store, Stock: s.stock, Draws: s.draws,
		Announcer: redisstock.NewAnnouncer(s.rdb), Log: s.log, Currency: cfg.Currency})

	if cfg.HasRole(RoleGateway) {
		if err := s.buildGateway(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openPool opens a pool of at most maxConns connections to the database and
// checks that it answers. An idleTx above 0 is its sessions'
// idle_in_transaction_session_timeout: PostgreSQL cannot tell a client whose
// link went silent from a slow one, and keeps an open transaction's locks
// until it learns the client is gone (seconds after the link returns, or
// never); with it, the server ends such a transaction itself.
func openPool(ctx context.Context, url string, maxConns int32, idleTx time.Duration, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	pool, err := dialPool(ctx, url, maxConns, idleTx, tracer)
	if err != nil {
		// The string pgx cannot read is quoted in its errors, and
		// one it misreads shows up in the host it dials.
		return nil, urlError("SECKILL_DATABASE_URL", url, err, readPostgres)
	}
	return pool, nil
}

// poolConfig reads SECKILL_DATABASE_URL.
func poolConfig(url string) (*pgxpool.Config, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("not a PostgreSQL URL (postgres://user:password@host:port/db, or host=... password=... dbname=...; %s): %w", escapePassword, err)
	}
	return pcfg, nil
}

// readPostgres is the readConn of SECKILL_DATABASE_URL, for the pool and
// the migrations alike (the pool's reading is pgx's and more): the hosts,
// the user and the database a client of it connects to.
func readPostgres(s string) (string, error) {
	pcfg, err := poolConfig(s)
	if err != nil {
		return "", err
	}
	c := pcfg.ConnConfig
	reading := fmt.Sprintf("%s:%d user=%q database=%q", c.Host, c.Port, c.User, c.Database)
	for _, f := range c.Fallbacks {
		reading += fmt.Sprintf(" %s:%d", f.Host, f.Port)
	}
	return reading, nil
}

// dialPool is openPool without the masking of its errors. tracer (nil:
// none) sees every query: pgx's log lines and, with tracing on, spans.
func dialPool(ctx context.Context, url string, maxConns int32, idleTx time.Duration, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	pcfg, err := poolConfig(url)
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = maxConns
	pcfg.ConnConfig.Tracer = tracer
	if idleTx > 0 {
		pcfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(idleTx.Milliseconds(), 10)
	}
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

// checks are what /readyz asks.
func (s *System) checks() []gateway.Check {
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

// Close releases every connection; safe on a half-built system.
func (s *System) Close() {
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
	// Last: the spans of everything closed above are exported.
	if err := s.tracing.Shutdown(ctx); err != nil {
		s.log.Warn("tracing shutdown", "err", err)
	}
}
