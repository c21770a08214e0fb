package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill"
)

// runReconcile compares Redis with PostgreSQL per voucher and prints the
// drift; with --repair it rebuilds the Redis state of the seckill vouchers
// that drifted (or of --voucher) from PostgreSQL, see orders.Repair: the
// voucher is off sale while it runs, and the workers must be running (the
// repair waits until they have persisted every message already on Kafka).
func runReconcile(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("reconcile", reconcileUsage)
	repair := fs.Bool("repair", false, "rebuild Redis from PostgreSQL for vouchers that drifted")
	only := fs.Int64("voucher", 0, "only this voucher id (with --repair: repair it even without drift)")
	wait := fs.Duration("timeout", 2*time.Minute, "how long --repair may wait for the workers to catch up")
	if help, err := parseFlags(fs, args, 0, stdout, stderr); help || err != nil {
		return err
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	if (cfg.RedisURL == "" && len(cfg.RedisCluster) == 0) || cfg.DatabaseURL == "" {
		return errors.New("reconcile needs SECKILL_REDIS_URL (or SECKILL_REDIS_CLUSTER_ADDRS) and SECKILL_DATABASE_URL (and SECKILL_KAFKA_BROKERS for --repair)")
	}
	cfg.Roles = nil // connections only: no gateway, worker or sweeper here
	s, err := NewSystem(ctx, cfg, newLogger(cfg, stderr))
	if err != nil {
		return err
	}
	defer s.Close()

	vouchers, err := s.store.Vouchers(ctx)
	if err != nil {
		return err
	}
	stats := s.statsService()
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "VOUCHER\tKIND\tTOTAL\tPG LEFT\tPG SOLD\tREDIS LEFT\tREDIS HELD\tPENDING\tDRIFT")
	var drifted []int64
	for _, v := range vouchers {
		if *only != 0 && v.ID != *only {
			continue
		}
		st, err := stats.Stats(ctx, v.ID)
		if err != nil {
			return fmt.Errorf("voucher %d: %w", v.ID, err)
		}
		pgLeft := v.StockLeft // PostgreSQL's; st.StockLeft is Redis's live figure
		sold := st.Quantity[orders.StatusCreated] + st.Quantity[orders.StatusPaid]
		if v.Kind != seckill.KindSeckill {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t-\t-\t-\tok (sold in PostgreSQL)\n", v.ID, v.Kind, v.StockTotal, pgLeft, sold)
			continue
		}
		verdict := "ok"
		if !st.Drift.OK() {
			verdict = fmt.Sprint(st.Drift.Problems)
			drifted = append(drifted, v.ID)
		} else if *only == v.ID {
			drifted = append(drifted, v.ID)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", v.ID, v.Kind, v.StockTotal, pgLeft, sold,
			st.Redis.Left, st.Redis.Held, st.Redis.Pending, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !*repair || len(drifted) == 0 {
		return nil
	}
	drain, err := kafkaq.NewDrain(cfg.KafkaBrokers, cfg.KafkaTopic, cfg.KafkaGroup)
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	defer drain.Close()
	rctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	for _, id := range drifted {
		stock := orders.WithRoomRecovery(s.stock, roomRecovery{room: s.newRoom(), store: s.store})
		res, err := orders.Repair(rctx, id, s.store, stock, drain, producerTimeout)
		if err != nil {
			return fmt.Errorf("repair voucher %d: %w", id, err)
		}
		fmt.Fprintf(stdout, "voucher %d: Redis rebuilt from PostgreSQL (%d holds of %d units, %d released orders, %d left on sale); %d orphaned holds recorded failed\n",
			id, res.Holds, res.Held, res.Released, res.Left, len(res.Failed))
	}
	return nil
}
