// Command kafkajars fetches Apache Kafka's broker jars into the cache
// folder deploy/devstack starts brokers from (see
// devstack.FetchKafkaJars), so that `make test` fetches them once before
// any test starts a broker rather than inside a test's time. It prints the
// folder.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"

	"github.com/flashsale/seckill/deploy/devstack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	dir, err := devstack.FetchKafkaJars(ctx, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafkajars:", err)
		os.Exit(1)
	}
	fmt.Println(dir)
}
