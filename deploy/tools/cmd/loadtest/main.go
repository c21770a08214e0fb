// Command loadtest releases a crowd on a running system over HTTP and checks
// what it sold. Each scenario is a subcommand with its own flags:
//
//	loadtest sale     a flash sale at the opening second, then its invariants
//	loadtest crowd    the real crowd: catalog, sockets, honest shoppers, bots
//	loadtest room     the waiting room: a line admitted at a rate, passes, bots
//	loadtest churn    a soak: buy then cancel, Redis's memory before and after
//	loadtest ceiling  a trivial route's rate, this machine's ceiling
//
// `loadtest <scenario> -h` prints the scenario's flags. The exit status is
// as seckill's command line has it: 0 when the run passed or -h printed the
// usage, 2 for a command line refused before anything ran (its message and
// the usage on stderr), 1 for any other failure, a failed check included.
// The tool is apart from the seckill binary so that the product links none
// of it; the scenarios themselves are deploy/tools/loadtest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/flashsale/seckill/deploy/tools/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses of the process.
const (
	exitFailure = 1 // the run was made and failed, or could not be made
	exitUsage   = 2 // the command line was refused; nothing ran
)

// runMain runs the command line args and returns the process's exit status,
// having told any failure on stderr.
func runMain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	err := run(ctx, args, getenv, stdout, stderr)
	code := exitCode(err)
	if code == exitFailure {
		// The tool's errors mostly name it already.
		msg := err.Error()
		if !strings.HasPrefix(msg, "loadtest") {
			msg = "loadtest: " + msg
		}
		fmt.Fprintln(stderr, msg)
	}
	return code
}

// exitCode is the process's exit status for run's answer.
func exitCode(err error) int {
	var u *loadtest.UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return exitUsage
	}
	return exitFailure
}

// run picks the scenario from args[0] and runs it with the rest. A command
// line it refuses is told on stderr, with the usage, before it returns the
// *loadtest.UsageError.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return refuse(stderr, &loadtest.UsageError{Err: errors.New("no scenario given")})
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		loadtest.Usage(stdout, "")
		return nil
	}
	s := loadtest.Scenario(name)
	if !slices.Contains(loadtest.Scenarios(), s) {
		return refuse(stderr, &loadtest.UsageError{Err: fmt.Errorf("unknown scenario %q", name)})
	}
	cfg, err := loadtest.ParseFlags(s, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		loadtest.Usage(stdout, s)
		return nil
	}
	if u := (*loadtest.UsageError)(nil); errors.As(err, &u) {
		return refuse(stderr, u)
	}
	if err != nil {
		return err
	}
	_, err = loadtest.Run(ctx, cfg, stdout, stderr)
	return err
}

// refuse tells u on stderr, then the usage of its scenario (the tool's
// when it has none), and returns it.
func refuse(stderr io.Writer, u *loadtest.UsageError) error {
	fmt.Fprintf(stderr, "%v\n\n", u)
	loadtest.Usage(stderr, u.Scenario)
	return u
}
