package devstack

// A service as a restartable child process: started, stopped, killed,
// frozen and restarted on the same arguments (and so the same port).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

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
	s.log.Debug("devstack: started", "service", s.spec.name, "pid", p.pid(), "took", time.Since(began).Round(time.Millisecond))
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
			return fmt.Errorf("devstack: %s did not become ready (%w; last attempt: %v); log %s ends with:\n%s",
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
		return fmt.Errorf("devstack: freeze %s: not running", s.spec.name)
	}
	// The parent first, so it forks nobody after its children are listed.
	s.proc.signalGroup(syscall.SIGSTOP)
	kids := ChildrenOf(s.proc.pid())
	for _, kid := range kids {
		_ = syscall.Kill(kid, syscall.SIGSTOP)
	}
	s.frozen = true
	// The signal is only queued: a thread busy on another core stops at its
	// next kernel entry, and a busy JVM can answer one more request first.
	// Return once every thread is stopped, so nothing is answered after.
	waitStopped(append(kids, s.proc.pid()), 5*time.Second)
	return nil
}

// waitStopped waits until every thread of every pid is stopped (state T in
// /proc/<pid>/task/<tid>/stat), or timeout passes.
func waitStopped(pids []int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && !allStopped(pids) {
		time.Sleep(time.Millisecond)
	}
}

func allStopped(pids []int) bool {
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
		tasks, err := os.ReadDir(dir)
		if err != nil {
			continue // gone
		}
		for _, task := range tasks {
			stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
			if err != nil {
				continue
			}
			// pid (comm) state ...: comm may hold spaces and parentheses.
			i := bytes.LastIndexByte(stat, ')')
			if i < 0 || i+2 >= len(stat) {
				continue
			}
			if st := stat[i+2]; st != 'T' && st != 't' && st != 'Z' && st != 'X' {
				return false
			}
		}
	}
	return true
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

// isFrozen reports whether freeze stopped the child and thaw has not
// continued it yet.
func (s *server) isFrozen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frozen
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
