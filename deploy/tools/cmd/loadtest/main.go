// Command loadtest releases a crowd on a running system over HTTP and checks
// what it sold. Each scenario is a subcommand with its own flags:
//
//	loadtest sale     a flash sale at the opening second, then its invariants
//	loadtest crowd    the real crowd: catalog, sockets, honest shoppers, bots
//	loadtest room     the waiting room: a line admitted at a rate, passes, bots
//	loadtest churn    a soak: buy then cancel, Redis's memory before and after
//	loadtest ceiling  a trivial route's rate, this machine's ceiling
//
// `loadtest <scenario> -h` prints the scenario's flags. The tool is apart
// from the seckill binary so that the product links none of it; the
// scenarios themselves are deploy/tools/loadtest.
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
	"syscall"

	"github.com/flashsale/seckill/deploy/tools/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// run picks the scenario from args[0] and runs it with the rest.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		loadtest.Usage(stderr, "")
		return errors.New("no scenario given")
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		loadtest.Usage(stdout, "")
		return nil
	}
	s := loadtest.Scenario(name)
	if !slices.Contains(loadtest.Scenarios(), s) {
		loadtest.Usage(stderr, "")
		return fmt.Errorf("unknown scenario %q", name)
	}
	cfg, err := loadtest.ParseFlags(s, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		loadtest.Usage(stdout, s)
		return nil
	}
	if err != nil {
		return err
	}
	_, err = loadtest.Run(ctx, cfg, stdout, stderr)
	return err
}
