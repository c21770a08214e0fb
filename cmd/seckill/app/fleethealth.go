package app

// The process's share of the fleet's health (seckill/fleethealth), read from
// what it already measures: its own Prometheus registry (the latency and
// failures of the buys that reached the seller, failed orders, the
// breakers) and, beside the sweeper, the workers' consumer lag read from
// the brokers. Every gateway's waiting-room adapter judges the fleet's
// samples folded into one. The buy route's own latency and answers are not
// read: a crowd's refusals (unknown vouchers, limits, captchas) cost the
// back end nothing, yet a slow one would look like trouble and a flood of
// instant ones like health.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill/fleethealth"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// The series a sample is made of (the gateway's, edge's and orders'
// collectors name them; docs in deploy/OPERATING.md).
const (
	healthSellDuration = gateway.MetricSellDuration
	healthSellFailures = gateway.MetricSellFailures
	// healthSellPath is the seller whose back end the rooms admit to: a
	// waiting room is for seckill vouchers, sold by the reservation script
	// and the Kafka hand-off.
	healthSellPath = buy.PathRedis
	healthOrders   = "seckill_orders_total"
	healthBreaker  = "seckill_breaker_state"
)

// healthMeter measures this process's sample of each window.
type healthMeter struct {
	gather prometheus.Gatherer
	// lag, when set, reads the workers' consumer lag (the sweeper's drain).
	lag func(ctx context.Context) (int64, error)

	mu      sync.Mutex
	buys    fleethealth.Window
	failed  float64 // the failures counted so far, for the window's difference
	primed  bool
	lastLag int64
}

// measure is the sample of the window since the last call.
func (m *healthMeter) measure(ctx context.Context) fleethealth.Sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := fleethealth.Sample{Lag: -1, LagBefore: -1}
	fams, _ := m.gather.Gather() // a partial gather still tells what it has
	var failed float64
	for _, f := range fams {
		switch f.GetName() {
		case healthSellDuration:
			for _, x := range f.GetMetric() {
				if label(x, "path") == healthSellPath {
					s.Buys, s.BuyP99 = m.buys.Next(x.GetHistogram(), 0.99)
				}
			}
		case healthSellFailures:
			for _, x := range f.GetMetric() {
				if label(x, "path") == healthSellPath {
					failed += x.GetCounter().GetValue()
				}
			}
		case healthOrders:
			for _, x := range f.GetMetric() {
				if label(x, "status") == "failed" {
					failed += x.GetCounter().GetValue()
				}
			}
		case healthBreaker:
			for _, x := range f.GetMetric() {
				s.Breaker = max(s.Breaker, int(x.GetGauge().GetValue()))
			}
		}
	}
	if m.primed {
		s.Failed = int64(max(0, failed-m.failed))
	}
	m.failed, m.primed = failed, true
	if m.lag != nil {
		if lag, err := m.lag(ctx); err == nil {
			s.Lag, s.LagBefore = lag, m.lastLag
			if m.lastLag < 0 {
				s.LagBefore = lag
			}
			m.lastLag = lag
		}
	}
	return s
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// healthPart publishes this process's sample every second.
func (s *System) healthPart() part {
	m := &healthMeter{gather: s.registry, lag: s.lag, lastLag: -1}
	p := fleethealth.NewPublisher(fleethealth.PublisherConfig{Board: fleethealth.NewBoard(s.rdb),
		ID: processID(), Measure: m.measure, Log: s.log})
	return part{name: "fleet health", run: p.Run}
}

// fleetHealth is the fleet's health as the waiting rooms' adapter judges it.
func fleetHealth(board *fleethealth.Board) func(ctx context.Context) (waitroom.Health, error) {
	return func(ctx context.Context) (waitroom.Health, error) {
		f, err := board.Read(ctx)
		if err != nil {
			return waitroom.UnknownHealth, err
		}
		if f.Samples == 0 {
			return waitroom.UnknownHealth, nil
		}
		return waitroom.Health{BuyP99: f.BuyP99, Buys: f.Buys, Failed: f.Failed, Breaker: f.Breaker,
			Lag: f.Lag, LagBefore: f.LagBefore}, nil
	}
}

// processID names this process in the fleet's health: host, pid and a
// random part (a pid is reused across restarts and containers).
func processID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}
