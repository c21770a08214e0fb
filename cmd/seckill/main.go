// Command seckill is the flash-sale platform in one binary. Its subcommands
// run the roles together or apart:
//
//	seckill dev        everything on this machine: private Redis and PostgreSQL,
//	                   an in-process Kafka broker, a demo voucher, every role
//	seckill serve      the roles named in SECKILL_ROLES against configured services
//	seckill migrate    apply the database schema and exit
//	seckill reconcile  report (and with --repair, fix) drift between Redis and PostgreSQL
//	seckill hoard      show or clear a shopper's unpaid strikes
//	seckill env        print every configuration variable
//	seckill version    print the version and commit
//
// 'seckill COMMAND -h' prints a command's usage; a usage error exits 2.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, os.Environ()...)
	stop()
	code := exitCode(err)
	if code == exitFailure {
		// A usage error was told with the usage already.
		fmt.Fprintln(os.Stderr, "seckill:", err)
	}
	os.Exit(code)
}
