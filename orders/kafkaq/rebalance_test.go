package kafkaq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
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
	// Hold, when set, makes the worker stop at a point of its first batch
	// until the file Resume exists; it creates the file Held when it is
	// there. Its batches are then handled one at a time, so no other
	// transaction of it is open at that point.
	Hold   string
	Held   string
	Resume string
}

// The points a worker process can be held at (workerSpec.Hold): before its
// transaction begins, inside it (rows written, not committed), and after
// it committed but before the batch's offsets are.
const (
	holdBefore = "before"
	holdDuring = "during"
	holdAfter  = "after"
)

// workerHandler is a worker process's handler: pgHandler, stopping where
// s.Hold says.
func workerHandler(s workerSpec, pool *pgxpool.Pool) kafkaq.Handler {
	if s.Hold == "" {
		return pgHandler(pool, s.Name, nil)
	}
	var mu sync.Mutex
	first, holdNow := true, false // guarded by mu
	at := func(point string) {
		if !holdNow || s.Hold != point {
			return
		}
		if err := os.WriteFile(s.Held, nil, 0o644); err != nil {
			panic(err)
		}
		for {
			if _, err := os.Stat(s.Resume); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	inner := pgHandler(pool, s.Name, func() { at(holdDuring) })
	return func(ctx context.Context, batch []seckill.Reservation) error {
		mu.Lock()
		defer mu.Unlock()
		holdNow, first = first, false
		at(holdBefore)
		err := inner(ctx, batch)
		if err == nil {
			at(holdAfter)
		}
		return err
	}
}

const effectsTable = `CREATE TABLE effects (order_id bigint PRIMARY KEY, worker text NOT NULL);
CREATE TABLE deliveries (order_id bigint NOT NULL, worker text NOT NULL)`

// pgHandler persists a batch in one transaction: the durable effect (one
// row per order, ON CONFLICT so a redelivery changes nothing) and a log of
// every delivery. Each batch takes a while, so a kill lands mid-batch.
// inTx, when set, runs inside the transaction before it commits.
func pgHandler(pool *pgxpool.Pool, worker string, inTx func()) kafkaq.Handler {
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
		if inTx != nil {
			inTx()
		}
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
	if err := c.Run(context.Background(), workerHandler(s, pool)); err != nil {
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

// effects is a worker test's set-up: a topic on the package's Apache Kafka
// holding n reservations of the given number of users, a group name for it
// and a database with the effects tables.
type effects struct {
	b                 kafka
	topic, group, url string
	pool              *pgxpool.Pool
	count             func(query string) int // runs a count(*) query
}

func newEffects(t *testing.T, partitions int32, n, users int64) effects {
	t.Helper()
	ctx := context.Background()
	e := effects{b: apache(t), url: stack.NewDatabaseURL(t)}
	e.topic = e.b.newTopic(t, partitions)
	e.group = "g-" + e.topic
	pool, err := pgxpool.New(ctx, e.url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e.pool = pool
	_, err = pool.Exec(ctx, effectsTable)
	require.NoError(t, err)
	p := newProducer(t, e.b, e.topic)
	for i := range n {
		// Each user buys a voucher of its own: the key is the voucher, and
		// these tests need messages in every partition.
		r := reservation(i+1, i%users+1)
		r.VoucherID = r.UserID
		require.NoError(t, p.Publish(ctx, r))
	}
	e.count = func(q string) int {
		var c int
		require.NoError(t, pool.QueryRow(ctx, q).Scan(&c))
		return c
	}
	return e
}

// A worker process of the group is killed (SIGKILL) mid-batch, its
// connections torn down with it. No message is lost, every durable effect
// happens once, and the group's offsets reach the end only once every
// effect is committed in PostgreSQL.
func TestWorkerProcessKilled(t *testing.T) {
	const n = 300
	e := newEffects(t, 2, n, 30)
	b, topic, group, url, pool, count := e.b, e.topic, e.group, e.url, e.pool, e.count
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
	_, stop := run(t, b, kafkaq.ConsumerConfig{Topic: topic, Group: group, MaxBatch: 10}, pgHandler(pool, "survivor", nil))
	require.Eventually(t, func() bool { return committedSum() == n }, 90*time.Second, 100*time.Millisecond)
	stop()
	require.Equal(t, n, count(`SELECT count(*) FROM effects`), "every message persisted, each once")
	require.Equal(t, int64(n), committedSum())
	require.Greater(t, count(`SELECT count(*) FROM effects WHERE worker = 'survivor'`), 0, "the survivor took over")
	t.Logf("the process persisted %d before the kill; %d deliveries for %d orders (redelivered: %d)", byProcess,
		count(`SELECT count(*) FROM deliveries`), n, count(`SELECT count(*) FROM deliveries`)-n)
}

// A worker process is frozen (SIGSTOP) in the middle of a batch, past its
// group session timeout (sarama's 10 s): before the batch's transaction
// began, inside it (rows written, not committed), or after it committed
// but before the offsets were. The other worker joins; the coordinator
// waits for the frozen member, drops it when its session expires and gives
// the other worker every partition, which persists everything from the
// last committed offsets (the frozen batch again) and commits to the end.
// Frozen inside its transaction, the worker keeps that transaction's row
// locks: the other worker's batch with the same orders waits on them, and
// that partition moves on only once the frozen worker is thawed (or
// PostgreSQL ends its session). Thawed, the stale worker finishes its
// batch (persisting it again changes nothing) and commits with its old
// generation: the coordinator refuses that commit (UNKNOWN_MEMBER_ID), so
// the offsets neither move back nor skip; then it rejoins the group.
// Throughout, no committed offset is ahead of PostgreSQL.
//
// Where the freeze lands decides whether the partition stalls, so each
// point is reached on purpose (workerSpec.Hold) rather than by timing: a
// freeze "as soon as effects appear" lands inside a transaction about two
// times in three, and a test that then waits for the other worker to finish
// before thawing never sees it finish.
func TestWorkerFrozen(t *testing.T) {
	for _, hold := range []string{holdBefore, holdDuring, holdAfter} {
		t.Run(hold+" its transaction", func(t *testing.T) {
			t.Parallel()
			workerFrozen(t, hold)
		})
	}
}

func workerFrozen(t *testing.T, hold string) {
	const partitions, n = 2, 100
	e := newEffects(t, partitions, n, 20)
	b, topic, group, url, pool, count := e.b, e.topic, e.group, e.url, e.pool, e.count
	log := readLog(t, b.brokers, topic, partitions)
	for part, ids := range log {
		require.NotEmpty(t, ids, "partition %d has messages to hand over", part)
	}
	atEnd := func() bool {
		offs := committed(t, b, group, topic, partitions)
		for part, ids := range log {
			if offs[int32(part)] != int64(len(ids)) {
				return false
			}
		}
		return true
	}
	watch := watchOffsets(t, b, pool, group, topic, log)

	dir := t.TempDir()
	spec := workerSpec{Brokers: b.brokers, Topic: topic, Group: group, Database: url, Name: "stale",
		Hold: hold, Held: filepath.Join(dir, "held"), Resume: filepath.Join(dir, "resume")}
	child := startWorker(t, spec)
	require.Eventually(t, func() bool { _, err := os.Stat(spec.Held); return err == nil }, time.Minute, 10*time.Millisecond,
		"the worker process reaches its first batch")
	// Alone in the group, the worker process holds every partition.
	var stale string
	require.Eventually(t, func() bool {
		m := groupMembers(t, b.brokers, group, topic)
		for id := range m {
			stale = id
		}
		return len(m) == 1
	}, time.Minute, 50*time.Millisecond)
	require.NoError(t, child.Process.Signal(syscall.SIGSTOP))
	frozen := time.Now()
	t.Cleanup(func() { _ = child.Process.Signal(syscall.SIGCONT) })
	heldEffects := count(`SELECT count(*) FROM effects`)

	_, stop := run(t, b, kafkaq.ConsumerConfig{Topic: topic, Group: group, MaxBatch: 10}, pgHandler(pool, "survivor", nil))
	require.Eventually(t, func() bool {
		m := groupMembers(t, b.brokers, group, topic)
		_, old := m[stale]
		return len(m) == 1 && !old
	}, 2*time.Minute, 100*time.Millisecond, "the frozen worker is dropped from the group")
	rebalanced := time.Since(frozen)
	for _, parts := range groupMembers(t, b.brokers, group, topic) {
		require.ElementsMatch(t, []int32{0, 1}, parts, "the survivor holds every partition")
	}
	if hold == holdDuring {
		require.Eventually(t, func() bool {
			return count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
		}, time.Minute, 50*time.Millisecond, "the survivor waits on the frozen transaction's row locks")
		require.False(t, atEnd(), "a partition cannot pass the frozen transaction's rows")
	} else {
		require.Eventually(t, atEnd, 2*time.Minute, 100*time.Millisecond, "the survivor commits every partition to its end")
		require.Equal(t, n, count(`SELECT count(*) FROM effects`))
	}
	offsets := committed(t, b, group, topic, partitions)

	// Thaw: the stale worker finishes its batch and commits it with the
	// generation it had, then finds itself out of the group and rejoins.
	require.NoError(t, os.WriteFile(spec.Resume, nil, 0o644))
	require.NoError(t, child.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, atEnd, 2*time.Minute, 100*time.Millisecond, "every partition is committed to its end")
	require.Eventually(t, func() bool { return len(groupMembers(t, b.brokers, group, topic)) == 2 }, 2*time.Minute, 100*time.Millisecond,
		"the thawed worker rejoins, so its old session, stale commit included, is over")
	require.True(t, atEnd(), "the stale commit moved no offset: %v", committed(t, b, group, topic, partitions))
	stop()
	watch.check(t)

	require.Equal(t, n, count(`SELECT count(*) FROM effects`), "every message persisted, each once")
	byStale := count(`SELECT count(*) FROM deliveries WHERE worker = 'stale'`)
	require.Positive(t, byStale, "the stale worker handled its batch")
	switch hold {
	case holdBefore:
		require.Zero(t, heldEffects)
		require.Zero(t, count(`SELECT count(*) FROM effects WHERE worker = 'stale'`), "its late transaction added nothing")
	case holdDuring:
		require.Zero(t, heldEffects, "nothing committed at the freeze")
		require.Positive(t, count(`SELECT count(*) FROM effects WHERE worker = 'stale'`), "its transaction committed once thawed, and the survivor's added nothing")
	case holdAfter:
		require.Positive(t, heldEffects)
		require.Equal(t, heldEffects, count(`SELECT count(*) FROM effects WHERE worker = 'stale'`))
	}
	deliveries := count(`SELECT count(*) FROM deliveries`)
	require.Greater(t, deliveries, n, "the frozen batch was delivered again to the survivor")
	t.Logf("frozen %s its transaction: dropped from the group %v after the freeze, offsets then %v; %d deliveries by the stale worker, %d in all for %d orders",
		hold, rebalanced.Round(100*time.Millisecond), offsets, byStale, deliveries, n)
}
