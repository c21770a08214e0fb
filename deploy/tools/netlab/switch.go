package netlab

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// switchboard is the lab's switch: a packet socket on the lab's end of each
// host's veth pair, a frame read from one handed to the port of the host it
// is for (every other port for a broadcast) after its link's delay.
//
// The sockets carry a virtio-net header (PACKET_VNET_HDR), as a
// hypervisor's virtual switch does: a host's kernel hands its veth frames
// of up to 64 KiB whose checksums are still to be filled in (segmentation
// and checksum offload), and the header lets the kernel on the far side
// take them as they are.
type switchboard struct {
	def Link

	mu    sync.RWMutex
	ports map[[6]byte]*port // by the MAC of the host's eth0
	list  []*port
	links map[[2]int]*Link // (from, to) host index: the link, when not def

	forwarded, dropped atomic.Int64

	stopped atomic.Bool
	readers sync.WaitGroup // one per port
	lines   sync.WaitGroup // one per line
}

// port is one host's end of the switch.
type port struct {
	host *Host
	f    *os.File // the packet socket, on the poller: Close ends a Read
	// lines are the delay lines from this port, one per destination, so a
	// slow link holds back only its own frames. Only the port's reader
	// touches the map.
	lines map[int]*line
}

// line is one direction of one link: frames wait their delay in order.
type line struct {
	to   *port
	q    chan frame
	last time.Time // the due time of the last frame queued
}

type frame struct {
	due  time.Time
	data []byte
}

// vnetHdrLen is the size of struct virtio_net_hdr before each frame.
const vnetHdrLen = 10

// lineDepth is how many frames a line holds; more are dropped, as a full
// queue does.
const lineDepth = 4096

func newSwitchboard(def Link) *switchboard {
	return &switchboard{def: def, ports: map[[6]byte]*port{}, links: map[[2]int]*Link{}}
}

// attach opens the packet socket on the lab's end (portName) of h's pair
// and starts forwarding what h sends. It must run in the lab's namespace.
func (s *switchboard) attach(h *Host, portName string) error {
	ifi, err := net.InterfaceByName(portName)
	if err != nil {
		return fmt.Errorf("netlab: switch port %s: %w", portName, err)
	}
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, proto)
	if err != nil {
		return fmt.Errorf("netlab: packet socket: %w", err)
	}
	setup := func() error {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
			return err
		}
		// Only what the host sends, not what the switch writes to it.
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	}
	if err := setup(); err != nil {
		_ = unix.Close(fd)
		return fmt.Errorf("netlab: switch port %s: %w", portName, err)
	}
	p := &port{host: h, f: os.NewFile(uintptr(fd), portName), lines: map[int]*line{}}
	s.mu.Lock()
	s.ports[[6]byte(h.mac)] = p
	s.list = append(s.list, p)
	s.mu.Unlock()
	s.readers.Go(func() { s.read(p) })
	return nil
}

// read forwards what p's host sends until the switch closes.
func (s *switchboard) read(p *port) {
	buf := make([]byte, vnetHdrLen+65536+64)
	for {
		n, err := p.f.Read(buf)
		if err != nil {
			if s.stopped.Load() {
				return
			}
			continue // a frame too big, an interface going down and up
		}
		if n < vnetHdrLen+14 {
			continue
		}
		eth := buf[vnetHdrLen:n]
		// IPv4 and ARP only: the lab is an IPv4 network, and the hosts'
		// IPv6 chatter would only cost time.
		if t := binary.BigEndian.Uint16(eth[12:14]); t != 0x0800 && t != 0x0806 {
			continue
		}
		now := time.Now()
		s.mu.RLock()
		if eth[0]&1 == 1 { // broadcast or multicast: every other port
			for _, to := range s.list {
				if to != p {
					s.forward(p, to, buf[:n], now)
				}
			}
		} else if to, ok := s.ports[[6]byte(eth[0:6])]; ok && to != p {
			s.forward(p, to, buf[:n], now)
		}
		s.mu.RUnlock()
	}
}

// forward queues a copy of one frame on the line from p to to, or drops
// it. The caller holds s.mu for reading.
func (s *switchboard) forward(from, to *port, data []byte, now time.Time) {
	link := s.def
	if l := s.links[[2]int{from.host.index, to.host.index}]; l != nil {
		link = *l
	}
	if link.Loss > 0 && rand.Float64() < link.Loss {
		s.dropped.Add(1)
		return
	}
	ln := from.lines[to.host.index]
	if ln == nil {
		ln = &line{to: to, q: make(chan frame, lineDepth)}
		from.lines[to.host.index] = ln
		s.lines.Go(func() { s.deliver(ln) })
	}
	due := now.Add(link.Delay)
	if link.Jitter > 0 {
		due = due.Add(rand.N(link.Jitter))
	}
	if due.Before(ln.last) {
		due = ln.last // a link does not reorder
	}
	ln.last = due
	select {
	case ln.q <- frame{due: due, data: append([]byte(nil), data...)}:
		s.forwarded.Add(1)
	default:
		s.dropped.Add(1)
	}
}

// deliver writes each frame of ln to its host once it is due.
func (s *switchboard) deliver(ln *line) {
	for fr := range ln.q {
		if s.stopped.Load() {
			continue
		}
		if d := time.Until(fr.due); d > 0 {
			sleep(d)
		}
		_, _ = ln.to.f.Write(fr.data) // a link that is down drops it
	}
}

// set puts link (nil: the default) between every host of a and of b, both
// ways.
func (s *switchboard) set(a, b []*Host, link *Link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			for _, k := range [][2]int{{x.index, y.index}, {y.index, x.index}} {
				if link == nil {
					delete(s.links, k)
				} else {
					s.links[k] = link
				}
			}
		}
	}
}

// close stops forwarding and closes the ports.
func (s *switchboard) close() {
	if s.stopped.Swap(true) {
		return
	}
	s.mu.Lock()
	for _, p := range s.list {
		_ = p.f.Close() // ends the port's Read
	}
	list := s.list
	s.mu.Unlock()
	s.readers.Wait()
	// The readers are gone: the lines they made are theirs to close.
	for _, p := range list {
		for _, ln := range p.lines {
			close(ln.q)
		}
	}
	s.lines.Wait()
}

// sleep waits d. A short wait sleeps in the kernel (nanosleep, on this
// goroutine's thread): the runtime's timers wake a sleeping goroutine up to
// a millisecond late, which would make every link several times slower
// than the sub-millisecond one it stands for.
func sleep(d time.Duration) {
	if d > 5*time.Millisecond {
		time.Sleep(d)
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
