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
//	seckill healthcheck ask this process's ops listener for /readyz (the image's HEALTHCHECK)
//
// 'seckill COMMAND -h' prints a command's usage; a usage error exits 2.
package main

import (
	"os"

	"github.com/flashsale/seckill/cmd/seckill/app"
)

// commit is what the Makefile's build read from git and wrote here with
// the linker (-ldflags "-X main.commit=..."), for `seckill version`. The
// one variable of the package, as the linker can set no constant; nothing
// writes it after.
var commit string

func main() { os.Exit(app.Main(commit)) }
