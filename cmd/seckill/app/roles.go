package app

// Running the configured roles as one list of parts, started and stopped in
// the order written on run.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/pprof"
	"time"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// profileRole is the pprof label that names the part of a process a
// goroutine belongs to: "broker" (dev mode's in-process Kafka broker) or
// "worker" (the order workers' consumer); unlabelled goroutines are the
// gateway's.
const profileRole = "role"

// newConsumer makes the workers' consumer with its dead-letter topic (made
// when the cluster lacks it) and closes that when the consumer is closed.
func (s *System) newConsumer(cfg kafkaq.ConsumerConfig, dead func() (*kafkaq.DeadLetters, error)) (*deadLetterConsumer, error) {
	dl, err := dead()
	if err != nil {
		return nil, fmt.Errorf("kafka dead-letter topic %s: %w", s.cfg.DeadLetterTopic(), err)
	}
	cfg.DeadLetters = dl
	c, err := kafkaq.NewConsumer(cfg)
	if err != nil {
		_ = dl.Close()
		return nil, fmt.Errorf("kafka consumer: %w", err)
	}
	return &deadLetterConsumer{Consumer: c, dl: dl}, nil
}

func (s *System) deadLetters() (*kafkaq.DeadLetters, error) {
	return kafkaq.NewDeadLetters(s.cfg.KafkaBrokers, s.cfg.DeadLetterTopic())
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

// part is one loop of a role: it runs until ctx ends (nil then) or fails.
// ready, when set, is closed once the parts after it may rely on this one
// (a subscription Redis confirmed, a first read done): run starts the next
// part only then.
type part struct {
	name  string
	run   func(ctx context.Context) error
	ready <-chan struct{}
}

// Run plays the configured roles until ctx ends or a part fails, then shuts
// them down. The order, written down once:
//
//  1. Bind the listeners: a taken port is the likeliest start-up failure,
//     and nothing may be running yet when it happens (a gateway that
//     cannot bind never joins the fleet).
//  2. Start the parts in the order of their list, each once every part
//     before it that has a ready channel is ready: health and metrics
//     (opsPart); the sale report's writer; the gateway's (gatewayParts: the catalog and what feeds it,
//     the gates, the notify hub and the room feed subscribed so that no
//     event published once the gateway answers is lost, then the HTTP
//     server); the worker's; the sweeper's.
//  3. At the end, stop them in the reverse order, each once the parts after
//     it have returned: the sweeper's and the worker's (the consumer commits
//     what it persisted); the gateway, which stops taking requests and lets
//     in-flight ones finish; then what it relied on (the hub ends its
//     sockets' subscriptions, the gates leave the fleet); the sale
//     report's writer, with its last flush; health and metrics last.
//  4. Close what the parts shared (the reconciler's drain).
func (s *System) Run(ctx context.Context) error {
	ln, opsLn, err := s.listen()
	if err != nil {
		return err
	}
	// Closed by the servers' shutdown; here for a part never started.
	defer ln.Close()
	defer opsLn.Close()

	// The sale report's writer starts before, and stops after, every part
	// that counts into it, so that its last flush has all they counted.
	parts := []part{s.opsPart(opsLn), {name: "sale report", run: s.sales.Run}}
	if s.server != nil {
		parts = append(parts, s.gatewayParts(ln)...)
	}
	if s.cfg.HasRole(RoleWorker) {
		parts = append(parts, s.workerPart())
	}
	var closers []func() error
	if s.cfg.HasRole(RoleSweeper) {
		ps, closeDrain, err := s.sweeperParts()
		if err != nil {
			return fmt.Errorf("sweeper: %w", err)
		}
		parts = append(parts, ps...)
		closers = append(closers, closeDrain)
	}
	parts = append(parts, s.healthPart())

	err = runParts(ctx, parts, func() { s.logListening(ln, opsLn) }, func() {
		s.log.Info("shutting down: finishing in-flight requests and batches", "timeout", s.cfg.ShutdownTimeout)
	})
	for _, c := range closers {
		_ = c()
	}
	return err
}

// runParts runs parts as run describes (steps 2 and 3): it starts them in
// order, each once the ready parts before it are ready, calls started once
// all are, and when ctx ends or any part ends, calls stopping and stops
// them in the reverse order, each once the parts after it have returned.
// It returns the parts' failures, each named.
func runParts(ctx context.Context, parts []part, started, stopping func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(parts))
	// Every part ending ends the process: at shutdown that is expected, at
	// any other time it is a failure.
	fail := func(name string, err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("%s: %w", name, err)
		}
		cancel()
	}
	type running struct {
		stop context.CancelFunc
		done chan struct{}
	}
	var run []running
start:
	for _, p := range parts {
		if ctx.Err() != nil {
			break
		}
		// Each part its own context, so that the shutdown ends them one
		// by one.
		pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			fail(p.name, p.run(pctx))
		}()
		run = append(run, running{stop, done})
		if p.ready != nil {
			select {
			case <-p.ready:
			case <-done:
				break start
			case <-ctx.Done():
				break start
			}
		}
	}
	if ctx.Err() == nil {
		started()
	}

	<-ctx.Done()
	stopping()
	for i := len(run) - 1; i >= 0; i-- {
		run[i].stop()
		<-run[i].done
	}
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// listen binds the gateway's listener and, beside a gateway, the ops
// listener; a process without the gateway serves health and metrics on the
// one listener (both results are it then).
func (s *System) listen() (ln, opsLn net.Listener, err error) {
	ln, err = net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s (SECKILL_HTTP_ADDR): %w; is another seckill running?", s.cfg.HTTPAddr, err)
	}
	if s.server == nil {
		return ln, ln, nil
	}
	// A gateway serves /metrics on an ops listener of its own: on the
	// shoppers' port anyone could read the business figures and make the
	// process render them (tens of KB a request) unthrottled.
	if opsLn, err = net.Listen("tcp", s.cfg.OpsAddr); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("listen on %s (SECKILL_OPS_ADDR): %w; is another seckill running?", s.cfg.OpsAddr, err)
	}
	return ln, opsLn, nil
}

// logListening says what this process serves, once every part started.
func (s *System) logListening(ln, opsLn net.Listener) {
	if s.server != nil {
		if s.onListen != nil {
			s.onListen(ln.Addr().String(), opsLn.Addr().String())
		}
		s.log.Info("gateway listening", "url", "http://"+ln.Addr().String())
	}
	s.log.Info("health and metrics listening", "url", "http://"+opsLn.Addr().String())
	if s.cfg.HasRole(RoleWorker) {
		s.log.Info("order worker consuming", "topic", s.cfg.KafkaTopic, "group", s.cfg.KafkaGroup)
	}
	if s.cfg.HasRole(RoleSweeper) {
		s.log.Info("sweeper, reconciler and healer running", "pay_timeout", s.cfg.PayTimeout, "state_grace", s.cfg.StateGrace)
	}
}

// gatewayParts are the gateway role's loops, in the order they start: the
// catalog's announcements and the catalog (read once before the catalog
// routes answer), the gates (the ops switch read and this instance counted
// in the fleet before the first buy), the copy of the unpaid strikes (read
// once before the first buy), the notify hub and the room feed
// (subscribed before the first socket), the reminders (subscribed to the rooms'
// turns before the admitter gives any), the admitter, the drawer, the mirror, the
// renewal of the order id node lease (renewed once before the first buy;
// its loss stops the process, so no id is handed out twice), and the HTTP
// server on ln.
func (s *System) gatewayParts(ln net.Listener) []part {
	return []part{
		{name: "catalog announcements", run: s.announcements.Run, ready: s.announcements.Ready()},
		{name: "catalog", run: s.catalog.Run, ready: s.catalog.Ready()},
		{name: "gates", run: s.edge.Run, ready: s.edge.Ready()},
		{name: "strikes", run: s.strikesWatch.Run, ready: s.strikesWatch.Ready()},
		{name: "notify hub", run: s.hub.Run, ready: s.hub.Ready()},
		{name: "waiting room feed", run: s.feed.Run, ready: s.feed.Ready()},
		{name: "waiting room rates", run: s.adapter.Run},
		{name: "reminders", run: s.reminder.Run, ready: s.reminder.Ready()},
		{name: "waiting room admitter", run: s.admitter.Run},
		{name: "draws", run: s.drawer.Run},
		{name: "waiting room mirror", run: s.mirror.Run},
		{name: "order ids", run: s.lease.Run, ready: s.lease.Ready()},
		{name: "gateway", run: func(ctx context.Context) error {
			return serveUntil(ctx, s.cfg.ShutdownTimeout, func() error { return s.server.Serve(ln) }, func(ctx context.Context) error {
				if err := s.server.Shutdown(ctx); err != nil {
					s.log.Warn("gateway shutdown", "err", err)
				}
				return nil
			})
		}},
	}
}

// opsPart serves health and metrics on ln until ctx ends, then shuts the
// server down within the shutdown timeout.
func (s *System) opsPart(ln net.Listener) part {
	return part{name: "ops http", run: func(ctx context.Context) error {
		srv := s.opsServer()
		return serveUntil(ctx, s.cfg.ShutdownTimeout, func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}, srv.Shutdown)
	}}
}

// serveUntil runs serve until ctx ends, then shutdown within timeout, and
// returns once both have: in-flight requests finish. A serve that fails on
// its own is returned at once.
func serveUntil(ctx context.Context, timeout time.Duration, serve func() error, shutdown func(context.Context) error) error {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shut, done := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer done()
		_ = shutdown(shut)
	}()
	if err := serve(); err != nil {
		return err
	}
	<-stopped
	return nil
}

// workerPart is the worker role: the consumer, handing batches to the
// order worker, closed when it ends.
func (s *System) workerPart() part {
	return part{name: "worker", run: func(ctx context.Context) error {
		consumer, err := s.newConsumer(kafkaq.ConsumerConfig{
			Brokers: s.cfg.KafkaBrokers, Topic: s.cfg.KafkaTopic, Group: s.cfg.KafkaGroup, Log: s.log,
			Metrics: s.metrics.kafka, Tracer: s.tracer(),
			MaxBatch: s.cfg.WorkerBatch, Linger: s.cfg.WorkerLinger,
		}, s.deadLetters)
		if err != nil {
			return err
		}
		defer consumer.Close()
		worker := orders.NewWorker(orders.WorkerConfig{Record: s.workStore, Stock: s.stock, Events: s.events,
			PayTimeout: s.cfg.PayTimeout, Log: s.log, Metrics: s.metrics.orders,
			Failed: func(r seckill.Reservation) { s.sales.Returned(r.VoucherID, r.Quantity) }})
		// role=worker on the consumer's goroutines (and those it starts):
		// make bench reports the worker's CPU apart.
		pprof.Do(ctx, pprof.Labels(profileRole, "worker"), func(ctx context.Context) {
			err = consumer.Run(ctx, worker.Handle)
		})
		return err
	}}
}

// opsServer serves health and metrics: on the one listener of a process
// without the gateway, on SECKILL_OPS_ADDR beside a gateway.
func (s *System) opsServer() *http.Server {
	return &http.Server{
		Handler:           gateway.OpsHandler(s.checks(), promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}), s.log),
		ReadHeaderTimeout: 5 * time.Second,
	}
}
