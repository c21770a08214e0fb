// Package stacktest starts real Redis, PostgreSQL and Kafka-protocol services
// once per test binary and hands tests fresh, isolated pieces of them: a
// migrated database per test, a topic per test.
//
// Use it from TestMain:
//
//	var stack *stacktest.Stack
//
//	func TestMain(m *testing.M) { stacktest.Main(m, &stack) }
//
// and in tests:
//
//	rdb := stack.Redis(t)          // client on the package's private redis-server
//	pool := stack.NewDatabase(t)   // a fresh database with the schema applied
//	topic := stack.NewTopic(t, 6)  // a fresh topic on the in-process broker
//
// A missing redis-server or PostgreSQL fails the whole binary with a message
// saying what to install; tests are never skipped.
package stacktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/migrations"
)

// TemplateDatabase is the migrated database every NewDatabase copies.
const TemplateDatabase = "seckill_template"

// dirPattern names the folders Main makes (see devstack.OwnedTempDir,
// which removes those of killed runs).
const dirPattern = "seckill-stacktest-*"

// Stack is the set of services one test binary shares.
type Stack struct {
	// RedisURL is the URL of the private redis-server (database 0). All
	// tests of the package share it: use keys no other test uses (e.g. a
	// random voucher id), and do not FLUSHALL in a parallel test.
	RedisURL string
	// DatabaseURL is the database seckill, migrated. Tests that write should
	// use NewDatabase or NewDatabaseURL instead, to stay independent.
	DatabaseURL string
	// KafkaBrokers are the host:port addresses of the in-process broker.
	KafkaBrokers []string

	// RedisServer is the redis-server process, for tests that simulate
	// Redis going down (Kill, then Restart on the same port). Such a test
	// must not run in parallel with others of its package.
	RedisServer *devstack.Redis
	// Postgres is the PostgreSQL cluster (Kill and Restart as for Redis).
	Postgres *devstack.Postgres
	// Kafka is the kfake broker (fault injection through Kafka.Cluster()).
	Kafka *devstack.Kafka

	dir   string
	admin *pgxpool.Pool // on the postgres database, to create and drop databases

	clusterMu  sync.Mutex
	cluster    *devstack.RedisCluster // started by the first RedisShapes call
	clusterErr error

	apacheMu sync.Mutex
	apache   map[int]*apacheStart // by node count, started by the first ApacheKafka call

	jaegerMu  sync.Mutex
	jaeger    *devstack.Jaeger // started by the first Jaeger call
	jaegerErr error

	stripeMu  sync.Mutex
	stripe    *devstack.StripeMock // started by the first StripeMock call
	stripeErr error
	paid      map[string]*devstack.StripeMock // by fixture, started by StripeMockPaid

	mailMu  sync.Mutex
	mail    *devstack.Mailpit // started by the first Mailpit call
	mailErr error

	drandMu  sync.Mutex
	drand    *devstack.Drand // started by the first Drand call
	drandErr error
}

// StripeMockPaid is a private stripe-mock of the package whose every
// PaymentIntent reads as succeeded for amountCents in currency: what the
// provider answers the active query for an order whose money came. One per
// (amount, currency), started on the first call and stopped by Stop.
func (s *Stack) StripeMockPaid(t testing.TB, amountCents int64, currency string) *devstack.StripeMock {
	t.Helper()
	s.stripeMu.Lock()
	defer s.stripeMu.Unlock()
	key := fmt.Sprintf("%d-%s", amountCents, strings.ToLower(currency))
	if m := s.paid[key]; m != nil {
		return m
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	m, err := devstack.StartStripeMock(ctx, devstack.StripeMockOptions{
		Dir:           filepath.Join(s.dir, "stripe-mock-paid-"+key),
		PaymentIntent: map[string]any{"status": "succeeded", "amount": amountCents, "currency": strings.ToLower(currency)},
	})
	if err != nil {
		t.Fatalf("stacktest: %v", err)
	}
	if s.paid == nil {
		s.paid = map[string]*devstack.StripeMock{}
	}
	s.paid[key] = m
	return m
}

// Mailpit is the package's private mailpit (a real SMTP server that keeps
// every message and lists them on GET APIURL/api/v1/messages), started by
// the first call. Tests share it: tell your messages apart by recipient.
func (s *Stack) Mailpit(t testing.TB) *devstack.Mailpit {
	t.Helper()
	s.mailMu.Lock()
	defer s.mailMu.Unlock()
	if s.mail == nil && s.mailErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		s.mail, s.mailErr = devstack.StartMailpit(ctx, devstack.MailpitOptions{Dir: filepath.Join(s.dir, "mailpit")})
	}
	if s.mailErr != nil {
		t.Fatalf("stacktest: %v", s.mailErr)
	}
	return s.mail
}

// StripeMock is the package's private stripe-mock (Stripe's mock server),
// started on the first call and stopped by Stop. It keeps no state: tests
// change a payment's state with webhook events they sign as Stripe does.
func (s *Stack) StripeMock(t testing.TB) *devstack.StripeMock {
	t.Helper()
	s.stripeMu.Lock()
	defer s.stripeMu.Unlock()
	if s.stripe == nil && s.stripeErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		s.stripe, s.stripeErr = devstack.StartStripeMock(ctx, devstack.StripeMockOptions{Dir: filepath.Join(s.dir, "stripe-mock")})
	}
	if s.stripeErr != nil {
		t.Fatalf("stacktest: %v", s.stripeErr)
	}
	return s.stripe
}

// apacheStart is one Apache Kafka cluster of the package, or why it did not
// start.
type apacheStart struct {
	kafka *devstack.ApacheKafka
	err   error
}

// RedisShape is one way of running Redis: one plain server (URL set) or a
// Redis Cluster (ClusterAddrs set, the seeds SECKILL_REDIS_CLUSTER_ADDRS
// takes).
type RedisShape struct {
	Name         string // "plain" or "cluster"
	URL          string
	ClusterAddrs []string
}

// RedisShapes returns both shapes the system runs on: the package's plain
// redis-server and a private Redis Cluster of three masters, started on the
// first call (a few seconds, once per test binary) and shared by every test
// of the package like the plain server. End-to-end tests run a table over
// them.
func (s *Stack) RedisShapes(t testing.TB) []RedisShape {
	t.Helper()
	c := s.RedisCluster(t)
	return []RedisShape{
		{Name: "plain", URL: s.RedisURL},
		{Name: "cluster", ClusterAddrs: c.Addrs},
	}
}

// RedisCluster is the package's private Redis Cluster of three masters
// without replicas, started on the first call and stopped by Stop.
func (s *Stack) RedisCluster(t testing.TB) *devstack.RedisCluster {
	t.Helper()
	s.clusterMu.Lock()
	defer s.clusterMu.Unlock()
	if s.cluster == nil && s.clusterErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.cluster, s.clusterErr = devstack.StartRedisCluster(ctx, devstack.RedisClusterOptions{
			Dir: filepath.Join(s.dir, "redis-cluster"), Masters: 3,
		})
	}
	if s.clusterErr != nil {
		t.Fatalf("stacktest: %v", s.clusterErr)
	}
	return s.cluster
}

// Drand is the package's private drand network (one node, rounds every
// second), started on the first call, which returns once its first round
// is out (a few seconds, once per test binary), and stopped by Stop.
func (s *Stack) Drand(t testing.TB) *devstack.Drand {
	t.Helper()
	s.drandMu.Lock()
	defer s.drandMu.Unlock()
	if s.drand == nil && s.drandErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		s.drand, s.drandErr = devstack.StartDrand(ctx, devstack.DrandOptions{Dir: filepath.Join(s.dir, "drand"), Period: time.Second})
		if s.drandErr == nil {
			s.drandErr = s.drand.Wait(ctx)
		}
	}
	if s.drandErr != nil {
		t.Fatalf("stacktest: %v", s.drandErr)
	}
	return s.drand
}

// ApacheKafka is the package's private Apache Kafka cluster of the given
// number of nodes (1, or 3 with replication factor 3 and
// min.insync.replicas 2), started on the first call for that size (the
// broker's jars are fetched with Maven once per machine) and shared by every
// test of the package; Stop stops it. Tests that stop, kill or freeze one
// of its nodes must not run in parallel with others using it, and must
// leave every node running (WaitInSync) when they end.
func (s *Stack) ApacheKafka(t testing.TB, nodes int) *devstack.ApacheKafka {
	t.Helper()
	s.apacheMu.Lock()
	defer s.apacheMu.Unlock()
	if s.apache == nil {
		s.apache = make(map[int]*apacheStart)
	}
	st := s.apache[nodes]
	if st == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		st = &apacheStart{}
		// A temporary folder of its own: Close kills the nodes and removes
		// it, with no graceful shutdown to wait for.
		st.kafka, st.err = devstack.StartApacheKafka(ctx, devstack.ApacheKafkaOptions{Brokers: nodes})
		s.apache[nodes] = st
	}
	if st.err != nil {
		t.Fatalf("stacktest: %v", st.err)
	}
	return st.kafka
}

// Jaeger is the package's private Jaeger (traces in memory, OTLP/HTTP and
// its query API on loopback ports), started on the first call and shared
// by every test of the package; Stop stops it. Tests find their own traces
// by the trace id they started.
func (s *Stack) Jaeger(t testing.TB) *devstack.Jaeger {
	t.Helper()
	s.jaegerMu.Lock()
	defer s.jaegerMu.Unlock()
	if s.jaeger == nil && s.jaegerErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.jaeger, s.jaegerErr = devstack.StartJaeger(ctx, devstack.JaegerOptions{Dir: filepath.Join(s.dir, "jaeger")})
	}
	if s.jaegerErr != nil {
		t.Fatalf("stacktest: %v", s.jaegerErr)
	}
	return s.jaeger
}

// NewApacheTopic creates a topic of the given partitions on k for this test
// only and returns its name.
func (s *Stack) NewApacheTopic(t testing.TB, k *devstack.ApacheKafka, partitions int32) string {
	t.Helper()
	name := "t." + topicSafe(t.Name()) + "." + randomHex(4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := k.CreateTopic(ctx, name, partitions); err != nil {
		t.Fatalf("stacktest: %v", err)
	}
	return name
}

// Client returns a client of the shape (a cluster client for the cluster,
// reading the slot map again every second as the system's does), closed
// when the test ends.
func (s *Stack) Client(t testing.TB, shape RedisShape) redis.UniversalClient {
	t.Helper()
	if len(shape.ClusterAddrs) == 0 {
		return s.Redis(t)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: shape.ClusterAddrs, ClusterStateReloadInterval: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Main starts the services, runs the tests, stops the services and exits
// with the tests' exit code. It sets *stack before the tests run. If a
// service cannot start, no test runs and the binary fails, saying why.
func Main(m *testing.M, stack **Stack) {
	os.Exit(run(m, stack))
}

func run(m *testing.M, stack **Stack) int {
	flag.Parse() // for testing.Verbose
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return m.Run() // `go test -list` (make's fuzz pass) runs no test: start nothing
	}
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	began := time.Now()
	s, err := Start(ctx, log)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "stacktest: cannot start the services these tests need:\n%v\n"+
			"Install what is missing (`make deps` does it on Debian) and run the tests again.\n", err)
		return 1
	}
	log.Info("stacktest: services up", "took", time.Since(began).Round(time.Millisecond), "dir", s.dir)
	*stack = s

	// Ctrl-C or a kill: stop the services and remove their data before
	// going (the children would die with us anyway, the folder would not).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig, ok := <-sigs
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "stacktest: %v: stopping the services\n", sig)
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(stopCtx)
		os.Exit(1)
	}()

	code := m.Run()

	signal.Stop(sigs)
	close(sigs)
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Stop(stopCtx); err != nil {
		fmt.Fprintf(os.Stderr, "stacktest: stop: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Start starts redis-server, PostgreSQL (fsync off) and kfake in a new
// temporary folder, and migrates the template database. Main calls it; it is
// exported for programs that want the same stack outside `go test`
// (benchmark drivers). Stop undoes it.
func Start(ctx context.Context, log *slog.Logger) (*Stack, error) {
	dir, err := devstack.OwnedTempDir(dirPattern, log)
	if err != nil {
		return nil, err
	}
	s := &Stack{dir: dir}

	// The three start in parallel: PostgreSQL's initdb dominates.
	var wg sync.WaitGroup
	var redisErr, pgErr, kafkaErr error
	wg.Go(func() {
		s.RedisServer, redisErr = devstack.StartRedis(ctx, devstack.RedisOptions{Dir: filepath.Join(dir, "redis"), Log: log})
	})
	wg.Go(func() {
		s.Postgres, pgErr = devstack.StartPostgres(ctx, devstack.PostgresOptions{Dir: filepath.Join(dir, "postgres"), Log: log})
		if pgErr == nil {
			pgErr = s.prepareDatabases(ctx)
		}
	})
	wg.Go(func() {
		s.Kafka, kafkaErr = devstack.StartKafka(ctx, devstack.KafkaOptions{Log: log})
	})
	wg.Wait()
	if err := errors.Join(redisErr, pgErr, kafkaErr); err != nil {
		_ = s.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	s.RedisURL = s.RedisServer.URL
	s.DatabaseURL = s.Postgres.URL
	s.KafkaBrokers = s.Kafka.Brokers
	return s, nil
}

// prepareDatabases migrates the template, locks it against connections (a
// connected template cannot be copied) and makes seckill a copy of it.
func (s *Stack) prepareDatabases(ctx context.Context) error {
	admin, err := pgxpool.New(ctx, s.Postgres.AdminURL("postgres"))
	if err != nil {
		return fmt.Errorf("stacktest: connect to postgres: %w", err)
	}
	s.admin = admin
	tmpl := pgx.Identifier{TemplateDatabase}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+tmpl); err != nil {
		return fmt.Errorf("stacktest: create %s: %w", TemplateDatabase, err)
	}
	if err := migrations.ApplyURL(ctx, s.Postgres.AdminURL(TemplateDatabase)); err != nil {
		return fmt.Errorf("stacktest: migrate %s: %w", TemplateDatabase, err)
	}
	main := pgx.Identifier{devstack.Database}.Sanitize()
	for _, q := range []string{
		"ALTER DATABASE " + tmpl + " WITH IS_TEMPLATE true ALLOW_CONNECTIONS false",
		"DROP DATABASE " + main + " WITH (FORCE)",
		"CREATE DATABASE " + main + " TEMPLATE " + tmpl,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return fmt.Errorf("stacktest: %s: %w", q, err)
		}
	}
	return nil
}

// Stop stops every service and removes the folder. It is safe to call on a
// partly started stack.
func (s *Stack) Stop(ctx context.Context) error {
	var errs []error
	if s.admin != nil {
		s.admin.Close()
	}
	if s.Kafka != nil {
		s.Kafka.Close()
	}
	if s.RedisServer != nil {
		errs = append(errs, s.RedisServer.Stop(ctx))
	}
	s.mailMu.Lock()
	if s.mail != nil {
		errs = append(errs, s.mail.Stop(ctx))
	}
	s.mailMu.Unlock()
	s.stripeMu.Lock()
	if s.stripe != nil {
		errs = append(errs, s.stripe.Stop(ctx))
	}
	for _, m := range s.paid {
		errs = append(errs, m.Stop(ctx))
	}
	s.stripeMu.Unlock()
	s.clusterMu.Lock()
	if s.cluster != nil {
		errs = append(errs, s.cluster.Stop(ctx))
	}
	s.clusterMu.Unlock()
	s.jaegerMu.Lock()
	if s.jaeger != nil {
		errs = append(errs, s.jaeger.Stop(ctx))
	}
	s.jaegerMu.Unlock()
	s.drandMu.Lock()
	if s.drand != nil {
		errs = append(errs, s.drand.Stop(ctx))
	}
	s.drandMu.Unlock()
	s.apacheMu.Lock()
	for _, st := range s.apache {
		if st.kafka != nil {
			errs = append(errs, st.kafka.Close())
		}
	}
	s.apacheMu.Unlock()
	if s.Postgres != nil {
		errs = append(errs, s.Postgres.Stop(ctx))
	}
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

// Redis returns a client on the shared redis-server, closed when the test
// ends.
func (s *Stack) Redis(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(s.RedisURL)
	if err != nil {
		t.Fatalf("stacktest: redis url: %v", err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// PrivateRedis starts a redis-server of the test's own, which the test may
// freeze (Freeze, Thaw) without disturbing the other tests, and returns it
// with a client on it. When the test ends the server is thawed, then the
// client closed (a client closed on a frozen server waits for it), then the
// server stopped.
func PrivateRedis(t testing.TB) (*devstack.Redis, *redis.Client) {
	t.Helper()
	srv, err := devstack.StartRedis(context.Background(), devstack.RedisOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("stacktest: private redis-server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	t.Cleanup(srv.Thaw)
	return srv, rdb
}

// NewDatabase creates a database with the schema applied, for this test
// only, and returns a pool on it. The pool is closed and the database
// dropped when the test ends.
func (s *Stack) NewDatabase(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := s.NewDatabaseURL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("stacktest: connect to %s: %v", url, err)
	}
	t.Cleanup(pool.Close) // runs before the drop registered by NewDatabaseURL
	return pool
}

// NewDatabaseURL creates a database with the schema applied, for this test
// only, and returns its URL. The database is dropped when the test ends,
// even if connections to it are still open.
func (s *Stack) NewDatabaseURL(t testing.TB) string {
	t.Helper()
	name := "t_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{TemplateDatabase}.Sanitize()); err != nil {
		t.Fatalf("stacktest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("stacktest: drop database %s: %v", name, err)
		}
	})
	return s.Postgres.AdminURL(name)
}

// NewTopic creates a topic with the given number of partitions for this
// test only and returns its name. It is deleted when the test ends.
func (s *Stack) NewTopic(t testing.TB, partitions int32) string {
	t.Helper()
	name := "t." + topicSafe(t.Name()) + "." + randomHex(4)
	if err := s.Kafka.CreateTopic(context.Background(), name, partitions); err != nil {
		t.Fatalf("stacktest: %v", err)
	}
	t.Cleanup(func() { _ = s.Kafka.DeleteTopic(context.Background(), name) })
	return name
}

// topicSafe keeps what Kafka allows in a topic name ([a-zA-Z0-9._-]) and
// keeps it short.
func topicSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 100 {
		b = b[:100]
	}
	return string(b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// HoldProduce makes the in-process broker sit on the next produce request
// for topic until release is called (at the latest when the test ends), and
// closes reached when that request arrives. Requests for other topics, such
// as other tests' of the package, pass untouched, and the hold is dropped
// once it has caught its request, so it never outlives what it is for.
func (s *Stack) HoldProduce(t testing.TB, topic string) (reached <-chan struct{}, release func()) {
	t.Helper()
	cluster := s.Kafka.Cluster()
	arrived, freed := make(chan struct{}), make(chan struct{})
	var once, arrivedOnce sync.Once
	release = func() { once.Do(func() { close(freed) }) }
	t.Cleanup(release)
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case <-freed: // released before its request came: let everything through
			cluster.DropControl()
			return nil, nil, false
		default:
		}
		p, ok := req.(*kmsg.ProduceRequest)
		if !ok || len(p.Topics) == 0 || p.Topics[0].Topic != topic {
			return nil, nil, false // not ours: kept for ours
		}
		cluster.DropControl()
		arrivedOnce.Do(func() { close(arrived) })
		cluster.SleepControl(func() { <-freed })
		return nil, nil, false
	})
	return arrived, release
}

// DelayProduce makes the in-process broker answer the next produce request
// for topic d after it arrives, as HoldProduce does.
func (s *Stack) DelayProduce(t testing.TB, topic string, d time.Duration) {
	t.Helper()
	reached, release := s.HoldProduce(t, topic)
	go func() {
		select {
		case <-reached:
			time.Sleep(d)
			release()
		case <-t.Context().Done(): // never came; the cleanup releases
		}
	}()
}
