package netlab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// namePrefix starts the name of every namespace a lab makes.
const namePrefix = "seckill-netlab-"

// envRun names the run a test binary re-run by Main belongs to: its prefix.
const envRun = "SECKILL_NETLAB_RUN"

// netnsDir is where `ip netns add` keeps the namespaces.
const netnsDir = "/run/netns"

// Main runs a test binary's tests on the control host of a new lab: it
// removes the namespaces of earlier runs that were killed, makes the
// control host's namespace, runs the binary again inside it (nsenter),
// passes its output and exit code on, and removes every namespace of the
// run after, however the run ended. In the binary run again, Main runs the
// tests (run, usually testing.M's Run). It must be root.
func Main(run func() int) {
	if os.Getenv(envRun) != "" || listing() {
		os.Exit(run())
	}
	os.Exit(reexec())
}

// listing reports whether the binary only lists its tests (go test
// -list), which needs no lab.
func listing() bool {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.list") {
			return true
		}
	}
	return false
}

// Running reports whether this process is a test binary Main re-ran inside
// a lab's control host.
func Running() bool { return os.Getenv(envRun) != "" }

func reexec() int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "netlab: the lab makes network namespaces: run the tests as root")
		return 2
	}
	removeStale()
	prefix := namePrefix + strconv.Itoa(os.Getpid()) + "-"
	defer removeRun(prefix)
	if err := ip("netns", "add", prefix+ctlName); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "netlab:", err)
		return 2
	}
	cmd := exec.Command("nsenter", append([]string{"--net=" + filepath.Join(netnsDir, prefix+ctlName), "--", self}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envRun+"="+prefix)
	// The run dies with this process; the next run then removes its
	// namespaces (removeStale).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "netlab:", err)
		return 2
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return exit.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "netlab: the tests inside the lab:", err)
	return 1
}

// removeStale removes the namespaces of runs whose process is gone.
func removeStale() {
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), namePrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || processAlive(pid) {
			continue
		}
		removeNetns(e.Name())
	}
}

// removeRun removes every namespace of the run with this prefix.
func removeRun(prefix string) {
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			removeNetns(e.Name())
		}
	}
}

// removeNetns ends what still runs in a namespace of ours (only processes
// a lab started live there) and removes it; its veth pairs go with it.
func removeNetns(name string) {
	out, _ := exec.Command("ip", "netns", "pids", name).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !anyAlive(pids) {
			break
		}
	}
	_ = ip("netns", "del", name)
}

func anyAlive(pids []int) bool {
	for _, pid := range pids {
		if processAlive(pid) {
			return true
		}
	}
	return false
}

// processAlive reports whether pid runs (a zombie counts as gone).
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// ip runs the ip command.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netlab: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
