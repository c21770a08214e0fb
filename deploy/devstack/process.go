package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one running child: its own process group, its output appended
// to a log file, and a channel closed once it has been reaped.
type process struct {
	name     string
	cmd      *exec.Cmd
	logPath  string
	logStart int64 // size of the log file before this run, so tails show only this run

	done    chan struct{}
	waitErr error // valid once done is closed
}

// procSpec says how to launch a child.
type procSpec struct {
	name     string // short name for messages, e.g. "redis-server"
	bin      string
	args     []string
	env      []string // nil inherits the parent's environment
	dir      string   // working directory
	logPath  string
	cred     *syscall.Credential // nil runs as the current user
	deathSig syscall.Signal      // sent to the child by the kernel if we die
}

// launch starts the child. It never uses exec.CommandContext: the child must
// outlive the start-up context and end only through Stop/Kill or our death.
func launch(spec procSpec) (*process, error) {
	logFile, err := os.OpenFile(spec.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devstack: open log for %s: %w", spec.name, err)
	}
	defer logFile.Close() // the child has its own copy of the descriptor
	start, _ := logFile.Seek(0, io.SeekEnd)
	fmt.Fprintf(logFile, "\n==== %s: %s %s\n", time.Now().Format(time.RFC3339), spec.bin, strings.Join(quoteArgs(spec.args), " "))

	cmd := exec.Command(spec.bin, spec.args...)
	cmd.Dir = spec.dir
	cmd.Env = spec.env
	cmd.Stdout = logFile // an *os.File is handed to the child directly: no copying goroutine
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group, so Ctrl-C in a terminal reaches us and not the
		// child (we stop children in order), and so Stop can kill the group.
		Setpgid: true,
		// The kernel signals the child when we die, even by SIGKILL, so no
		// child is ever orphaned. Go applies it after the credential change,
		// which would otherwise clear it. (Strictly it fires when the OS
		// thread that forked dies; Go only ends threads of goroutines that
		// exit while locked with runtime.LockOSThread, which we never do.)
		Pdeathsig:  spec.deathSig,
		Credential: spec.cred,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devstack: start %s: %w", spec.name, err)
	}
	p := &process{name: spec.name, cmd: cmd, logPath: spec.logPath, logStart: start, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid is the child's process id (also its process group id).
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the child has been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signalGroup sends sig to the child's whole process group while the child
// has not been reaped (after that the group id could belong to someone else).
func (p *process) signalGroup(sig syscall.Signal) {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.pid(), sig)
}

// stop sends sig, waits for the child until ctx ends (or grace passes) and
// then kills the group. It returns once the child is reaped.
func (p *process) stop(ctx context.Context, sig syscall.Signal, grace time.Duration) error {
	if p.exited() {
		return nil
	}
	p.signalGroup(sig)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
	case <-timer.C:
	}
	p.kill()
	return fmt.Errorf("devstack: %s did not stop on %v in time, killed it", p.name, sig)
}

// kill sends SIGKILL to the group and waits until the child is reaped.
func (p *process) kill() {
	p.signalGroup(syscall.SIGKILL)
	<-p.done
}

// tail returns the end of what the child wrote to its log during this run.
func (p *process) tail() string {
	return logTail(p.logPath, p.logStart)
}

// exitError describes why a child ended, with the end of its log.
func (p *process) exitError() error {
	<-p.done
	return fmt.Errorf("devstack: %s exited (%v); log %s ends with:\n%s", p.name, p.waitErr, p.logPath, indent(p.tail()))
}

// logTail returns at most the last 20 lines (and 4 KiB) written to path after
// offset start.
func logTail(path string, start int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const maxBytes = 4 << 10
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "(log unreadable: " + err.Error() + ")"
	}
	from := max(start, end-maxBytes)
	buf := make([]byte, end-from)
	if _, err := f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return "(log unreadable: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	out := strings.TrimSpace(strings.Join(lines, "\n"))
	if out == "" {
		return "(empty)"
	}
	return out
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			a = strconv.Quote(a)
		}
		out[i] = a
	}
	return out
}

// freePort asks the kernel for a port nobody listens on. Another process may
// take it before the child binds it; callers retry with a new port when the
// child says the address is in use.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("devstack: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portAttempts is how many times a service is started, each time on ports
// chosen afresh, when another process took its ports between freePort and
// the service's bind.
const portAttempts = 3

// onFreePorts runs start, which chooses free ports and starts a service on
// them, again while it fails only because a port was taken (errAddrInUse),
// at most portAttempts times in all; retry, when not nil, clears what a
// taken attempt left before the next one.
func onFreePorts[T any](start func() (T, error), retry func()) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := start()
		if err == nil || !errors.Is(err, errAddrInUse) || attempt == portAttempts {
			return v, err
		}
		if retry != nil {
			retry()
		}
	}
}

// findBinary looks for name on PATH and then in dirs, and explains how to
// install it when it is nowhere.
func findBinary(name, pkg string, dirs ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("devstack: %s not found on PATH or in %s: install it with `apt-get install %s` (or run `make deps`)",
		name, strings.Join(dirs, ", "), pkg)
}

// ChildrenOf lists the processes whose parent is pid, from /proc. Tests and
// the fault suite use it to find what a killed process leaves behind.
func ChildrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	want := []byte("PPid:\t" + strconv.Itoa(pid) + "\n")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err == nil && bytes.Contains(status, want) {
			kids = append(kids, n)
		}
	}
	return kids
}

// Alive reports whether a process with this pid exists and is not a zombie.
// Tests use it to prove that no child is left behind.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return true // no /proc: trust kill(0)
	}
	return !bytes.Contains(status, []byte("State:\tZ"))
}

// waitGone waits until none of pids is alive or d has passed.
func waitGone(pids []int, d time.Duration) {
	deadline := time.Now().Add(d)
	for _, pid := range pids {
		for Alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// logger returns l, or a logger that drops everything.
func logger(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
