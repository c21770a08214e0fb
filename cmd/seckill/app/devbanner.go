//go:build !nodev

package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/flashsale/seckill/deploy/devstack"
)

// devEndpoints is what dev mode's banner and its devstack.EnvFile tell: where it listens and
// the secrets it uses, as NAME=value lines that the load tool reads from its
// -data-dir and a shell can source. The file holds secrets: only its owner
// may read it, and it is removed when dev mode stops.
type devEndpoints struct {
	addr, opsAddr string // the gateway's and the ops listener's host:port
	kafka         string // which broker runs, and where
	dataDir       string // absolute
	cfg           Config // with the secrets dev mode uses
	// generated names the secrets dev mode made up for this run, which
	// the banner shows once (a secret the operator chose is not shown).
	generatedAdmin, generatedJWT bool
	// generatedWebhook: dev mode made the Stripe webhook secret.
	generatedWebhook bool
	// mailUI is the web page of dev mode's mailpit ("" without one).
	mailUI string
}

// writeDevEnv writes the devstack.EnvFile and returns its path.
func (d devEndpoints) writeDevEnv() (string, error) {
	if err := os.MkdirAll(d.dataDir, 0o700); err != nil {
		return "", fmt.Errorf("dev mode: %w", err)
	}
	path := filepath.Join(d.dataDir, devstack.EnvFile)
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by `seckill dev` while it runs, removed when it stops: where it\n")
	fmt.Fprintf(&b, "# listens and its secrets. `bin/loadtest sale -data-dir %s` reads it;\n", d.dataDir)
	fmt.Fprintf(&b, "# a shell can too: set -a; . %s; set +a\n", path)
	fmt.Fprintf(&b, "SECKILL_LOADTEST_URL=http://%s\n", d.addr)
	fmt.Fprintf(&b, "SECKILL_LOADTEST_METRICS_URL=http://%s\n", d.opsAddr)
	fmt.Fprintf(&b, "SECKILL_ADMIN_TOKEN=%s\n", d.cfg.AdminToken)
	fmt.Fprintf(&b, "SECKILL_JWT_SECRET=%s\n", d.cfg.JWTSecret)
	// The private services, so that a tool (make bench's cost table) can
	// read their own counters.
	if len(d.cfg.RedisCluster) > 0 {
		fmt.Fprintf(&b, "SECKILL_REDIS_CLUSTER_ADDRS=%s\n", strings.Join(d.cfg.RedisCluster, ","))
	} else {
		fmt.Fprintf(&b, "SECKILL_REDIS_URL=%s\n", d.cfg.RedisURL)
	}
	fmt.Fprintf(&b, "SECKILL_DATABASE_URL=%s\n", d.cfg.DatabaseURL)
	if d.cfg.PaymentProvider == paymentStripe {
		// What a tool needs to sign webhook deliveries as Stripe would.
		fmt.Fprintf(&b, "SECKILL_STRIPE_API_BASE=%s\n", d.cfg.StripeAPIBase)
		fmt.Fprintf(&b, "SECKILL_STRIPE_WEBHOOK_SECRET=%s\n", d.cfg.StripeWebhook)
	}
	// Written whole under another name, then renamed: a reader never sees
	// half a file, and the mode is the owner's only from the first byte.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return "", fmt.Errorf("dev mode: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("dev mode: %w", err)
	}
	return path, nil
}

// writeBanner tells the person who ran `make run` where everything is.
func (d devEndpoints) writeBanner(w io.Writer, devEnv string) {
	shop := "http://" + d.addr
	fmt.Fprintf(w, "\nseckill is running:\n")
	fmt.Fprintf(w, "  shop http://%s  operators %s/admin\n", d.addr, shop)
	fmt.Fprintf(w, "  API spec %s/openapi.yaml  metrics http://%s/metrics\n", shop, d.opsAddr)
	fmt.Fprintf(w, "kafka: %s\n", d.kafka)
	if d.generatedAdmin {
		fmt.Fprintf(w, "admin token (generated for this run; set SECKILL_ADMIN_TOKEN to choose one): %s\n", d.cfg.AdminToken)
	}
	if d.generatedJWT {
		fmt.Fprintf(w, "JWT secret (generated for this run; set SECKILL_JWT_SECRET to choose one): %s\n", d.cfg.JWTSecret)
	}
	if d.cfg.PaymentProvider == paymentStripe {
		fmt.Fprintf(w, "payments: Stripe at %s; webhooks to http://%s/api/v1/payments/webhooks/stripe\n", d.cfg.StripeAPIBase, d.addr)
	}
	if d.generatedWebhook {
		fmt.Fprintf(w, "Stripe webhook secret (generated for this run; set SECKILL_STRIPE_WEBHOOK_SECRET to choose one): %s\n", d.cfg.StripeWebhook)
	}
	if d.mailUI != "" {
		fmt.Fprintf(w, "reminder e-mail: read it at %s (mailpit)\n", d.mailUI)
	}
	if devEnv != "" {
		fmt.Fprintf(w, "load test: bin/loadtest sale -data-dir %s   (reads the URLs and secrets from %s)\n", d.dataDir, devEnv)
	}
	fmt.Fprintln(w, "press Ctrl-C to stop")
}
