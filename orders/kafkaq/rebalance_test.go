package kafkaq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill"
)

// workerEnv carries a workerSpec to a worker process: the test binary run
// again, which then runs one consumer and nothing else.
const workerEnv = "KAFKAQ_TEST_WORKER"

type workerSpec struct {
	Brokers  []string
	Topic    string
	Group    string
	Database string
	Name     string
}

const effectsTable = `CREATE TABLE effects (order_id bigint PRIMARY KEY, worker text NOT NULL);
CREATE TABLE deliveries (order_id bigint NOT NULL, worker text NOT NULL)`

// pgHandler persists a batch in one transaction: the durable effect (one
// row per order, ON CONFLICT so a redelivery changes nothing) and a log of
// every delivery. Each batch takes a while, so a kill lands mid-batch.
func pgHandler(pool *pgxpool.Pool, worker string) kafkaq.Handler {
	return func(ctx context.Context, batch []seckill.Reservation) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		for _, r := range batch {
			if _, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, $2) ON CONFLICT (order_id) DO NOTHING`, r.OrderID, worker); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO deliveries VALUES ($1, $2)`, r.OrderID, worker); err != nil {
				return err
			}
		}
		time.Sleep(50 * time.Millisecond) // a slow transaction
		return tx.Commit(ctx)
	}
}

// workerMain is a worker process's whole life: consume until killed.
func workerMain(spec string) int {
	var s workerSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, "worker spec:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	pool, err := pgxpool.New(context.Background(), s.Database)
	if err != nil {
		log.Error("worker: postgres", "err", err)
		return 2
	}
	c, err := kafkaq.NewConsumer(kafkaq.ConsumerConfig{Brokers: s.Brokers, Topic: s.Topic, Group: s.Group, MaxBatch: 10, Log: log})
	if err != nil {
		log.Error("worker: consumer", "err", err)
		return 2
	}
	if err := c.Run(context.Background(), pgHandler(pool, s.Name)); err != nil {
		log.Error("worker: run", "err", err)
		return 1
	}
	return 0
}

// startWorker runs a worker process; it is killed when the test ends.
func startWorker(t *testing.T, s workerSpec) *exec.Cmd {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+string(b))
	out, err := os.Create(filepath.Join(t.TempDir(), "worker.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = out.Close()
		if t.Failed() {
			log, _ := os.ReadFile(out.Name())
			t.Logf("worker process output:\n%s", log)
		}
	})
	return cmd
}

// A worker process of the group is killed (SIGKILL) mid-batch, its
// connections torn down with it. No message is lost, every durable effect
// happens once, and the group's offsets reach the end only once every
// effect is committed in PostgreSQL.
func TestWorkerProcessKilled(t *testing.T) {
	ctx := context.Background()
	b := apache(t)
	topic := b.newTopic(t, 2)
	group := "g-" + topic
	url := stack.NewDatabaseURL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, effectsTable)
	require.NoError(t, err)
	const n = 300
	p := newProducer(t, b, topic)
	for i := range int64(n) {
		require.NoError(t, p.Publish(ctx, reservation(i+1, i%30+1)))
	}
	count := func(q string) int {
		var c int
		require.NoError(t, pool.QueryRow(ctx, q).Scan(&c))
		return c
	}
	committedSum := func() int64 {
		var s int64
		for _, off := range committed(t, b, group, topic, 2) {
			s += max(off, 0)
		}
		return s
	}

	child := startWorker(t, workerSpec{Brokers: b.brokers, Topic: topic, Group: group, Database: url, Name: "process"})
	require.Eventually(t, func() bool { return count(`SELECT count(*) FROM effects`) > 0 }, 60*time.Second, 20*time.Millisecond)
	require.NoError(t, child.Process.Kill())
	byProcess := count(`SELECT count(*) FROM effects`)
	_, stop := run(t, b, kafkaq.ConsumerConfig{Topic: topic, Group: group, MaxBatch: 10}, pgHandler(pool, "survivor"))
	require.Eventually(t, func() bool { return committedSum() == n }, 90*time.Second, 100*time.Millisecond)
	stop()
	require.Equal(t, n, count(`SELECT count(*) FROM effects`), "every message persisted, each once")
	require.Equal(t, int64(n), committedSum())
	require.Greater(t, count(`SELECT count(*) FROM effects WHERE worker = 'survivor'`), 0, "the survivor took over")
	t.Logf("the process persisted %d before the kill; %d deliveries for %d orders (redelivered: %d)", byProcess,
		count(`SELECT count(*) FROM deliveries`), n, count(`SELECT count(*) FROM deliveries`)-n)
}
