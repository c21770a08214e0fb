package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables the crowd reads to count PostgreSQL's transactions,
// the same ones the server reads.
const (
	EnvDatabaseURL = "SECKILL_DATABASE_URL"
	EnvDataDir     = "SECKILL_DATA_DIR"
)

// Dev mode's private cluster: user postgres with trust authentication on
// 127.0.0.1, database seckill (deploy/devstack), on a port chosen at each
// start that only the cluster's postmaster.pid records.
const (
	devDatabaseUser = "postgres"
	devDatabaseName = "seckill"
)

// databaseURL picks where PostgreSQL's counters are read: the -database-url
// flag or SECKILL_DATABASE_URL, else the private cluster of a `seckill dev`
// running on dataDir (SECKILL_DATA_DIR, .run by default). It returns the URL
// and a phrase saying where it came from.
func databaseURL(explicit, dataDir string) (string, string, error) {
	if explicit != "" {
		return explicit, EnvDatabaseURL + " / -database-url", nil
	}
	if dataDir == "" {
		return "", "", errors.New("no database URL: set " + EnvDatabaseURL + " or -database-url, or -data-dir of a running `seckill dev`")
	}
	pidFile := filepath.Join(dataDir, "postgres", "data", "postmaster.pid")
	url, err := devDatabaseURL(pidFile)
	if err != nil {
		return "", "", fmt.Errorf("no database URL: %s was not given, and dev mode's cluster: %w", EnvDatabaseURL, err)
	}
	return url, "dev mode's " + pidFile, nil
}

// devDatabaseURL reads a running cluster's postmaster.pid: its fourth line
// is the port, its sixth the first listen address.
func devDatabaseURL(pidFile string) (string, error) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return "", fmt.Errorf("%w (is `seckill dev` running with this SECKILL_DATA_DIR?)", err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 6 || strings.TrimSpace(lines[3]) == "" {
		return "", fmt.Errorf("%s: not a postmaster.pid of a started cluster", pidFile)
	}
	port, host := strings.TrimSpace(lines[3]), strings.TrimSpace(lines[5])
	if host == "" || host == "*" {
		host = "127.0.0.1"
	}
	u := url.URL{Scheme: "postgres", User: url.User(devDatabaseUser), Host: net.JoinHostPort(host, port),
		Path: "/" + devDatabaseName, RawQuery: "sslmode=disable"}
	return u.String(), nil
}

// xactCounter reads pg_stat_database's committed and rolled back
// transactions of one database.
//
// PostgreSQL (15 and later) counts each backend's transactions locally and
// adds them to the shared figures at most once a second while busy, and
// within ten seconds once idle. So a window is read as: counter, work, wait
// Settle, counter. Each read runs on a connection of its own that is closed
// at once (a backend flushes its counts when it exits), so each read adds
// exactly one transaction to the next window, which is subtracted.
type xactCounter struct {
	url string
}

// read returns xact_commit + xact_rollback of the URL's database.
func (c xactCounter) read(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		return 0, fmt.Errorf("pg_stat_database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int64
	err = conn.QueryRow(ctx,
		`SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pg_stat_database: %w", err)
	}
	return n, nil
}
