package devstack

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Place puts a service on a host of its own (deploy/tools/netlab's hosts): the
// address it listens on and the network namespace it runs in. The zero
// Place is 127.0.0.1 in the caller's own namespace.
type Place struct {
	// Host is the IP address the service binds and clients dial; empty
	// means 127.0.0.1.
	Host string
	// Netns is the path of the network namespace the service runs in (e.g.
	// /run/netns/NAME, as `ip netns add` makes); empty is the caller's own.
	Netns string
}

// host is the address to bind and dial.
func (p Place) host() string {
	if p.Host == "" {
		return "127.0.0.1"
	}
	return p.Host
}

// remote reports whether clients come from other hosts, so the service
// must let them in (redis-server's protected mode, PostgreSQL's
// pg_hba.conf let in only loopback clients by default).
func (p Place) remote() bool { return p.Host != "" && !net.ParseIP(p.Host).IsLoopback() }

// wrap makes spec run in the place's namespace: through nsenter, which
// enters it and execs the service (same pid, so signals, the parent-death
// signal and the process group stay as they were). A credential moves to
// nsenter's --setuid and --setgid, since entering a namespace needs root.
func (p Place) wrap(spec procSpec) (procSpec, error) {
	if p.Netns == "" {
		return spec, nil
	}
	bin, err := findBinary("nsenter", "util-linux", "/usr/bin", "/bin", "/usr/sbin")
	if err != nil {
		return spec, err
	}
	args := []string{"--net=" + p.Netns}
	if spec.cred != nil {
		args = append(args, "--setuid", strconv.FormatUint(uint64(spec.cred.Uid), 10),
			"--setgid", strconv.FormatUint(uint64(spec.cred.Gid), 10))
		spec.cred = nil
	}
	spec.args = append(append(args, "--", spec.bin), spec.args...)
	spec.bin = bin
	return spec, nil
}

// InNetns runs fn on an OS thread that is in the network namespace at path
// (e.g. /run/netns/NAME) for the call's duration: the sockets fn makes
// (listeners, packet sockets) belong to that namespace and keep working
// from any thread after. fn must not start goroutines that make sockets.
// An empty path runs fn as it is.
func InNetns(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("devstack: network namespace: %w", err)
	}
	defer target.Close()
	runtime.LockOSThread()
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("devstack: own network namespace: %w", err)
	}
	defer own.Close()
	if err := unix.Setns(int(target.Fd()), syscall.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("devstack: enter %s: %w", path, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(own.Fd()), syscall.CLONE_NEWNET); err != nil {
		// The thread stays locked, so the runtime ends it with the
		// goroutine rather than reuse it in the wrong namespace.
		return fmt.Errorf("devstack: leave %s: %w", path, err)
	}
	runtime.UnlockOSThread()
	return fnErr
}

// Listen is net.Listen in the place's namespace, on its host.
func (p Place) Listen(network, port string) (net.Listener, error) {
	var l net.Listener
	err := InNetns(p.Netns, func() (err error) {
		l, err = net.Listen(network, net.JoinHostPort(p.host(), port))
		return err
	})
	return l, err
}
