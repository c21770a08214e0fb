package devstack

// A private drand network: the public randomness beacon a draw takes its
// outcome from (seckill/draw/README.md), as one drand node with threshold 1
// on loopback. Its rounds are signed as the public networks sign theirs
// (the quicknet scheme), so the project verifies them with the same code.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DrandVersion is the drand release the private networks run, built from
// the Go module proxy with the conn_insecure tag (its gRPC wants TLS
// otherwise, and loopback has no certificates).
const DrandVersion = "v2.1.8"

// DrandScheme is the signature scheme of the private networks: that of the
// public quicknet chain.
const DrandScheme = "bls-unchained-g1-rfc9380"

// DrandOptions configures StartDrand.
type DrandOptions struct {
	// Dir holds the node's keys and drand.log; created if missing.
	Dir string
	// Period is the time between rounds (default 1 s).
	Period time.Duration
	// GenesisDelay is how long after the network is set up its first
	// round comes (default 2 s).
	GenesisDelay time.Duration
	// Log receives progress messages; nil discards them.
	Log *slog.Logger
}

// Drand is a private drand network of one node.
type Drand struct {
	// URL is the node's public HTTP API, http://127.0.0.1:<port>: /info
	// and /public/<round> (also under /<chain hash>/).
	URL string
	// LogPath is the file the node's output goes to.
	LogPath string

	srv *server
}

// FindDrand is the drand binary to run: $SECKILL_DRAND_BIN, else bin/drand
// in this folder or one above it (where `make deps` puts it), else drand on
// PATH, else one built now with `go install` into the user's cache (once
// per machine; about half a minute).
func FindDrand(ctx context.Context, log *slog.Logger) (string, error) {
	if p := os.Getenv("SECKILL_DRAND_BIN"); p != "" {
		return p, nil
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			p := filepath.Join(d, "bin", "drand")
			if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
				return p, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if p, err := exec.LookPath("drand"); err == nil {
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "seckill", "drand-"+DrandVersion)
	bin := filepath.Join(dir, "drand")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	logger(log).Info("devstack: building drand once", "version", DrandVersion, "into", dir)
	cmd := exec.CommandContext(ctx, "go", "install", "-tags", "conn_insecure", "github.com/drand/drand/v2/cmd/drand@"+DrandVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("devstack: build drand %s (run `make deps`): %w\n%s", DrandVersion, err, out)
	}
	return bin, nil
}

// StartDrand starts a one-node drand network on free loopback ports and
// runs its key ceremony (threshold 1); it returns once the chain's info is
// served. The first round comes GenesisDelay after that: Wait waits for it.
func StartDrand(ctx context.Context, opts DrandOptions) (*Drand, error) {
	if opts.Dir == "" {
		return nil, errors.New("devstack: DrandOptions.Dir is empty")
	}
	if opts.Period <= 0 {
		opts.Period = time.Second
	}
	if opts.GenesisDelay <= 0 {
		opts.GenesisDelay = 2 * time.Second
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("devstack: drand dir: %w", err)
	}
	keys := filepath.Join(dir, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		return nil, fmt.Errorf("devstack: drand dir: %w", err)
	}
	log := logger(opts.Log)
	bin, err := FindDrand(ctx, log)
	if err != nil {
		return nil, err
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	priv := "127.0.0.1:" + strconv.Itoa(ports[0])
	pub := "127.0.0.1:" + strconv.Itoa(ports[1])
	ctl := strconv.Itoa(ports[2])
	d := &Drand{URL: "http://" + pub, LogPath: filepath.Join(dir, "drand.log")}

	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, bin, args...)
		out, err := cmd.CombinedOutput()
		// A lone node has nobody to gossip the proposal to: drand says so
		// and fails the command, though the ceremony goes on.
		if err != nil && !strings.Contains(string(out), "gossip recipients was empty") {
			return fmt.Errorf("devstack: drand %s: %w\n%s", args[0]+" "+args[1], err, out)
		}
		return nil
	}
	if err := run("generate-keypair", "--folder", keys, "--scheme", DrandScheme, priv); err != nil {
		return nil, err
	}
	d.srv = &server{
		log: log,
		spec: procSpec{
			name: "drand",
			bin:  bin,
			args: []string{"start", "--folder", keys, "--private-listen", priv, "--public-listen", pub,
				"--control", ctl, "--db", "memdb"},
			dir:      dir,
			logPath:  d.LogPath,
			deathSig: syscall.SIGKILL,
		},
		stopSig: syscall.SIGTERM,
		ready: func(ctx context.Context, _ *process) error {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+ctl)
			if err == nil {
				_ = c.Close()
			}
			return err
		},
	}
	if err := d.srv.start(ctx); err != nil {
		return nil, err
	}
	proposal := filepath.Join(dir, "proposal.toml")
	steps := [][]string{
		{"dkg", "generate-proposal", "--control", ctl, "--joiner", priv, "--out", proposal},
		{"dkg", "init", "--control", ctl, "--scheme", DrandScheme, "--period", opts.Period.String(), "--threshold", "1",
			"--catchup-period", "0s", "--genesis-delay", opts.GenesisDelay.String(), "--proposal", proposal},
		{"dkg", "execute", "--control", ctl},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			_ = d.Stop(context.Background())
			return nil, err
		}
	}
	if err := d.waitInfo(ctx); err != nil {
		_ = d.Stop(context.Background())
		return nil, err
	}
	log.Info("devstack: drand ready", "url", d.URL, "period", opts.Period, "dir", dir, "pid", d.srv.pid())
	return d, nil
}

// waitInfo polls /info until the key ceremony has made the chain.
func (d *Drand) waitInfo(ctx context.Context) error {
	for {
		if _, err := d.get(ctx, "/info"); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: drand made no chain in time (%w); log %s", ctx.Err(), d.LogPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ChainHash is the chain's hash, as /info gives it.
func (d *Drand) ChainHash(ctx context.Context) (string, error) {
	b, err := d.get(ctx, "/info")
	if err != nil {
		return "", err
	}
	var info struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(b, &info); err != nil || info.Hash == "" {
		return "", fmt.Errorf("devstack: drand /info: %q: %w", b, err)
	}
	return info.Hash, nil
}

// Wait returns once the network has served its first round.
func (d *Drand) Wait(ctx context.Context) error {
	for {
		if _, err := d.get(ctx, "/public/latest"); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: drand served no round in time: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (d *Drand) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("devstack: drand %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("devstack: drand %s: %s", path, resp.Status)
	}
	return b, nil
}

// Stop ends the node (SIGTERM, then SIGKILL if ctx ends first).
func (d *Drand) Stop(ctx context.Context) error { return d.srv.stop(ctx) }
