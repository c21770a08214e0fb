package app

// The command line's conventions, shared by every subcommand: -h/--help
// prints the subcommand's usage on stdout and does nothing else (exit 0); a
// usage error prints a message and the usage on stderr and exits 2, as Go's
// own tools do; any other failure exits 1.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
)

// Main runs the command line the process was started with, until it ends or
// SIGINT or SIGTERM stops it, and returns the process's exit status. commit
// is what the Makefile's build read from git ("b1033be", "b1033be-dirty"),
// "" when it read none: `seckill version` says it where the Go toolchain
// stamped no VCS information.
func Main(commit string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, build{commit: commit}, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, os.Environ()...)
	stop()
	code := ExitCode(err)
	if code == exitFailure {
		// A usage error was told with the usage already.
		fmt.Fprintln(os.Stderr, "seckill:", err)
	}
	return code
}

// Exit statuses of the process.
const (
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // the command line was wrong; nothing ran
)

// usageError is a command line the process refuses before doing anything.
// Whoever returns one has already told it on stderr, with the usage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef is a usage error with a message.
func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// ExitCode is the process's exit status for run's answer.
func ExitCode(err error) int {
	var u *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return exitUsage
	}
	return exitFailure
}

// Usage of the subcommands without flags of their own.
const (
	devUsage = `usage: seckill dev

Starts everything on this machine: a private Redis and PostgreSQL (data in
SECKILL_DATA_DIR), an in-process Kafka broker (SECKILL_DEV_KAFKA=apache for
Apache Kafka), a demo voucher on sale, and every role. Secrets left unset are
generated; the banner prints them once and SECKILL_DATA_DIR/dev.env keeps
them for the load tool (bin/loadtest). Ctrl-C stops it and its child processes.
Configuration: 'seckill env'.
`
	serveUsage = `usage: seckill serve

Runs the roles in SECKILL_ROLES (gateway, worker, sweeper) against the
services configured by SECKILL_REDIS_URL (or SECKILL_REDIS_CLUSTER_ADDRS),
SECKILL_DATABASE_URL and SECKILL_KAFKA_BROKERS, with SECKILL_JWT_SECRET and
SECKILL_ADMIN_TOKEN set. SIGTERM drains it. Configuration: 'seckill env'.
`
	migrateUsage = `usage: seckill migrate

Applies the database schema to SECKILL_DATABASE_URL and exits.
`
	envUsage = `usage: seckill env

Prints every configuration variable with its default and meaning.
`
	vapidUsage = `usage: seckill vapid

Makes a new VAPID key pair for Web Push reminders and prints it as the two
lines SECKILL_VAPID_PUBLIC_KEY=... and SECKILL_VAPID_PRIVATE_KEY=..., a file
for 'kubectl create secret generic --from-env-file' or docker compose's .env.
Make it once: browsers subscribe to the public key, and a new pair loses
every subscription.
`
	versionUsage = `usage: seckill version

Prints the version, the commit and the Go release the binary was built from.
`
	reconcileUsage = `usage: seckill reconcile [--repair] [--voucher ID] [--timeout D]

Compares Redis with PostgreSQL per voucher and prints the drift; --repair
rebuilds the Redis state of the vouchers that drifted from PostgreSQL (the
workers must be running). Needs SECKILL_REDIS_URL (or
SECKILL_REDIS_CLUSTER_ADDRS) and SECKILL_DATABASE_URL, and
SECKILL_KAFKA_BROKERS for --repair.

Flags:
`
	deadLettersUsage = `usage: seckill deadletters [--json] [--timeout D] list
       seckill deadletters [--timeout D] replay PARTITION/OFFSET

Lists the messages the workers set aside, or sends one back to them once its
cause is fixed. Needs SECKILL_KAFKA_BROKERS.

Flags:
`
)

// newFlags is a subcommand's flag set: its usage text comes first, then its
// flags' defaults.
func newFlags(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		if strings.HasSuffix(usage, "Flags:\n") {
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses a subcommand's arguments. On -h/--help it prints the
// usage on stdout and reports help, and the subcommand does nothing else. A
// bad flag is a usage error, told on stderr with the usage. maxArgs bounds
// the arguments left after the flags (-1: any).
func parseFlags(fs *flag.FlagSet, args []string, maxArgs int, stdout, stderr io.Writer) (help bool, err error) {
	// The flag package prints its own message and then calls Usage on
	// failure, and calls Usage on -h as well: both are silenced here and
	// told to the right stream below.
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err = fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return true, nil
	case err != nil:
		err = usagef("%s: %w", fs.Name(), err)
	case maxArgs >= 0 && fs.NArg() > maxArgs:
		err = usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(maxArgs))
	default:
		return false, nil
	}
	return false, refuseArgs(fs, stderr, err)
}

// refuseArgs tells a usage error of fs's subcommand on stderr, with its
// usage, and returns it as one.
func refuseArgs(fs *flag.FlagSet, stderr io.Writer, err error) error {
	var u *usageError
	if !errors.As(err, &u) {
		err = &usageError{err: err}
	}
	fs.SetOutput(stderr)
	fmt.Fprintf(stderr, "seckill: %v\n\n", err)
	fs.Usage()
	return err
}

// build is what the binary's build stamped beside the Go toolchain (Main).
type build struct {
	commit string // "b1033be", with "-dirty" when the tree had changes; "" for none
}

// dirtySuffix marks a commit the Makefile read from a tree with changes.
const dirtySuffix = "-dirty"

// writeVersion prints what the binary was built from.
func writeVersion(w io.Writer, b build) error {
	bi, ok := debug.ReadBuildInfo()
	_, err := io.WriteString(w, versionText(bi, ok, b))
	return err
}

// versionText is what `seckill version` prints: the main module's version
// ("(devel)" for a build from a checkout), the commit, and the Go release.
// The commit is the Go toolchain's stamp (the full hash, its time, whether
// the tree had changes) when it made one; it makes none where GOFLAGS has
// -buildvcs=false or the checkout is a git worktree, and then it is the
// one the Makefile's build read from git (README: make build).
func versionText(bi *debug.BuildInfo, ok bool, b build) string {
	if !ok {
		return "seckill: no build information (built without module support)\n"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	commit := "unknown (the build carries no VCS information; make build stamps the commit from git)"
	switch rev := settings["vcs.revision"]; {
	case rev != "":
		commit = rev
		if t := settings["vcs.time"]; t != "" {
			commit += " " + t
		}
		if settings["vcs.modified"] == "true" {
			commit += " (with uncommitted changes)"
		}
	case b.commit != "":
		commit = b.commit
		if c, dirty := strings.CutSuffix(commit, dirtySuffix); dirty {
			commit = c + " (with uncommitted changes)"
		}
	}
	return fmt.Sprintf("seckill %s\nmodule  %s\ncommit  %s\ngo      %s\n", bi.Main.Version, bi.Main.Path, commit, bi.GoVersion)
}
