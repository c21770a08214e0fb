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
	"sync"
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
	// GenesisDelay is how long after the key ceremony begins the first
	// round comes (default 7 s): the ceremony itself takes about five, and
	// a network whose genesis passed before it ended makes no rounds.
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

	opts                      DrandOptions
	keys, priv, pub, ctl, dir string
	mu                        sync.Mutex // guards srv: dev mode stops what it started in the background
	srv                       *server
}

// FindDrand is the drand binary to run: $SECKILL_DRAND_BIN, else drand
// beside the running program, else bin/drand in this folder or one above it
// (where `make deps` puts it), else drand on
// PATH, else one built now with `go install` into the user's cache (once
// per machine; about half a minute).
func FindDrand(ctx context.Context, log *slog.Logger) (string, error) {
	if p := os.Getenv("SECKILL_DRAND_BIN"); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		// bin/seckill finds bin/drand beside it, wherever it runs from.
		p := filepath.Join(filepath.Dir(exe), "drand")
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
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
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("devstack: build drand %s (run `make deps`): %w\n%s", DrandVersion, err, out)
	}
	return bin, nil
}

// StartDrand starts a one-node drand network on free loopback ports and
// runs its key ceremony (threshold 1); it returns once the chain's info is
// served. The first round comes GenesisDelay after that: Wait waits for it.
func StartDrand(ctx context.Context, opts DrandOptions) (*Drand, error) {
	d, err := PrepareDrand(opts)
	if err != nil {
		return nil, err
	}
	if err := d.Start(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// PrepareDrand chooses the network's ports, so its URL is known, and
// starts nothing: Start does (dev mode starts it in the background, the
// URL already configured).
func PrepareDrand(opts DrandOptions) (*Drand, error) {
	if opts.Dir == "" {
		return nil, errors.New("devstack: DrandOptions.Dir is empty")
	}
	if opts.Period <= 0 {
		opts.Period = time.Second
	}
	if opts.GenesisDelay <= 0 {
		opts.GenesisDelay = 7 * time.Second
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("devstack: drand dir: %w", err)
	}
	// A network is new at every start (its rounds are kept in memory): a
	// folder's old keys would make another chain.
	keys := filepath.Join(dir, "keys")
	_ = os.RemoveAll(keys)
	if err := os.MkdirAll(keys, 0o700); err != nil {
		return nil, fmt.Errorf("devstack: drand dir: %w", err)
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
	d := &Drand{URL: "http://" + pub, LogPath: filepath.Join(dir, "drand.log"),
		opts: opts, keys: keys, priv: priv, pub: pub, ctl: ctl, dir: dir}
	return d, nil
}

// Start builds the binary if need be, starts the node and runs the key
// ceremony; it returns once the chain's info is served.
func (d *Drand) Start(ctx context.Context) error {
	opts, keys, priv, pub, ctl, dir := d.opts, d.keys, d.priv, d.pub, d.ctl, d.dir
	log := logger(opts.Log)
	bin, err := FindDrand(ctx, log)
	if err != nil {
		return err
	}
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
		return err
	}
	srv := &server{
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
		// The key ceremony dials the node's private listener as well as its
		// control port, and the node opens them one after the other: on a
		// busy machine the ceremony found the private one not yet open.
		ready: func(ctx context.Context, _ *process) error {
			for _, addr := range []string{"127.0.0.1:" + ctl, priv, pub} {
				c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
				if err != nil {
					return err
				}
				_ = c.Close()
			}
			return nil
		},
	}
	d.mu.Lock()
	d.srv = srv
	d.mu.Unlock()
	if err := srv.start(ctx); err != nil {
		return err
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
			return err
		}
	}
	if err := d.waitInfo(ctx); err != nil {
		_ = d.Stop(context.Background())
		return err
	}
	log.Info("devstack: drand ready", "url", d.URL, "period", opts.Period, "dir", dir, "pid", srv.pid())
	return nil
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

// Wait returns once the network has served its first round (before it,
// /public/latest answers the genesis, without a round number).
func (d *Drand) Wait(ctx context.Context) error {
	for {
		if b, err := d.get(ctx, "/public/latest"); err == nil {
			var r struct {
				Round uint64 `json:"round"`
			}
			if json.Unmarshal(b, &r) == nil && r.Round >= 1 {
				return nil
			}
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

// Stop ends the node (SIGTERM, then SIGKILL if ctx ends first); it does
// nothing before Start.
func (d *Drand) Stop(ctx context.Context) error {
	d.mu.Lock()
	srv := d.srv
	d.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.stop(ctx)
}
