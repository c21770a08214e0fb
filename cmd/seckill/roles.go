package main

// Running the configured roles: the gateway or the ops server, the workers'
// consumer, the sweeper (lifecycle.go), and the shutdown in order.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/kafkaq"
)

// profileRole is the pprof label that names the part of a process a
// goroutine belongs to: "broker" (dev mode's in-process Kafka broker) or
// "worker" (the order workers' consumer); unlabelled goroutines are the
// gateway's.
const profileRole = "role"

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

// part is one loop of a role: it runs until ctx ends (nil then) or fails.
type part struct {
	name string
	run  func(ctx context.Context) error
}

// run plays the configured roles until ctx ends, then shuts them down in
// order. The order, written down once: bind the listeners; subscribe the
// hub and the room feed (so no event published once the gateway answers is
// lost); start the parts, gateway, ops, worker and sweeper in that order.
// At the end: stop taking requests and let in-flight ones finish (gateway
// shutdown), stop the hub, wait for every part (the consumer commits what
// it persisted), then close what the parts shared (the reconciler's drain).
func (s *system) run(ctx context.Context) error {
	// Bind first: a taken port is the likeliest start-up failure, and
	// nothing may be running yet when it happens.
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (SECKILL_HTTP_ADDR): %w; is another seckill running?", s.cfg.HTTPAddr, err)
	}
	// A gateway serves /metrics on an ops listener of its own: on the
	// shoppers' port anyone could read the business figures and make the
	// process render them (tens of KB a request) unthrottled.
	opsLn := ln
	if s.server != nil {
		if opsLn, err = net.Listen("tcp", s.cfg.OpsAddr); err != nil {
			ln.Close()
			return fmt.Errorf("listen on %s (SECKILL_OPS_ADDR): %w; is another seckill running?", s.cfg.OpsAddr, err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	fail := func(role string, err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("%s: %w", role, err)
		}
		cancel()
	}

	var parts []part
	if s.server != nil {
		// Listening: from here this instance counts in the fleet.
		s.startEdge(ctx)
		defer s.edge.Stop()
		if err := s.hub.Start(ctx); err != nil {
			ln.Close()
			opsLn.Close()
			return fmt.Errorf("notify hub: %w", err)
		}
		ps, err := s.feed.Subscribe(ctx)
		if err != nil {
			ln.Close()
			opsLn.Close()
			s.hub.Stop()
			return fmt.Errorf("waiting room feed: %w", err)
		}
		parts = append(parts, s.gatewayParts(ln, ps)...)
	}
	parts = append(parts, s.opsPart(opsLn))
	if s.cfg.hasRole(roleWorker) {
		p, err := s.workerPart()
		if err != nil {
			fail("worker", err)
		} else {
			parts = append(parts, p)
		}
	}
	var closers []func() error
	if s.cfg.hasRole(roleSweeper) {
		ps, closeDrain, err := s.sweeperParts()
		if err != nil {
			fail("sweeper", err)
		} else {
			parts = append(parts, ps...)
			closers = append(closers, closeDrain)
		}
	}
	for _, p := range parts {
		wg.Go(func() { fail(p.name, p.run(ctx)) })
	}
	if s.server != nil {
		if s.onListen != nil {
			s.onListen(ln.Addr().String(), opsLn.Addr().String())
		}
		s.log.Info("gateway listening", "url", "http://"+ln.Addr().String())
	}
	s.log.Info("health and metrics listening", "url", "http://"+opsLn.Addr().String())
	if s.cfg.hasRole(roleWorker) {
		s.log.Info("order worker consuming", "topic", s.cfg.KafkaTopic, "group", s.cfg.KafkaGroup)
	}
	if s.cfg.hasRole(roleSweeper) {
		s.log.Info("sweeper, reconciler and healer running", "pay_timeout", s.cfg.PayTimeout, "state_grace", s.cfg.StateGrace)
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
	for _, c := range closers {
		_ = c()
	}
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// gatewayParts are the gateway role's loops: the room feed on ps, the
// admitter, the mirror, the HTTP server on ln (stopped by run's shutdown),
// and the watch of the order id node lease.
func (s *system) gatewayParts(ln net.Listener, ps *redis.PubSub) []part {
	return []part{
		{"waiting room feed", func(ctx context.Context) error { s.feed.Run(ctx, ps); return nil }},
		{"waiting room admitter", s.admitter.Run},
		{"waiting room mirror", s.mirror.Run},
		{"gateway", func(context.Context) error { return s.server.Serve(ln) }},
		{"order ids", func(ctx context.Context) error {
			select {
			case <-s.lease.Lost():
				return errors.New("lost the order id node lease; stopping so no id is handed out twice")
			case <-ctx.Done():
				return nil
			}
		}},
	}
}

// opsPart serves health and metrics on ln until ctx ends, then shuts the
// server down within the shutdown timeout.
func (s *system) opsPart(ln net.Listener) part {
	return part{"ops http", func(ctx context.Context) error {
		srv := s.opsServer()
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			<-ctx.Done()
			shut, done := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
			defer done()
			_ = srv.Shutdown(shut)
		}()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		<-stopped // in-flight health checks and scrapes finish
		return nil
	}}
}

// workerPart is the worker role: the consumer, handing batches to the
// order worker, closed when it ends.
func (s *system) workerPart() (part, error) {
	consumer, err := s.newConsumer(kafkaq.ConsumerConfig{
		Brokers: s.cfg.KafkaBrokers, Topic: s.cfg.KafkaTopic, Group: s.cfg.KafkaGroup, Log: s.log,
		Metrics:  s.metrics.kafka,
		MaxBatch: s.cfg.WorkerBatch, Linger: s.cfg.WorkerLinger,
	}, s.deadLetters)
	if err != nil {
		return part{}, err
	}
	worker := orders.NewWorker(s.workStore, s.stock, s.releaser(), s.events, orders.WorkerConfig{PayTimeout: s.cfg.PayTimeout, Log: s.log, Metrics: s.metrics.orders})
	return part{"worker", func(ctx context.Context) error {
		defer consumer.Close()
		var err error
		// role=worker on the consumer's goroutines (and those it starts):
		// make bench reports the worker's CPU apart.
		pprof.Do(ctx, pprof.Labels(profileRole, "worker"), func(ctx context.Context) {
			err = consumer.Run(ctx, worker.Handle)
		})
		return err
	}}, nil
}

// opsServer serves health and metrics: on the one listener of a process
// without the gateway, on SECKILL_OPS_ADDR beside a gateway.
func (s *system) opsServer() *http.Server {
	return &http.Server{
		Handler:           gateway.OpsHandler(s.checks(), promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}), s.log),
		ReadHeaderTimeout: 5 * time.Second,
	}
}
