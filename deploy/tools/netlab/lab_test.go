package netlab_test

import (
	"bufio"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/tools/netlab"
)

func TestMain(m *testing.M) { netlab.Main(m.Run) }

// echo serves one line back per line on host h.
func echo(t *testing.T, h *netlab.Host) string {
	t.Helper()
	l, err := h.Place().Listen("tcp", "0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					if _, err := c.Write(line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrips dials addr and returns the median time of n one-line round
// trips, or the error of the first that fails within timeout.
func roundTrips(addr string, n int, timeout time.Duration) (time.Duration, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	took := make([]time.Duration, 0, n)
	for range n {
		_ = c.SetDeadline(time.Now().Add(timeout))
		began := time.Now()
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return 0, err
		}
		if _, err := r.ReadBytes('\n'); err != nil {
			return 0, err
		}
		took = append(took, time.Since(began))
	}
	slices.Sort(took)
	return took[len(took)/2], nil
}

// TestLab proves the lab's hosts reach each other through the switch, and
// that latency, a partition and a cut link do what they say and undo.
func TestLab(t *testing.T) {
	lab, err := netlab.New(netlab.Options{Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(lab.Close)
	hosts, err := lab.Hosts("a", "b")
	require.NoError(t, err)
	a, b := hosts[0], hosts[1]
	require.NotEqual(t, a.IP, b.IP)
	ctl := []*netlab.Host{lab.Control()}

	addr := echo(t, a)
	require.Contains(t, addr, a.IP+":", "the listener is on the host's own address")
	base, err := roundTrips(addr, 50, 5*time.Second)
	require.NoError(t, err, "the control host reaches host a")
	t.Logf("round trip control <-> a: median %v", base)

	restore := lab.Impair(ctl, []*netlab.Host{a}, netlab.Link{Delay: 20 * time.Millisecond})
	slow, err := roundTrips(addr, 5, 5*time.Second)
	require.NoError(t, err)
	require.GreaterOrEqual(t, slow, 40*time.Millisecond, "20 ms each way is at least 40 ms a round trip")
	restore()

	heal := lab.Partition(ctl, []*netlab.Host{a})
	_, err = roundTrips(addr, 1, 500*time.Millisecond)
	require.Error(t, err, "a partition lets nothing through")
	heal()
	_, err = roundTrips(addr, 3, 5*time.Second)
	require.NoError(t, err, "a healed partition lets everything through")

	require.NoError(t, lab.Cut(a))
	_, err = roundTrips(addr, 1, 500*time.Millisecond)
	require.Error(t, err, "a cut link carries nothing")
	require.NoError(t, lab.Mend(a))
	require.Eventually(t, func() bool { _, err := roundTrips(addr, 1, time.Second); return err == nil },
		20*time.Second, 100*time.Millisecond, "a mended link carries again")

	fwd, dropped := lab.Stats()
	require.Positive(t, fwd)
	require.Positive(t, dropped, "the partition dropped frames")
}
