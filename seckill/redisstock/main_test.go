package redisstock_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/deploy/localstack/stacktest"
)

// stack is the package's private services (only its redis-server is used).
var stack *stacktest.Stack

func TestMain(m *testing.M) { stacktest.Main(m, &stack) }

// startRedis runs an extra redis-server (the cluster-mode one of
// TestRedisCluster, which the shared stack does not offer) on a free port
// with its files in dir, and returns once it answers PING. The kernel kills
// it if the test binary dies.
func startRedis(dir string, extra ...string) (addr string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir}, extra...)
	cmd := exec.Command("redis-server", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"))
	if err != nil {
		return "", nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return "", nil, fmt.Errorf("start redis-server (apt-get install redis-server): %w", err)
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return addr, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("redis-server on %s did not answer: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
