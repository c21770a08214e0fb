package localstack

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
	"sync"
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
		return nil, fmt.Errorf("localstack: open log for %s: %w", spec.name, err)
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
		return nil, fmt.Errorf("localstack: start %s: %w", spec.name, err)
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
	return fmt.Errorf("localstack: %s did not stop on %v in time, killed it", p.name, sig)
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
	return fmt.Errorf("localstack: %s exited (%v); log %s ends with:\n%s", p.name, p.waitErr, p.logPath, indent(p.tail()))
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
		return 0, fmt.Errorf("localstack: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
	return "", fmt.Errorf("localstack: %s not found on PATH or in %s: install it with `apt-get install %s` (or run `make deps`)",
		name, strings.Join(dirs, ", "), pkg)
}

// server is a child process that can be started, stopped, killed and
// restarted with the same arguments (and so the same port).
type server struct {
	log      *slog.Logger
	spec     procSpec
	stopSig  syscall.Signal                              // graceful shutdown signal
	ready    func(ctx context.Context, p *process) error // nil once the server answers
	children bool                                        // wait for the child's own children when killing it
	before   func() error                                // run before every launch; may be nil

	mu     sync.Mutex
	proc   *process
	frozen bool // SIGSTOPped by freeze and not yet continued
}

// startTimeout bounds a start-up when the caller's context has no deadline.
const startTimeout = 2 * time.Minute

// errAddrInUse marks a start that failed because the port was taken.
var errAddrInUse = errors.New("address already in use")

// start launches the child and waits until it answers.
func (s *server) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil && !s.proc.exited() {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	if s.before != nil {
		if err := s.before(); err != nil {
			return err
		}
	}
	began := time.Now()
	p, err := launch(s.spec)
	if err != nil {
		return err
	}
	if err := waitReady(ctx, p, s.ready); err != nil {
		s.killProc(p)
		if strings.Contains(strings.ToLower(p.tail()), "address already in use") {
			return fmt.Errorf("%w: %w", errAddrInUse, err)
		}
		return err
	}
	s.proc = p
	s.log.Debug("localstack: started", "service", s.spec.name, "pid", p.pid(), "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// waitReady polls ready until it succeeds, the child exits or ctx ends.
func waitReady(ctx context.Context, p *process, ready func(context.Context, *process) error) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if p.exited() {
			return p.exitError()
		}
		attemptCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(attemptCtx, p)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localstack: %s did not become ready (%w; last attempt: %v); log %s ends with:\n%s",
				p.name, ctx.Err(), last, p.logPath, indent(p.tail()))
		case <-p.done:
		case <-tick.C:
		}
	}
}

// stop shuts the child down gracefully; a second call does nothing.
func (s *server) stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	s.thawLocked() // a stopped process would sit on the signal until killed
	kids := s.childPids(s.proc)
	err := s.proc.stop(ctx, s.stopSig, 30*time.Second)
	waitGone(kids, 10*time.Second)
	s.proc = nil
	return err
}

// kill ends the child with SIGKILL, as a crash would.
func (s *server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.killProc(s.proc)
	}
}

func (s *server) killProc(p *process) {
	kids := s.childPids(p)
	if s.frozen {
		// SIGKILL ends stopped processes too; the children, which get no
		// signal from us, must run to notice their parent died.
		for _, kid := range kids {
			_ = syscall.Kill(kid, syscall.SIGCONT)
		}
		s.frozen = false
	}
	p.kill()
	// The children of a PostgreSQL postmaster are session leaders of their
	// own, out of our group's reach; they exit on their own once they see
	// the postmaster die. Wait for that, so a restart finds no one holding
	// the shared memory and a test finds no process left.
	waitGone(kids, 10*time.Second)
}

func (s *server) childPids(p *process) []int {
	if !s.children || p.exited() {
		return nil
	}
	return ChildrenOf(p.pid())
}

// freeze stops the child and each of its children with SIGSTOP: they keep
// their sockets and memory but run nothing, as a server stalled by the
// kernel, a full disk or a debugger is. Clients see connections that accept
// (the kernel's backlog) and never answer. thaw undoes it.
func (s *server) freeze() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return fmt.Errorf("localstack: freeze %s: not running", s.spec.name)
	}
	// The parent first, so it forks nobody after its children are listed.
	s.proc.signalGroup(syscall.SIGSTOP)
	for _, kid := range ChildrenOf(s.proc.pid()) {
		_ = syscall.Kill(kid, syscall.SIGSTOP)
	}
	s.frozen = true
	return nil
}

// thaw continues what freeze stopped; it does nothing when nothing is frozen.
func (s *server) thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.thawLocked()
}

func (s *server) thawLocked() {
	if !s.frozen || s.proc == nil || s.proc.exited() {
		s.frozen = false
		return
	}
	for _, kid := range ChildrenOf(s.proc.pid()) {
		_ = syscall.Kill(kid, syscall.SIGCONT)
	}
	s.proc.signalGroup(syscall.SIGCONT)
	s.frozen = false
}

// restart starts the child again with the same arguments, killing it first
// if it still runs.
func (s *server) restart(ctx context.Context) error {
	s.kill()
	return s.start(ctx)
}

// pid of the running child, 0 when none runs.
func (s *server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return 0
	}
	return s.proc.pid()
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
