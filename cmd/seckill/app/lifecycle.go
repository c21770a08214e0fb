package app

import (
	"fmt"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/orders/payment/stripepay"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/salereport"
	"github.com/flashsale/seckill/seckill"
)

// producerTimeout is the longest a gateway may still be writing a
// reservation's message: its request timeout bounds Buyer.Publish.
const producerTimeout = gateway.DefaultRequestTimeout

// lifecycle is the order lifecycle over store: the gateway's for pay and
// cancel, the workers' for the sweeper.
func (s *System) lifecycle(store *pgstore.Store) *orders.Lifecycle {
	return orders.NewLifecycle(orders.LifecycleConfig{Record: store, Stock: s.stock, Events: s.countedEvents(),
		Strikes: s.strikes, Log: s.log,
		Payments: store, Provider: s.payer, Currency: s.cfg.Currency, PaymentMetrics: s.metrics.pay})
}

// buildPayer makes the payment provider SECKILL_PAYMENT_PROVIDER names.
func (s *System) buildPayer() error {
	if s.cfg.PaymentProvider != paymentStripe {
		s.payer = payment.Demo{}
		return nil
	}
	if s.cfg.StripeSecretKey == "" || s.cfg.StripeWebhook == "" {
		return fmt.Errorf("config: SECKILL_PAYMENT_PROVIDER=stripe needs SECKILL_STRIPE_SECRET_KEY and SECKILL_STRIPE_WEBHOOK_SECRET")
	}
	st, err := stripepay.New(stripepay.Config{SecretKey: s.cfg.StripeSecretKey, WebhookSecret: s.cfg.StripeWebhook, APIBase: s.cfg.StripeAPIBase})
	if err != nil {
		return fmt.Errorf("payments: %w", err)
	}
	s.payer, s.stripe = st, st
	return nil
}

// syncBuyer sells limit and common vouchers for the gateway.
func (s *System) syncBuyer(ids seckill.OrderIDs) *orders.SyncBuyer {
	return orders.NewSyncBuyer(orders.SyncBuyerConfig{Record: s.store, IDs: ids, Events: s.countedEvents(), PayTimeout: s.cfg.PayTimeout, Log: s.log})
}

// statsService answers the admin stats route with Redis's live figures and
// the drift beside PostgreSQL's.
func (s *System) statsService() *orders.StatsService {
	return orders.NewStatsService(orders.StatsConfig{Record: s.store, Stock: s.stock, StateGrace: s.cfg.StateGrace})
}

// sweeperParts are the sweeper role: payment timeouts and the release
// outbox, the reconciler of orphaned holds, the healer and the sale
// report's retention. They keep their
// state in PostgreSQL and Redis only, so any number of processes may run
// them. closeDrain closes the reconciler's and healer's drain once they
// have ended.
func (s *System) sweeperParts() (_ []part, closeDrain func() error, _ error) {
	sweeper := orders.NewSweeper(orders.SweeperConfig{Lifecycle: s.lifecycle(s.workStore), Log: s.log, Metrics: s.metrics.orders,
		Passes: s.metrics.passes, Holds: s.holds(s.workStore)})
	drain, err := kafkaq.NewDrain(s.cfg.KafkaBrokers, s.cfg.KafkaTopic, s.cfg.KafkaGroup)
	if err != nil {
		return nil, nil, fmt.Errorf("reconciler: %w", err)
	}
	// The fleet's health reads the workers' lag from the brokers here,
	// beside them: it keeps growing while they are stalled or gone.
	s.lag = drain.Lag
	rec := orders.NewReconciler(orders.ReconcilerConfig{
		Record: s.workStore, Stock: s.stock, Drain: drain, Events: s.countedEvents(),
		ProducerTimeout: producerTimeout, Grace: 3 * producerTimeout, Log: s.log, Metrics: s.metrics.orders,
		Passes: s.metrics.passes,
	})
	healer := orders.NewHealer(orders.HealerConfig{
		Record: s.workStore, Stock: s.stock, Drain: drain, Events: s.countedEvents(),
		ProducerTimeout: producerTimeout, Grace: s.cfg.StateGrace, Log: s.log, Metrics: s.metrics.orders,
		Room: roomRecovery{room: s.newRoom(), store: s.workStore},
	})
	retention := salereport.NewRetention(salereport.RetentionConfig{Store: s.workStore, After: s.cfg.SaleCountsKeep, Log: s.log})
	return []part{{name: "sweeper", run: sweeper.Run}, {name: "reconciler", run: rec.Run}, {name: "healer", run: healer.Run},
		{name: "sale report retention", run: retention.Run}}, drain.Close, nil
}
