package devstack_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/seckill/testlog"
)

// helperEnv makes the test binary act as a program that starts services and
// then waits to be killed (see TestNoOrphansWhenParentDies).
const helperEnv = "LOCALSTACK_TEST_HELPER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(helper(dir))
	}
	code := m.Run()
	closeThreeNodes()
	os.Exit(code)
}

// scratch is a folder for service data, on tmpfs when there is room (see
// devstack.TempDir), removed when the test ends.
func scratch(t *testing.T) string {
	t.Helper()
	dir, err := devstack.TempDir("devstack-test-*")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func testLogger(t *testing.T) *slog.Logger { return testlog.Logger(t, slog.LevelInfo) }

func TestRedisStartKillRestartStop(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	r, err := devstack.StartRedis(ctx, devstack.RedisOptions{Dir: dir, Persist: true, Log: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	require.Equal(t, "redis://"+r.Addr+"/0", r.URL)

	opts, err := redis.ParseURL(r.URL)
	require.NoError(t, err)
	opts.MaxRetries = -1
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())

	// A crash: the process is gone, the client sees errors.
	pid := r.Pid()
	require.True(t, devstack.Alive(pid))
	r.Kill()
	require.False(t, devstack.Alive(pid), "redis-server %d still runs after Kill", pid)
	require.Zero(t, r.Pid())
	require.Error(t, rdb.Ping(ctx).Err())

	// Back on the same port; the append-only file kept the key, because
	// redis writes it before it answers.
	require.NoError(t, r.Restart(ctx))
	require.NotEqual(t, pid, r.Pid())
	require.Eventually(t, func() bool { return rdb.Ping(ctx).Err() == nil }, 5*time.Second, 20*time.Millisecond)
	v, err := rdb.Get(ctx, "k").Result()
	require.NoError(t, err)
	require.Equal(t, "v", v)

	pid = r.Pid()
	require.NoError(t, r.Stop(ctx))
	require.NoError(t, r.Stop(ctx), "a second Stop does nothing")
	require.False(t, devstack.Alive(pid), "redis-server %d still runs after Stop", pid)

	logged, err := os.ReadFile(filepath.Join(dir, "redis.log"))
	require.NoError(t, err)
	require.Contains(t, string(logged), "Ready to accept connections")
}

func TestRedisWithoutPersistStartsEmpty(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r, err := devstack.StartRedis(ctx, devstack.RedisOptions{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, r.Restart(ctx))
	require.Eventually(t, func() bool { return rdb.Ping(ctx).Err() == nil }, 5*time.Second, 20*time.Millisecond)
	require.ErrorIs(t, rdb.Get(ctx, "k").Err(), redis.Nil)
}

func TestPostgresCrashReuseAndStalePid(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(scratch(t), "pg")
	began := time.Now()
	pg, err := devstack.StartPostgres(ctx, devstack.PostgresOptions{Dir: dir, Log: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	t.Logf("initdb + start: %v", time.Since(began))
	require.Equal(t, "postgres://postgres@"+pg.Addr+"/seckill?sslmode=disable", pg.URL)
	require.Equal(t, "postgres://postgres@"+pg.Addr+"/other?sslmode=disable", pg.AdminURL("other"))

	conn, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	var fsync, maxConns, listen string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('max_connections'), current_setting('listen_addresses')").Scan(&fsync, &maxConns, &listen))
	require.Equal(t, "off", fsync)
	require.Equal(t, "200", maxConns)
	require.Equal(t, "127.0.0.1", listen)
	var enc string
	require.NoError(t, conn.QueryRow(ctx, "SHOW server_encoding").Scan(&enc))
	require.Equal(t, "UTF8", enc)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before the crash')")
	require.NoError(t, err)

	// Frozen: the connected client's query waits, nothing fails, and it
	// answers once thawed. A frozen server still dies on Kill below.
	require.NoError(t, pg.Freeze())
	stalled, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = conn.Exec(stalled, "INSERT INTO kept VALUES ('while frozen')")
	cancel()
	require.Error(t, err, "a frozen server answers nothing")
	pg.Thaw()
	conn, err = pgx.Connect(ctx, pg.URL) // the cancelled query closed the old one
	require.NoError(t, err)
	// The insert the client gave up on sat in the backend's socket: once
	// thawed, the backend may run it before it notices the client left
	// (exactly what callers that time out must expect of a real stall).
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n))
	require.Contains(t, []int{1, 2}, n, "thawed, it answers")
	require.NoError(t, pg.Freeze())

	// A crash with a client connected: the postmaster and all its backends
	// go, and postmaster.pid stays behind.
	pid := pg.Pid()
	kids := devstack.ChildrenOf(pid)
	require.NotEmpty(t, kids, "a postmaster has background processes")
	pg.Kill()
	require.False(t, devstack.Alive(pid))
	for _, k := range kids {
		require.False(t, devstack.Alive(k), "backend %d outlived its postmaster", k)
	}
	require.FileExists(t, filepath.Join(pg.DataDir, "postmaster.pid"))
	_ = conn.Close(ctx)

	// Restart recovers the cluster on the same address.
	require.NoError(t, pg.Restart(ctx))
	require.Equal(t, "before the crash", readKept(t, pg.URL))

	// A clean stop, then a stale pid file naming a live process that is not
	// a postmaster (this test), as happens when pids are reused.
	pid = pg.Pid()
	kids = devstack.ChildrenOf(pid)
	require.NoError(t, pg.Stop(ctx))
	require.False(t, devstack.Alive(pid))
	for _, k := range kids {
		require.False(t, devstack.Alive(k), "backend %d outlived Stop", k)
	}
	require.NoFileExists(t, filepath.Join(pg.DataDir, "postmaster.pid"))
	require.NoError(t, os.WriteFile(filepath.Join(pg.DataDir, "postmaster.pid"),
		[]byte(strconv.Itoa(os.Getpid())+"\n"+pg.DataDir+"\n"), 0o600))

	// The same folder again: no initdb, same data, a new port.
	began = time.Now()
	pg2, err := devstack.StartPostgres(ctx, devstack.PostgresOptions{Dir: dir, Fsync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg2.Stop(context.Background()) })
	t.Logf("start on an existing cluster: %v", time.Since(began))
	require.Equal(t, "before the crash", readKept(t, pg2.URL))

	// A second server on a folder in use is refused, clearly.
	_, err = devstack.StartPostgres(ctx, devstack.PostgresOptions{Dir: dir})
	require.ErrorContains(t, err, "already runs on")
	require.NoError(t, pg2.Stop(ctx))
}

func readKept(t *testing.T, url string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var v string
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT v FROM kept").Scan(&v))
	return v
}

func TestPostgresHalfMadeClusterIsRemade(t *testing.T) {
	t.Parallel()
	dir := scratch(t)
	// What an initdb killed midway leaves: a data folder, no marker.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data", "base"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data", "PG_VERSION"), []byte("15\n"), 0o600))
	pg, err := devstack.StartPostgres(t.Context(), devstack.PostgresOptions{Dir: dir})
	require.NoError(t, err)
	defer pg.Stop(context.Background())
	conn, err := pgx.Connect(t.Context(), pg.URL)
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
}

// TestNoOrphansWhenParentDies starts the services from a separate process,
// kills that process with SIGKILL (no Stop, no defer runs) and checks that
// the kernel took redis-server and PostgreSQL down with it.
func TestNoOrphansWhenParentDies(t *testing.T) {
	t.Parallel()
	dir := scratch(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	// The helper prints "pids <redis> <postmaster> <backends...>".
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "helper did not report its children")
	fields := strings.Fields(line)
	require.Equal(t, "pids", fields[0], line)
	var pids []int
	for i, f := range fields[1:] {
		n, err := strconv.Atoi(f)
		require.NoError(t, err)
		if i < 2 {
			require.True(t, devstack.Alive(n), "redis-server and the postmaster run")
		}
		if devstack.Alive(n) { // a backend of a finished connection may be gone already
			pids = append(pids, n)
		}
	}
	require.GreaterOrEqual(t, len(pids), 3, "redis, postmaster and at least one background process")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	for _, pid := range pids {
		require.Eventually(t, func() bool { return !devstack.Alive(pid) }, 10*time.Second, 20*time.Millisecond,
			"process %d outlived its parent", pid)
	}
}

// helper starts redis and postgres in dir, prints their pids and waits.
func helper(dir string) int {
	ctx := context.Background()
	r, err := devstack.StartRedis(ctx, devstack.RedisOptions{Dir: filepath.Join(dir, "redis")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pg, err := devstack.StartPostgres(ctx, devstack.PostgresOptions{Dir: filepath.Join(dir, "pg")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pids := append([]int{r.Pid(), pg.Pid()}, devstack.ChildrenOf(pg.Pid())...)
	fmt.Print("pids")
	for _, p := range pids {
		fmt.Print(" ", p)
	}
	fmt.Println()
	time.Sleep(time.Minute)
	return 0
}
