package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// processMetrics are the collectors of the packages this process wires, all
// on the process's own registry (served on /metrics). The gateway and the
// notify hub register theirs when they are built.
type processMetrics struct {
	stock  *redisstock.Metrics
	kafka  *kafkaq.Metrics
	orders *orders.Metrics
	passes *orders.Passes
	pay    *orders.PaymentMetrics
}

func newProcessMetrics(reg prometheus.Registerer) (processMetrics, error) {
	var (
		m   processMetrics
		err error
	)
	if m.stock, err = redisstock.NewMetrics(reg); err != nil {
		return m, fmt.Errorf("metrics: redis stock: %w", err)
	}
	if m.kafka, err = kafkaq.NewMetrics(reg); err != nil {
		return m, fmt.Errorf("metrics: kafka: %w", err)
	}
	if m.orders, err = orders.NewMetrics(reg); err != nil {
		return m, fmt.Errorf("metrics: orders: %w", err)
	}
	if m.passes, err = orders.NewPasses(reg); err != nil {
		return m, fmt.Errorf("metrics: passes: %w", err)
	}
	if m.pay, err = orders.NewPaymentMetrics(reg); err != nil {
		return m, fmt.Errorf("metrics: payments: %w", err)
	}
	return m, nil
}

// countedEvents is the event publisher for components that publish once per
// committed transition (lifecycle, sync buyer, reconciler): each event also
// counts in seckill_orders_total and in the sale report.
func (s *System) countedEvents() orders.Events {
	return s.sales.Events(s.metrics.orders.CountEvents(s.events))
}
