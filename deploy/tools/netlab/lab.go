package netlab

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/seckill/deploy/devstack"
)

// ctlName and labName end the names of the control host's namespace and
// the lab's own (the switch's side of every veth pair).
const (
	ctlName = "ctl"
	labName = "lab"
)

// maxHosts is how many hosts a lab has room for in its /24, the control
// host included.
const maxHosts = 250

// Options configures New.
type Options struct {
	// Delay and Jitter are every link's default: each frame between two
	// hosts waits Delay plus up to Jitter (uniformly), in order. Zero
	// Delay and Jitter mean 0.2 ms plus up to 0.3 ms: 0.2 to 0.5 ms each
	// way, as between machines of one data centre.
	Delay, Jitter time.Duration
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

// Lab is the hosts of one run and the switch between them.
type Lab struct {
	prefix string
	opts   Options
	sw     *switchboard

	seq   atomic.Int64 // of the hosts' namespaces
	mu    sync.Mutex
	hosts []*Host
}

// Host is one namespace of the lab, with its address.
type Host struct {
	// Name is the lab's name for it, e.g. "gateway-1".
	Name string
	// IP is its address, 10.231.0.N.
	IP string
	// Netns is the path of its network namespace.
	Netns string

	index int    // N of its address; its switch port is pN
	mac   []byte // its eth0's, 02:31:00:00:00:N
}

// Place is where a service or process on this host runs.
func (h *Host) Place() devstack.Place { return devstack.Place{Host: h.IP, Netns: h.Netns} }

// New makes the lab of a test binary Main re-ran (it fails elsewhere): the
// lab's namespace, the switch, and the control host this process runs on.
// Close removes what New and Host made.
func New(opts Options) (_ *Lab, err error) {
	prefix := os.Getenv(envRun)
	if prefix == "" {
		return nil, errors.New("netlab: not inside a lab: the test binary's TestMain must call netlab.Main")
	}
	if opts.Delay == 0 && opts.Jitter == 0 {
		opts.Delay, opts.Jitter = 200*time.Microsecond, 300*time.Microsecond
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	l := &Lab{prefix: prefix, opts: opts}
	if err := ip("netns", "add", prefix+labName); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	l.sw = newSwitchboard(Link{Delay: opts.Delay, Jitter: opts.Jitter})
	if _, err := l.add(ctlName, prefix+ctlName); err != nil {
		return nil, err
	}
	return l, nil
}

// Control is the host the test process runs on.
func (l *Lab) Control() *Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hosts[0]
}

// Host makes a new host named name and joins it to the switch.
func (l *Lab) Host(name string) (*Host, error) {
	// The sequence number keeps names unique when two fleets of a run
	// both have a gateway-1.
	ns := fmt.Sprintf("%sh%d-%s", l.prefix, l.seq.Add(1), name)
	if err := ip("netns", "add", ns); err != nil {
		return nil, err
	}
	h, err := l.add(name, ns)
	if err != nil {
		_ = ip("netns", "del", ns)
		return nil, err
	}
	l.opts.Logf("netlab: host %s at %s", name, h.IP)
	return h, nil
}

// Hosts makes a host per name.
func (l *Lab) Hosts(names ...string) ([]*Host, error) {
	out := make([]*Host, 0, len(names))
	for _, n := range names {
		h, err := l.Host(n)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// add wires the namespace ns as the next host: a veth pair from the lab's
// namespace (port pN) to ns (eth0), the address, and the switch's port.
func (l *Lab) add(name, ns string) (*Host, error) {
	l.mu.Lock()
	n := len(l.hosts) + 1
	if n > maxHosts {
		l.mu.Unlock()
		return nil, fmt.Errorf("netlab: a lab has room for %d hosts", maxHosts)
	}
	h := &Host{Name: name, IP: fmt.Sprintf("10.231.0.%d", n), Netns: filepath.Join(netnsDir, ns), index: n,
		mac: []byte{0x02, 0x31, 0, 0, 0, byte(n)}}
	l.hosts = append(l.hosts, h)
	l.mu.Unlock()

	lab, port := l.prefix+labName, fmt.Sprintf("p%d", n)
	steps := [][]string{
		{"-n", lab, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", ns, "link", "set", "eth0", "address", net.HardwareAddr(h.mac).String()},
		{"-n", ns, "addr", "add", h.IP + "/24", "dev", "eth0"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", lab, "link", "set", port, "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return nil, err
		}
	}
	if err := devstack.InNetns(filepath.Join(netnsDir, lab), func() error { return l.sw.attach(h, port) }); err != nil {
		return nil, err
	}
	return h, nil
}

// Link is what a frame meets between two hosts.
type Link struct {
	// Delay plus up to Jitter (uniformly) is how long each frame waits;
	// frames leave in the order they came.
	Delay, Jitter time.Duration
	// Loss is the share of frames dropped, 0 to 1.
	Loss float64
}

// Impair puts link between every host of a and every host of b, both ways,
// until the returned function puts the lab's default back.
func (l *Lab) Impair(a, b []*Host, link Link) (restore func()) {
	l.sw.set(a, b, &link)
	return func() { l.sw.set(a, b, nil) }
}

// Partition drops every frame between the hosts of a and those of b, both
// ways, until the returned function heals it. Nothing tells either side:
// their packets vanish, as behind a dead router, so each side learns of it
// only from its own timeouts.
func (l *Lab) Partition(a, b []*Host) (heal func()) {
	return l.Impair(a, b, Link{Loss: 1})
}

// Cut takes h's link down (its veth pair, so its eth0 loses the carrier);
// Mend brings it back.
func (l *Lab) Cut(h *Host) error {
	return ip("-n", l.prefix+labName, "link", "set", fmt.Sprintf("p%d", h.index), "down")
}

// Mend brings a link Cut took down back up.
func (l *Lab) Mend(h *Host) error {
	return ip("-n", l.prefix+labName, "link", "set", fmt.Sprintf("p%d", h.index), "up")
}

// Stats is what the switch did: frames forwarded and dropped (by loss or a
// partition).
func (l *Lab) Stats() (forwarded, dropped int64) {
	return l.sw.forwarded.Load(), l.sw.dropped.Load()
}

// Close stops the switch and removes every host's namespace but the
// control host's (Main removes it once this process has ended), killing
// what still runs in them. It is safe on a lab New gave up on.
func (l *Lab) Close() {
	if l.sw != nil {
		l.sw.close()
	}
	l.mu.Lock()
	hosts := l.hosts
	l.mu.Unlock()
	for _, h := range hosts {
		if h.index != 1 {
			removeNetns(filepath.Base(h.Netns))
		}
	}
	// The control host stays for the next lab of this run: take its end
	// of the pair away now (the kernel frees a removed namespace's
	// interfaces later, in the background).
	_ = ip("-n", l.prefix+ctlName, "link", "del", "eth0")
	removeNetns(l.prefix + labName)
}
