//go:build !nodev

// The dev mode, left out of the production build (-tags nodev, what
// deploy/Dockerfile builds) so that the binary serve runs in production
// links neither deploy/devstack nor the in-process broker; nodev.go
// stands in there.

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/migrations"
	"github.com/flashsale/seckill/notify/remind"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// runDev starts whatever services are not configured as private child
// processes (Redis, PostgreSQL, Apache Kafka with SECKILL_DEV_KAFKA=apache)
// or in-process (Kafka by default), then every role.
func runDev(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := LoadConfig(devDefaults(getenv))
	if err != nil {
		return err
	}
	generatedAdmin, generatedJWT := cfg.fillDevSecrets()
	cfg.trustDevLoopback()
	log := newLogger(cfg, stderr)
	defer logStopped(log, time.Now())
	setLibraryLoggers(log)
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("SECKILL_DATA_DIR: %w", err)
	}
	// Child processes must stop even when start-up fails half way.
	stopCtx := context.WithoutCancel(ctx)

	switch {
	case cfg.RedisURL != "" || len(cfg.RedisCluster) > 0:
		// Configured: use it.
	case cfg.DevRedisShards > 1:
		c, err := devstack.StartRedisCluster(ctx, devstack.RedisClusterOptions{
			Dir: filepath.Join(dataDir, "redis-cluster"), Masters: cfg.DevRedisShards, Persist: true, Log: log,
		})
		if err != nil {
			return fmt.Errorf("dev redis cluster (SECKILL_DEV_REDIS_SHARDS=%d): %w", cfg.DevRedisShards, err)
		}
		defer c.Stop(stopCtx)
		cfg.RedisCluster = c.Addrs
	default:
		r, err := devstack.StartRedis(ctx, devstack.RedisOptions{Dir: filepath.Join(dataDir, "redis"), Persist: true, Log: log})
		if err != nil {
			return fmt.Errorf("dev redis: %w", err)
		}
		defer r.Stop(stopCtx)
		cfg.RedisURL = r.URL
	}
	if cfg.DatabaseURL == "" {
		p, err := devstack.StartPostgres(ctx, devstack.PostgresOptions{Dir: filepath.Join(dataDir, "postgres"), Fsync: true, Log: log})
		if err != nil {
			return fmt.Errorf("dev postgresql: %w", err)
		}
		defer p.Stop(stopCtx)
		cfg.DatabaseURL = p.URL
	}
	kafkaBanner := "SECKILL_KAFKA_BROKERS " + strings.Join(cfg.KafkaBrokers, ",")
	switch {
	case len(cfg.KafkaBrokers) > 0:
		// Configured: use it.
	case cfg.DevKafka == devKafkaApache:
		k, err := devstack.StartApacheKafka(ctx, devstack.ApacheKafkaOptions{
			Brokers: cfg.DevKafkaBrokers,
			Topics:  map[string]int32{cfg.KafkaTopic: cfg.KafkaPartitions},
			Dir:     filepath.Join(dataDir, "kafka-apache"),
			Log:     log,
		})
		if err != nil {
			return fmt.Errorf("dev kafka (SECKILL_DEV_KAFKA=apache, SECKILL_DEV_KAFKA_BROKERS=%d): %w", cfg.DevKafkaBrokers, err)
		}
		defer k.Close()
		cfg.KafkaBrokers = k.Brokers
		kafkaBanner = fmt.Sprintf("Apache Kafka %s, %d broker(s) at %s (data in %s)",
			devstack.ApacheKafkaVersion, len(k.Brokers), strings.Join(k.Brokers, ","), k.Dir)
	default:
		var k *devstack.Kafka
		var err error
		// The broker's goroutines carry the label role=broker, so that a CPU
		// profile tells its share from the gateway's (make bench).
		pprof.Do(ctx, pprof.Labels(profileRole, "broker"), func(ctx context.Context) {
			k, err = devstack.StartKafka(ctx, devstack.KafkaOptions{
				Topics: map[string]int32{cfg.KafkaTopic: cfg.KafkaPartitions},
				Dir:    filepath.Join(dataDir, "kafka"),
				Log:    log,
			})
		})
		if err != nil {
			return fmt.Errorf("dev kafka: %w", err)
		}
		defer k.Close()
		cfg.KafkaBrokers = k.Brokers
		kafkaBanner = "in-process broker (kfake) at " + strings.Join(k.Brokers, ",") + "; SECKILL_DEV_KAFKA=apache runs Apache Kafka"
	}
	if cfg.DevTracing == devTracingJaeger && cfg.OTLPEndpoint == "" {
		j, err := devstack.StartJaeger(ctx, devstack.JaegerOptions{Dir: filepath.Join(dataDir, "jaeger"), Log: log})
		if err != nil {
			return fmt.Errorf("dev tracing (SECKILL_DEV_TRACING=jaeger): %w", err)
		}
		defer j.Stop(stopCtx)
		cfg.OTLPEndpoint = j.OTLPEndpoint
		if getenv("SECKILL_TRACE_SAMPLE_RATIO") == "" {
			cfg.TraceSampleRatio = 1
		}
		log.Info("dev tracing: every trace goes to a private Jaeger", "ui", j.QueryURL, "otlp_endpoint", j.OTLPEndpoint)
	}
	generatedWebhook := false
	if cfg.DevPayments == devPaymentsStripeMock {
		m, err := devstack.StartStripeMock(ctx, devstack.StripeMockOptions{Dir: filepath.Join(dataDir, "stripe-mock"), Log: log})
		if err != nil {
			return fmt.Errorf("dev payments (SECKILL_DEV_PAYMENTS=stripe-mock): %w", err)
		}
		defer m.Stop(stopCtx)
		cfg.PaymentProvider, cfg.StripeAPIBase, cfg.StripeSecretKey = paymentStripe, m.URL, devstack.StripeMockKey
		if cfg.StripeWebhook == "" {
			cfg.StripeWebhook, generatedWebhook = "whsec_"+randomHex(24), true
		}
	}
	mailUI := ""
	if cfg.DevMail == devMailMailpit && cfg.SMTPURL == "" {
		m, err := devstack.StartMailpit(ctx, devstack.MailpitOptions{Dir: filepath.Join(dataDir, "mailpit"), Log: log})
		if err != nil {
			return fmt.Errorf("dev mail (SECKILL_DEV_MAIL=mailpit): %w", err)
		}
		defer m.Stop(stopCtx)
		cfg.SMTPURL, mailUI = m.SMTPURL, m.APIURL
		log.Info("dev mail: every reminder goes to a private mailpit", "ui", m.APIURL, "smtp", m.SMTPURL)
	}
	if cfg.VAPIDPublicKey == "" {
		// One key pair for good: a browser's subscription is bound to it.
		keys, err := remind.DevVAPID(filepath.Join(dataDir, "vapid.json"), cfg.VAPIDSubject)
		if err != nil {
			return fmt.Errorf("dev push: %w", err)
		}
		cfg.VAPIDPublicKey, cfg.VAPIDPrivateKey = keys.PublicKey, keys.PrivateKey
	}
	if getenv("SECKILL_DRAND_URLS") == "" {
		// A private beacon for the draws, started in the background: its
		// key ceremony and first round take a few seconds that start-up
		// need not wait for (a draw's drawer waits for its round anyway).
		d, err := devstack.PrepareDrand(devstack.DrandOptions{Dir: filepath.Join(dataDir, "drand"), Period: 2 * time.Second, Log: log})
		if err != nil {
			return fmt.Errorf("dev drand: %w", err)
		}
		go func() {
			if err := d.Start(ctx); err != nil && ctx.Err() == nil {
				log.Error("dev mode's drand network did not start: draws cannot be made", "err", err)
			}
		}()
		defer func() { _ = d.Stop(stopCtx) }()
		cfg.DrandURLs, cfg.DrandChainHash = []string{d.URL}, ""
	}
	if err := migrations.ApplyURL(ctx, cfg.DatabaseURL); err != nil {
		return urlError("SECKILL_DATABASE_URL", cfg.DatabaseURL, err, readPostgres)
	}
	logConfig(log, cfg)

	sys, err := NewSystem(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer sys.Close()
	if cfg.DemoVoucher {
		if err := ensureDemoVoucher(ctx, sys.catalog); err != nil {
			return fmt.Errorf("demo voucher: %w", err)
		}
	}
	var devEnv string
	sys.onListen = func(addr, opsAddr string) {
		d := devEndpoints{addr: addr, opsAddr: opsAddr, kafka: kafkaBanner, dataDir: dataDir, cfg: cfg,
			generatedAdmin: generatedAdmin, generatedJWT: generatedJWT, generatedWebhook: generatedWebhook, mailUI: mailUI}
		var err error
		if devEnv, err = d.writeDevEnv(); err != nil {
			// The system runs all the same; only the load tool's
			// shortcut is lost.
			log.Warn("dev mode could not write its settings for the load tool", "err", err)
		}
		d.writeBanner(stdout, devEnv)
	}
	err = sys.Run(ctx)
	if devEnv != "" {
		if rmErr := os.Remove(devEnv); rmErr != nil {
			log.Warn("dev mode could not remove its settings file", "path", devEnv, "err", rmErr)
		}
	}
	return err
}

// trustDevLoopback adds 127.0.0.1 and ::1 to the trusted proxies when
// SECKILL_DEV_TRUST_LOOPBACK says so (the default). The load tool that the
// banner names runs on this machine and gives each of its shoppers an
// address of its own in X-Forwarded-For; believed from nowhere, every
// shopper would be 127.0.0.1, and a crowd of thousands would meet the
// per-address limits as one client (nearly every buy 429) instead of the
// sale. Only these two addresses, not all of 127.0.0.0/8: the load tool's
// crowd gives its visitors and bots addresses of their own there, and they
// stay clients, limited and capped per address as before. serve never
// calls this: in production only SECKILL_TRUSTED_PROXIES are believed.
func (c *Config) trustDevLoopback() {
	if c.DevTrustLoopback {
		c.TrustedProxies = append(c.TrustedProxies, "127.0.0.1", "::1")
	}
}

// ensureDemoVoucher creates a voucher on sale now unless one already is, so a
// fresh `make run` always has something to buy.
func ensureDemoVoucher(ctx context.Context, catalog *seckill.Catalog) error {
	vs, err := catalog.List(ctx)
	if err != nil && !errors.Is(err, apperr.ErrUnavailable) {
		return err
	}
	now := time.Now()
	for _, v := range vs {
		if v.Kind == seckill.KindSeckill && v.StockLeft > 0 && !now.Before(v.BeginAt) && now.Before(v.EndAt) {
			return nil
		}
	}
	_, err = catalog.Create(ctx, seckill.Voucher{
		Title:        "Demo flash sale: 100 coffee vouchers at 9.90",
		Kind:         seckill.KindSeckill,
		PriceCents:   990,
		StockTotal:   100,
		PerUserLimit: 2,
		BeginAt:      now.Add(-time.Second).UTC().Truncate(time.Second),
		EndAt:        now.Add(24 * time.Hour).UTC().Truncate(time.Second),
	}, nil) // made by dev mode itself, not by an operator: not in the trail
	return err
}

// devDefaults is getenv with dev mode's own defaults: registration without
// a challenge (SECKILL_REGISTER_CHALLENGE=none), so that a script signing
// up against make run needs no captcha; set it to captcha to try the
// page's sign-up as production has it.
func devDefaults(getenv func(string) string) func(string) string {
	return func(k string) string {
		v := getenv(k)
		if k == "SECKILL_REGISTER_CHALLENGE" && strings.TrimSpace(v) == "" {
			return registerNone
		}
		return v
	}
}
