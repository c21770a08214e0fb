package devstack

import (
	"context"
	"encoding/json"
	"fmt"
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

// StripeMockModule is Stripe's mock server at the version the Makefile
// installs into bin/ (make test-deps, and make run with
// SECKILL_DEV_PAYMENTS=stripe-mock).
const StripeMockModule = "github.com/stripe/stripe-mock@v0.203.0"

// StripeMockKey is an API key Stripe's mock server accepts (it checks only
// the key's shape).
const StripeMockKey = "sk_test_seckill"

// StripeMockOptions configures StartStripeMock.
type StripeMockOptions struct {
	// Dir is where stripe-mock.log is written; it is created if missing.
	Dir string
	// Log receives progress messages; nil discards them.
	Log *slog.Logger
	// PaymentIntent, when set, overrides fields of the PaymentIntent
	// fixture that every retrieval answers (e.g. status succeeded and an
	// amount): the server is then one where every intent was paid. Its
	// fixtures are stripe-mock's own, from its module, with these fields
	// changed.
	PaymentIntent map[string]any
}

// StripeMock is a private stripe-mock child process on 127.0.0.1: it
// answers Stripe's API with fixtures (it keeps no state).
type StripeMock struct {
	// URL is http://127.0.0.1:<port>, the SDK's API base.
	URL     string
	LogPath string

	srv *server
}

// StartStripeMock runs stripe-mock on a free port and returns once it
// answers. The binary is looked for on PATH, in GOBIN, in the module's
// bin/ and in GOPATH/bin; when none has it, it is installed into the
// module's bin/ with `go install` (through the Go module proxy, once).
func StartStripeMock(ctx context.Context, opts StripeMockOptions) (*StripeMock, error) {
	dir, err := serviceDir(opts.Dir, "stripe-mock")
	if err != nil {
		return nil, err
	}
	bin, err := stripeMockBinary(ctx)
	if err != nil {
		return nil, err
	}
	log := logger(opts.Log)
	var extra []string
	if len(opts.PaymentIntent) > 0 {
		path, err := stripeMockFixtures(ctx, dir, opts.PaymentIntent)
		if err != nil {
			return nil, err
		}
		extra = []string{"-fixtures", path}
	}
	return onFreePorts(func() (*StripeMock, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		m := &StripeMock{URL: "http://" + addr, LogPath: filepath.Join(dir, "stripe-mock.log")}
		m.srv = &server{
			log: log,
			spec: procSpec{
				name: "stripe-mock", bin: bin,
				// HTTP on loopback. -http-addr alone leaves stripe-mock's
				// HTTPS on its fixed default port (12112, every
				// interface), which a second instance cannot take: HTTPS
				// goes to a private socket nobody uses.
				args:    append([]string{"-http-addr", addr, "-https-unix", filepath.Join(dir, "https.sock")}, extra...),
				dir:     dir,
				logPath: m.LogPath, deathSig: syscall.SIGTERM,
			},
			stopSig: syscall.SIGTERM,
			ready:   func(ctx context.Context, _ *process) error { return stripeMockReady(ctx, m.URL) },
		}
		if err := m.srv.start(ctx); err != nil {
			return nil, err
		}
		log.Info("devstack: stripe-mock ready", "url", m.URL, "pid", m.srv.pid())
		return m, nil
	}, nil)
}

// Stop ends stripe-mock; it is safe to call more than once.
func (m *StripeMock) Stop(ctx context.Context) error { return m.srv.stop(ctx) }

// stripeMockReady asks for one fixture with a key, as the SDK would.
func stripeMockReady(ctx context.Context, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/payment_intents/pi_ready", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+StripeMockKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stripe-mock answered %s", resp.Status)
	}
	return nil
}

// stripeMockBinary finds stripe-mock or installs it into the module's bin/.
func stripeMockBinary(ctx context.Context) (string, error) {
	return goToolBinary(ctx, "stripe-mock", StripeMockModule)
}

// goToolBinary finds the Go program name (built from module, path@version)
// on PATH, in GOBIN, in the module's bin/ or in GOPATH/bin; when none has
// it, it is installed into the module's bin/ with `go install` (through the
// Go module proxy, once).
func goToolBinary(ctx context.Context, name, module string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	var dirs []string
	if gobin := goEnv(ctx, "GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	root := moduleRoot()
	if root != "" {
		dirs = append(dirs, filepath.Join(root, "bin"))
	}
	if gopath := goEnv(ctx, "GOPATH"); gopath != "" {
		dirs = append(dirs, filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if root == "" {
		return "", fmt.Errorf("devstack: %s not found on PATH or in %s: run `make test-deps` (go install %s)",
			name, strings.Join(dirs, ", "), module)
	}
	target := filepath.Join(root, "bin")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", module)
	cmd.Env = append(os.Environ(), "GOBIN="+target)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("devstack: go install %s: %w: %s", module, err, out)
	}
	return filepath.Join(target, name), nil
}

func goEnv(ctx context.Context, name string) string {
	out, err := exec.CommandContext(ctx, "go", "env", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// moduleRoot is the folder of the product's go.mod above the working
// directory (tests run in their package's folder), "" outside it.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/flashsale/seckill\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// stripeMockFixtures writes stripe-mock's own fixtures with the
// PaymentIntent's fields changed into dir and returns the file's path.
func stripeMockFixtures(ctx context.Context, dir string, pi map[string]any) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", StripeMockModule).Output()
	if err != nil {
		return "", fmt.Errorf("devstack: go mod download %s: %w", StripeMockModule, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("devstack: go mod download %s: no folder: %v", StripeMockModule, err)
	}
	raw, err := os.ReadFile(filepath.Join(mod.Dir, "embedded", "openapi", "fixtures3.json"))
	if err != nil {
		return "", fmt.Errorf("devstack: stripe-mock fixtures: %w", err)
	}
	var fx struct {
		Resources map[string]map[string]any `json:"resources"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil || fx.Resources["payment_intent"] == nil {
		return "", fmt.Errorf("devstack: stripe-mock fixtures: no payment_intent: %v", err)
	}
	for k, v := range pi {
		fx.Resources["payment_intent"][k] = v
	}
	b, err := json.Marshal(fx)
	if err != nil {
		return "", fmt.Errorf("devstack: stripe-mock fixtures: %w", err)
	}
	path := filepath.Join(dir, "fixtures.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", fmt.Errorf("devstack: stripe-mock fixtures: %w", err)
	}
	return path, nil
}
