package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/flashsale/seckill/deploy/localstack"
)

// Build compiles the seckill binary into dir and returns its path. The suite
// runs the very binary users run.
func Build(ctx context.Context, dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		// Not on PATH: where the official tarball puts it (.ci/run looks
		// there too).
		goBin = "/usr/local/go/bin/go"
		if _, serr := os.Stat(goBin); serr != nil {
			return "", fmt.Errorf("chaos: the go command is needed to build bin/seckill: %w", err)
		}
	}
	out := filepath.Join(dir, "seckill")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, "github.com/flashsale/seckill/cmd/seckill")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("chaos: go build: %w\n%s", err, b)
	}
	return out, nil
}

// instance is one OS process of the seckill binary.
type instance struct {
	name    string
	bin     string
	args    []string
	env     []string
	addr    string // its SECKILL_HTTP_ADDR
	logPath string

	cmd  *exec.Cmd
	done chan struct{}
}

// newInstance prepares (does not start) a process. env holds the SECKILL_*
// settings; the rest of the environment is the test's, without its own
// SECKILL_* variables.
func newInstance(name, bin, dir string, args []string, env map[string]string) *instance {
	var full []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_") {
			full = append(full, kv)
		}
	}
	for k, v := range env {
		full = append(full, k+"="+v)
	}
	return &instance{name: name, bin: bin, args: args, env: full, addr: env["SECKILL_HTTP_ADDR"],
		logPath: filepath.Join(dir, name+".log")}
}

// start launches the process and waits until its /readyz answers 200.
func (p *instance) start(ctx context.Context, timeout time.Duration) error {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: %s log: %w", p.name, err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "\n==== %s: start %s %s\n", time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, and SIGKILL if the suite dies, so no seckill
	// outlives a killed test run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start %s: %w", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.done) }()

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if ready(ctx, p.addr) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("chaos: %s exited while starting; %s ends with:\n%s", p.name, p.logPath, tail(p.logPath))
		case <-ctx.Done():
			return fmt.Errorf("chaos: %s not ready within %v; %s ends with:\n%s", p.name, timeout, p.logPath, tail(p.logPath))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ready reports whether GET /readyz answers 200.
func ready(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kill sends SIGKILL to the process (as a crash would) and waits until it is
// reaped. It returns the pids of its children seen just before, which a
// kernel parent-death signal now ends.
func (p *instance) kill() []int {
	if p.cmd == nil || p.exited() {
		return nil
	}
	kids := localstack.ChildrenOf(p.cmd.Process.Pid)
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return kids
}

// stop asks the process to shut down (SIGTERM) and kills it after grace.
func (p *instance) stop(grace time.Duration) {
	if p.cmd == nil || p.exited() {
		return
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *instance) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitGone waits until none of pids runs (zombies count as gone) or ctx ends.
func waitGone(ctx context.Context, pids []int) error {
	for _, pid := range pids {
		for localstack.Alive(pid) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("chaos: process %d still runs: %w", pid, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// tail is the end of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// freeAddr is a 127.0.0.1 address nobody listens on right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("chaos: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// devPostgresURL finds the URL of the PostgreSQL a `seckill dev` started, in
// its log (the last "postgres ready" line).
var devPostgresURL = regexp.MustCompile(`msg="localstack: postgres ready" url=(\S+)`)

func lastPostgresURL(logPath string) (string, error) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return "", fmt.Errorf("chaos: %w", err)
	}
	m := devPostgresURL.FindAllSubmatch(b, -1)
	if len(m) == 0 {
		return "", fmt.Errorf("chaos: no \"postgres ready\" line in %s", logPath)
	}
	return strings.Trim(string(m[len(m)-1][1]), `"`), nil
}

// ScratchDir makes a folder for a run's service data and logs (on tmpfs when
// there is room). A failed run keeps its folder for its logs; the next run
// removes it (localstack.OwnedTempDir).
func ScratchDir() (string, error) {
	return localstack.OwnedTempDir("seckill-chaos-*", nil)
}
