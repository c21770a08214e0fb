package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresOptions configures StartPostgres.
type PostgresOptions struct {
	// Dir holds everything of this PostgreSQL: the cluster in Dir/data, its
	// unix socket and the logs (initdb.log, postgres.log). It is created if
	// missing; an existing cluster in it is reused, so data survives runs.
	Dir string
	// Fsync keeps PostgreSQL's durability settings. Off (tests) sets fsync
	// and full_page_writes off and skips initdb's sync: a crash of the
	// machine may then lose data, a crash of PostgreSQL (Kill) does not.
	//
	// synchronous_commit stays on even then: off, a commit is acknowledged
	// before its WAL leaves shared memory, so Kill loses the last few
	// hundred milliseconds of acknowledged commits, which would make every
	// "PostgreSQL crashed" test report a bug that production does not have.
	// With fsync off a synchronous commit costs only a write(2) (18k vs 25k
	// single-row commits/s here), far more than tests need.
	Fsync bool
	// Place is the host PostgreSQL runs on; the zero Place is 127.0.0.1.
	Place Place
	// Log receives progress messages; nil discards them.
	Log *slog.Logger
}

// Database is the database StartPostgres creates when it is missing.
const Database = "seckill"

// Postgres is a private PostgreSQL cluster run as a child process, listening
// on 127.0.0.1 only, with trust authentication for the user postgres.
type Postgres struct {
	// URL is postgres://postgres@127.0.0.1:<port>/seckill?sslmode=disable.
	URL string
	// Addr is 127.0.0.1:<port>.
	Addr string
	// DataDir is the cluster directory (Dir/data).
	DataDir string
	// LogPath is the file the server's output goes to.
	LogPath string
	// Version is the major version of the server binaries, e.g. "15".
	Version string

	srv *server
}

// postgresUser is the system account PostgreSQL runs as when we are root:
// it refuses to run as root.
const postgresUser = "postgres"

// clusterMarker is written next to the data directory once initdb has
// finished, so a half-made cluster (initdb killed midway) is made again
// instead of failing to start forever.
const clusterMarker = "initdb.done"

// StartPostgres makes a cluster in opts.Dir if there is none, starts it on a
// free port, waits until it accepts connections and creates the database
// seckill if it is missing.
func StartPostgres(ctx context.Context, opts PostgresOptions) (*Postgres, error) {
	if opts.Dir == "" {
		return nil, errors.New("devstack: PostgresOptions.Dir is empty")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	log := logger(opts.Log)
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("devstack: postgres dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("devstack: postgres dir: %w", err)
	}
	dataDir := filepath.Join(dir, "data")

	// A half-made cluster is thrown away; a whole one pins the version.
	haveCluster := fileExists(filepath.Join(dir, clusterMarker)) && fileExists(filepath.Join(dataDir, "PG_VERSION"))
	if !haveCluster {
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, fmt.Errorf("devstack: remove half-made cluster: %w", err)
		}
	}
	wantVersion := ""
	if haveCluster {
		b, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION"))
		if err != nil {
			return nil, fmt.Errorf("devstack: read cluster version: %w", err)
		}
		wantVersion = strings.TrimSpace(string(b))
	}
	binDir, version, err := postgresBinaries(wantVersion, dataDir)
	if err != nil {
		return nil, err
	}

	cred, err := postgresCredential(dir, log)
	if err != nil {
		return nil, err
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"LC_ALL=C", // the cluster has no locale; keep messages plain
	}
	if cred != nil {
		env = append(env, "USER="+postgresUser, "LOGNAME="+postgresUser)
	}
	if tz, ok := os.LookupEnv("TZ"); ok {
		env = append(env, "TZ="+tz)
	}

	if !haveCluster {
		if err := initdb(ctx, binDir, dir, dataDir, opts.Fsync, cred, env, log); err != nil {
			return nil, err
		}
	}

	pg, err := onFreePorts(func() (*Postgres, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		pg, err := newPostgres(binDir, version, dir, dataDir, port, opts.Fsync, opts.Place, cred, env, log)
		if err != nil {
			return nil, err
		}
		return pg, pg.srv.start(ctx)
	}, nil)
	if err != nil {
		return nil, err
	}
	if err := pg.createDatabase(ctx, Database); err != nil {
		_ = pg.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	log.Info("devstack: postgres ready", "url", pg.URL, "dir", dir, "version", version, "fsync", opts.Fsync, "pid", pg.Pid())
	return pg, nil
}

func newPostgres(binDir, version, dir, dataDir string, port int, fsync bool, place Place, cred *syscall.Credential, env []string, log *slog.Logger) (*Postgres, error) {
	addr := net.JoinHostPort(place.host(), strconv.Itoa(port))
	pg := &Postgres{
		Addr:    addr,
		DataDir: dataDir,
		LogPath: filepath.Join(dir, "postgres.log"),
		Version: version,
	}
	pg.URL = pg.AdminURL(Database)

	// Settings go on the command line rather than into postgresql.conf, so
	// a reused cluster always runs with what this code says.
	socketDir := dir
	if len(socketDir)+len("/.s.PGSQL.65535") > 100 { // sun_path holds 107 bytes
		socketDir = "" // no unix socket; we connect over TCP anyway
	}
	args := []string{
		"-D", dataDir,
		"-c", "port=" + strconv.Itoa(port),
		"-c", "listen_addresses=" + place.host(),
		"-c", "unix_socket_directories=" + socketDir,
		"-c", "max_connections=200",
	}
	if place.remote() {
		// The clients are on other hosts; initdb's pg_hba.conf lets in
		// only loopback ones. The server listens on its host's address
		// alone, in a network of the caller's making.
		hba := filepath.Join(dir, "pg_hba.remote.conf")
		if err := os.WriteFile(hba, []byte("local all all trust\nhost all all 0.0.0.0/0 trust\n"), 0o644); err != nil {
			return nil, fmt.Errorf("devstack: %w", err)
		}
		args = append(args, "-c", "hba_file="+hba)
	}
	if !fsync {
		args = append(args,
			"-c", "fsync=off",
			"-c", "full_page_writes=off",
		)
	}
	spec, err := place.wrap(procSpec{
		name:    "postgres",
		bin:     filepath.Join(binDir, "postgres"),
		args:    args,
		env:     env,
		dir:     dir,
		logPath: pg.LogPath,
		cred:    cred,
		// SIGINT is PostgreSQL's fast shutdown: if we die, it rolls
		// back open transactions, checkpoints and exits cleanly.
		deathSig: syscall.SIGINT,
	})
	if err != nil {
		return nil, err
	}
	pg.srv = &server{
		log:  log,
		spec: spec,
		// Fast shutdown, what `pg_ctl stop -m fast` sends.
		stopSig:  syscall.SIGINT,
		children: true,
		before:   func() error { return clearStalePid(dataDir) },
		ready:    func(ctx context.Context, _ *process) error { return pingPostgres(ctx, pg.AdminURL("postgres")) },
	}
	return pg, nil
}

// AdminURL is the URL of database db on this cluster, as the superuser.
func (p *Postgres) AdminURL(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(postgresUser),
		Host:     p.Addr,
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Stop shuts PostgreSQL down with a fast shutdown (SIGINT, as `pg_ctl stop
// -m fast`), killing it if ctx ends first. It is safe to call more than once.
func (p *Postgres) Stop(ctx context.Context) error { return p.srv.stop(ctx) }

// Kill ends the postmaster with SIGKILL, as a crash would, and waits until
// its backends are gone. Restart recovers the cluster on the same port.
func (p *Postgres) Kill() { p.srv.kill() }

// Restart starts PostgreSQL again on the same port and data (killing it
// first if it still runs) and waits until it accepts connections.
func (p *Postgres) Restart(ctx context.Context) error { return p.srv.restart(ctx) }

// Pid is the postmaster's process id, 0 while it is not running.
func (p *Postgres) Pid() int { return p.srv.pid() }

// Freeze stops the postmaster and every backend with SIGSTOP, as a stalled
// database server: connections open but nothing answers, open transactions
// keep their locks. Thaw continues them; Stop, Kill and Restart thaw first.
func (p *Postgres) Freeze() error { return p.srv.freeze() }

// Thaw continues a frozen PostgreSQL (SIGCONT); it does nothing otherwise.
func (p *Postgres) Thaw() { p.srv.thaw() }

func (p *Postgres) createDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, p.AdminURL("postgres"))
	if err != nil {
		return fmt.Errorf("devstack: connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("devstack: look for database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("devstack: create database %s: %w", name, err)
	}
	return nil
}

func pingPostgres(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// initdb makes a new cluster in dataDir and marks it whole.
func initdb(ctx context.Context, binDir, dir, dataDir string, fsync bool, cred *syscall.Credential, env []string, log *slog.Logger) error {
	began := time.Now()
	args := []string{
		"-D", dataDir,
		"-U", postgresUser,
		"--auth=trust", // only 127.0.0.1 and the private socket can reach it
		"--encoding=UTF8",
		"--no-locale",
	}
	if !fsync {
		args = append(args, "--no-sync")
	}
	p, err := launch(procSpec{
		name:     "initdb",
		bin:      filepath.Join(binDir, "initdb"),
		args:     args,
		env:      env,
		dir:      dir,
		logPath:  filepath.Join(dir, "initdb.log"),
		cred:     cred,
		deathSig: syscall.SIGKILL,
	})
	if err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("devstack: initdb: %w; log %s ends with:\n%s", ctx.Err(), p.logPath, indent(p.tail()))
	}
	if p.waitErr != nil {
		return fmt.Errorf("devstack: initdb failed (%v); log %s ends with:\n%s", p.waitErr, p.logPath, indent(p.tail()))
	}
	if err := os.WriteFile(filepath.Join(dir, clusterMarker), []byte(time.Now().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return fmt.Errorf("devstack: mark cluster: %w", err)
	}
	log.Debug("devstack: initdb done", "dir", dataDir, "took", time.Since(began).Round(time.Millisecond))
	return nil
}
