package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/flashsale/seckill/migrations"
	"github.com/flashsale/seckill/seckill/tracing"
)

const usage = `seckill: the flash-sale platform.

usage: seckill COMMAND [flags]

Commands:
  seckill dev        start everything on this machine (private Redis, PostgreSQL, Kafka broker)
  seckill serve      run the roles in SECKILL_ROLES against the configured services
  seckill migrate    apply the database schema and exit
  seckill reconcile  compare Redis with PostgreSQL per voucher (--repair rebuilds Redis)
  seckill deadletters list | replay PARTITION/OFFSET
                     the messages the workers set aside, and sending one back to them
  seckill hoard show | clear USER_ID
                     a shopper's unpaid strikes (403 unpaid_limit), and clearing them
  seckill operators add NAME --scope read|write | list | revoke NAME
                     operators' own tokens for the operator routes
  seckill env        print every configuration variable
  seckill vapid      make a key pair for Web Push reminders, as SECKILL_VAPID_* lines
  seckill version    print the version and commit
  seckill healthcheck  ask this process's ops listener for /readyz (the image's HEALTHCHECK)

'seckill COMMAND -h' prints a command's usage. Configuration is read from the
environment; see 'seckill env'.
`

// Run dispatches a subcommand. Everything the process does starts here.
// environ is the process's environment as NAME=value (os.Environ), read only
// to warn of SECKILL_* variables no setting has; the values come from getenv.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, environ ...string) error {
	return run(ctx, build{}, args, getenv, stdout, stderr, environ...)
}

// run is Run for a binary whose build stamped b (Main).
func run(ctx context.Context, b build, args []string, getenv func(string) string, stdout, stderr io.Writer, environ ...string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, "seckill: no subcommand given\n\n"+usage)
		return usagef("no subcommand given")
	}
	cmd, args := args[0], args[1:]
	// The subcommands without flags of their own still answer -h and
	// refuse anything else before they touch a service.
	if u, ok := map[string]string{
		"dev": devUsage, "serve": serveUsage, "migrate": migrateUsage, "env": envUsage, "version": versionUsage,
		"vapid": vapidUsage,
	}[cmd]; ok {
		if help, err := parseFlags(newFlags(cmd, u), args, 0, stdout, stderr); help || err != nil {
			return err
		}
	}
	switch cmd {
	case "dev", "serve", "migrate", "reconcile", "deadletters", "hoard", "operators":
		warnUnknownVariables(getenv, environ, stderr)
	}
	switch cmd {
	case "dev":
		return runDev(ctx, getenv, stdout, stderr)
	case "serve":
		return runServe(ctx, getenv, stderr)
	case "migrate":
		return runMigrate(ctx, getenv, stderr)
	case "reconcile":
		return runReconcile(ctx, args, getenv, stdout, stderr)
	case "deadletters":
		return runDeadLetters(ctx, args, getenv, stdout, stderr)
	case "hoard":
		return runHoard(ctx, args, getenv, stdout, stderr)
	case "operators":
		return runOperators(ctx, args, getenv, stdout, stderr)
	case "healthcheck":
		return runHealthcheck(ctx, args, getenv, stdout, stderr)
	case "loadtest":
		// The load tool is a binary of its own, so the product links none
		// of it.
		err := usagef("loadtest is a tool of its own now: run `bin/loadtest sale` (built by make build; or go run ./cmd/loadtest sale); `bin/loadtest -h` lists its scenarios")
		fmt.Fprintf(stderr, "seckill: %v\n", err)
		return err
	case "env":
		return writeEnvTable(stdout)
	case "vapid":
		return writeVAPIDKeys(stdout)
	case "version", "--version", "-version":
		return writeVersion(stdout, b)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "seckill: unknown subcommand %q\n\n", cmd)
	fmt.Fprint(stderr, usage)
	return usagef("unknown subcommand %q", cmd)
}

// newLogger builds the process logger from the configuration.
func newLogger(cfg Config, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	// Durations are written as "1.234ms" in both formats (JSON would
	// write nanoseconds), and every line written within a traced context
	// carries its trace_id and span_id.
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: tracing.ReadableDurations}
	if strings.EqualFold(cfg.LogFormat, "json") {
		return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts)))
}

// logStopped is the process's last line, once everything it started has
// stopped: an operator reading a log knows the process ended on its own
// terms, and after how long.
func logStopped(log *slog.Logger, started time.Time) {
	log.Info("stopped", "uptime", time.Since(started).Round(time.Millisecond))
}

// logConfig prints the configuration with its secrets masked.
func logConfig(log *slog.Logger, cfg Config) {
	args := make([]any, 0, 2*len(cfg.printable()))
	for _, kv := range cfg.printable() {
		args = append(args, kv[0], kv[1])
	}
	log.Info("configuration", args...)
}

// requireServices says which service URLs a production process lacks.
func (c Config) requireServices() error {
	var missing []string
	if c.RedisURL == "" && len(c.RedisCluster) == 0 {
		missing = append(missing, "SECKILL_REDIS_URL (or SECKILL_REDIS_CLUSTER_ADDRS)")
	}
	if c.DatabaseURL == "" {
		missing = append(missing, "SECKILL_DATABASE_URL")
	}
	if len(c.KafkaBrokers) == 0 {
		missing = append(missing, "SECKILL_KAFKA_BROKERS")
	}
	if c.JWTSecret == "" {
		missing = append(missing, "SECKILL_JWT_SECRET")
	}
	if c.AdminToken == "" {
		missing = append(missing, "SECKILL_ADMIN_TOKEN")
	}
	if len(missing) > 0 {
		return fmt.Errorf("serve needs %s (or use 'seckill dev', which starts private services)", strings.Join(missing, ", "))
	}
	return nil
}

func runServe(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	defer logStopped(log, time.Now())
	setLibraryLoggers(log)
	logConfig(log, cfg)
	if err := cfg.requireServices(); err != nil {
		return err
	}
	sys, err := NewSystem(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer sys.Close()
	return sys.Run(ctx)
}

func runMigrate(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	if cfg.DatabaseURL == "" {
		return errors.New("migrate needs SECKILL_DATABASE_URL")
	}
	if err := migrations.ApplyURL(ctx, cfg.DatabaseURL); err != nil {
		return urlError("SECKILL_DATABASE_URL", cfg.DatabaseURL, err, readPostgres)
	}
	log.Info("schema is up to date", "database", maskURL(cfg.DatabaseURL))
	return nil
}
