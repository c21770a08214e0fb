// Package testenv starts the real services the orders packages test against:
// a private PostgreSQL cluster (migrated template, one fresh database per
// test) and an in-process kfake Kafka broker. It mirrors the API of
// deploy/localstack/stacktest so tests can move to it unchanged once it lands.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flashsale/seckill/migrations"
)

// Stack is the set of running services of one test binary.
type Stack struct {
	// DatabaseURL points at the migrated template database; tests use
	// NewDatabase instead, so they never share state.
	DatabaseURL string
	// KafkaBrokers are the host:port addresses of the kfake broker.
	KafkaBrokers []string

	dir      string
	pgBin    string
	port     int
	asUser   string
	kafka    *kfake.Cluster
	sequence atomic.Int64
}

const templateDB = "seckill_template"

// Main starts the services, runs the tests and stops the services. Use it as
// the whole body of TestMain.
func Main(m *testing.M, stack **Stack) {
	s, err := start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		if s != nil {
			s.stop()
		}
		os.Exit(1)
	}
	*stack = s
	code := m.Run()
	s.stop()
	os.Exit(code)
}

func start() (*Stack, error) {
	s := &Stack{}
	bin, err := findPGBin()
	if err != nil {
		return nil, err
	}
	s.pgBin = bin
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		s.asUser = "postgres"
	}
	s.dir, err = os.MkdirTemp("", "orders-testenv-")
	if err != nil {
		return nil, err
	}
	if s.asUser != "" {
		u, err := user.Lookup(s.asUser)
		if err != nil {
			return s, fmt.Errorf("user %s: %w", s.asUser, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return s, err
		}
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.pg("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions").CombinedOutput(); err != nil {
		return s, fmt.Errorf("initdb: %w: %s", err, out)
	}
	s.port, err = freePort()
	if err != nil {
		return s, err
	}
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300", s.port, s.dir)
	if out, err := s.pg("pg_ctl", "-D", data, "-l", filepath.Join(s.dir, "log"), "-w", "-t", "60", "-o", opts, "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return s, fmt.Errorf("pg_ctl start: %w: %s %s", err, out, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return s, err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+templateDB); err != nil {
		return s, err
	}
	s.DatabaseURL = s.url(templateDB)
	if err := migrations.ApplyURL(ctx, s.DatabaseURL); err != nil {
		return s, err
	}

	s.kafka, err = kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return s, fmt.Errorf("kfake: %w", err)
	}
	s.KafkaBrokers = s.kafka.ListenAddrs()
	return s, nil
}

func (s *Stack) stop() {
	if s.kafka != nil {
		s.kafka.Close()
	}
	if s.port != 0 {
		_ = s.pg("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop").Run()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

func (s *Stack) pg(tool string, args ...string) *exec.Cmd {
	path := filepath.Join(s.pgBin, tool)
	if s.asUser != "" {
		return exec.Command("runuser", append([]string{"-u", s.asUser, "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

func (s *Stack) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// NewDatabaseURL creates a fresh migrated database for t and returns its URL.
func (s *Stack) NewDatabaseURL(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.sequence.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		t.Fatalf("testenv: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+templateDB); err != nil {
		t.Fatalf("testenv: create database: %v", err)
	}
	return s.url(name)
}

// NewDatabase creates a fresh migrated database for t and returns a pool on
// it, closed when t ends.
func (s *Stack) NewDatabase(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), s.NewDatabaseURL(t))
	if err != nil {
		t.Fatalf("testenv: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewTopic creates a fresh topic with the given number of partitions.
func (s *Stack) NewTopic(t testing.TB, partitions int32) string {
	t.Helper()
	name := fmt.Sprintf("test.%s.%d", strings.ReplaceAll(t.Name(), "/", "."), s.sequence.Add(1))
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	admin, err := sarama.NewClusterAdmin(s.KafkaBrokers, cfg)
	if err != nil {
		t.Fatalf("testenv: kafka admin: %v", err)
	}
	defer admin.Close()
	err = admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
	if err != nil {
		t.Fatalf("testenv: create topic: %v", err)
	}
	return name
}

func findPGBin() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", errors.New("initdb not found: install the postgresql package")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
