package devstack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// RedisOptions configures StartRedis.
type RedisOptions struct {
	// Dir is where redis-server keeps its files (the append-only file when
	// Persist is set) and where redis.log is written. It is created if missing.
	Dir string
	// Persist turns on the append-only file, so data survives a restart.
	// Snapshots (RDB) are always off.
	Persist bool
	// Place is the host redis-server runs on; the zero Place is 127.0.0.1.
	Place Place
	// Log receives progress messages; nil discards them.
	Log *slog.Logger
}

// Redis is a private redis-server child process listening on 127.0.0.1
// (or RedisOptions.Place's host).
type Redis struct {
	// URL is redis://127.0.0.1:<port>/0.
	URL string
	// Addr is 127.0.0.1:<port>.
	Addr string
	// LogPath is the file the server's output goes to.
	LogPath string

	srv *server
}

// StartRedis runs redis-server on a free port and returns once it answers PING.
func StartRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	if opts.Dir == "" {
		return nil, errors.New("devstack: RedisOptions.Dir is empty")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("devstack: redis dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("devstack: redis dir: %w", err)
	}
	bin, err := findBinary("redis-server", "redis-server", "/usr/bin", "/usr/local/bin", "/usr/sbin")
	if err != nil {
		return nil, err
	}
	log := logger(opts.Log)
	appendOnly := "no"
	if opts.Persist {
		appendOnly = "yes"
	}
	return onFreePorts(func() (*Redis, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort(opts.Place.host(), strconv.Itoa(port))
		r := &Redis{
			URL:     "redis://" + addr + "/0",
			Addr:    addr,
			LogPath: filepath.Join(dir, "redis.log"),
		}
		spec, err := opts.Place.wrap(procSpec{
			name: "redis-server",
			bin:  bin,
			args: []string{
				"--port", strconv.Itoa(port),
				"--bind", opts.Place.host(),
				// Protected mode lets in only loopback clients; a placed
				// server is reached from other hosts.
				"--protected-mode", yesNo(!opts.Place.remote()),
				"--save", "",
				"--appendonly", appendOnly,
				"--dir", dir,
				"--daemonize", "no",
				"--logfile", "", // stdout, which is our log file
			},
			dir:      dir,
			logPath:  r.LogPath,
			deathSig: syscall.SIGTERM, // redis flushes its append-only file and exits
		})
		if err != nil {
			return nil, err
		}
		r.srv = &server{
			log:     log,
			spec:    spec,
			stopSig: syscall.SIGTERM,
			ready:   func(ctx context.Context, _ *process) error { return ping(ctx, addr) },
		}
		if err := r.srv.start(ctx); err != nil {
			return nil, err
		}
		log.Info("devstack: redis-server ready", "url", r.URL, "dir", dir, "persist", opts.Persist, "pid", r.Pid())
		return r, nil
	}, nil)
}

// Stop shuts redis-server down (SIGTERM, then SIGKILL if ctx ends first).
// It is safe to call more than once.
func (r *Redis) Stop(ctx context.Context) error { return r.srv.stop(ctx) }

// Kill ends redis-server with SIGKILL, as a crash would. Tests use it to
// simulate Redis going down; Restart brings it back on the same port.
func (r *Redis) Kill() { r.srv.kill() }

// Restart starts redis-server again on the same port and directory (killing
// it first if it still runs) and waits until it answers PING. Without
// Persist the data is gone, as after a real crash.
func (r *Redis) Restart(ctx context.Context) error { return r.srv.restart(ctx) }

// Pid is the server's process id, 0 while it is not running.
func (r *Redis) Pid() int { return r.srv.pid() }

// Freeze stops redis-server with SIGSTOP: connections open, nothing answers.
// Thaw continues it; Stop, Kill and Restart thaw first.
func (r *Redis) Freeze() error { return r.srv.freeze() }

// Thaw continues a frozen redis-server (SIGCONT); it does nothing otherwise.
func (r *Redis) Thaw() { r.srv.thaw() }

// ping sends one inline PING and wants +PONG (a server still loading its
// append-only file answers -LOADING, which is not ready).
func ping(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("redis answered %q", strings.TrimSpace(line))
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
