package fleet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/flashsale/seckill/deploy/devstack"
)

// Build compiles the seckill binary into dir and returns its path. The
// fleet runs the very binary users run.
func Build(ctx context.Context, dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		// Not on PATH: where the official tarball puts it (.ci/run looks
		// there too).
		goBin = "/usr/local/go/bin/go"
		if _, serr := os.Stat(goBin); serr != nil {
			return "", fmt.Errorf("fleet: the go command is needed to build bin/seckill: %w", err)
		}
	}
	out := filepath.Join(dir, "seckill")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, "github.com/flashsale/seckill/cmd/seckill")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fleet: go build: %w\n%s", err, b)
	}
	return out, nil
}

// Process is one OS process of the seckill binary.
type Process struct {
	// Name names it in messages and names its log, e.g. "gateway-2".
	Name string
	// Addr is its SECKILL_HTTP_ADDR: the gateway's, or the health server's
	// of a worker or a sweeper.
	Addr string
	// LogPath is where its output goes, appended run after run.
	LogPath string
	// Netns is the path of the network namespace it runs in (its own host,
	// deploy/tools/netlab); empty is this one's.
	Netns string

	bin  string
	args []string
	env  []string

	cmd  *exec.Cmd
	done chan struct{}
}

// NewProcess prepares (does not start) a process whose log goes to dir.
// env holds the SECKILL_* settings; the rest of the environment is the
// caller's, without its own SECKILL_* variables.
func NewProcess(name, bin, dir string, args []string, env map[string]string) *Process {
	var full []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_") {
			full = append(full, kv)
		}
	}
	for k, v := range env {
		full = append(full, k+"="+v)
	}
	return &Process{Name: name, bin: bin, args: args, env: full, Addr: env["SECKILL_HTTP_ADDR"],
		LogPath: filepath.Join(dir, name+".log")}
}

// Start launches the process and waits until its /readyz answers 200.
func (p *Process) Start(ctx context.Context, timeout time.Duration) error {
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("fleet: %s log: %w", p.Name, err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "\n==== %s: start %s %s\n", time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	if p.Netns != "" {
		// nsenter enters the namespace and execs the binary: same pid.
		cmd = exec.Command("nsenter", append([]string{"--net=" + p.Netns, "--", p.bin}, p.args...)...)
	}
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, and SIGKILL if the caller dies, so no seckill
	// outlives a killed test run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("fleet: start %s: %w", p.Name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.done) }()

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if Ready(ctx, p.Addr) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("fleet: %s exited while starting; %s ends with:\n%s", p.Name, p.LogPath, Tail(p.LogPath))
		case <-ctx.Done():
			return fmt.Errorf("fleet: %s not ready within %v; %s ends with:\n%s", p.Name, timeout, p.LogPath, Tail(p.LogPath))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Ready reports whether GET /readyz on addr answers 200.
func Ready(ctx context.Context, addr string) bool {
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

// Kill sends SIGKILL to the process (as a crash would) and waits until it
// is reaped. It returns the pids of its children seen just before, which a
// kernel parent-death signal now ends.
func (p *Process) Kill() []int {
	if p.cmd == nil || p.Exited() {
		return nil
	}
	kids := devstack.ChildrenOf(p.cmd.Process.Pid)
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return kids
}

// Stop asks the process to shut down (SIGTERM) and kills its process group
// after grace. It does nothing to a process that is not running.
func (p *Process) Stop(grace time.Duration) {
	if p.cmd == nil || p.Exited() {
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

// Pid is the running process's id, 0 before Start and after it ended.
func (p *Process) Pid() int {
	if p.cmd == nil || p.cmd.Process == nil || p.Exited() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited reports whether the process was started and has ended.
func (p *Process) Exited() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WaitGone waits until none of pids runs (zombies count as gone) or ctx ends.
func WaitGone(ctx context.Context, pids []int) error {
	for _, pid := range pids {
		for devstack.Alive(pid) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("fleet: process %d still runs: %w", pid, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// Tail is the end of a log file, for error messages.
func Tail(path string) string {
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

// FreeAddr is a 127.0.0.1 address nobody listens on right now.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("fleet: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
