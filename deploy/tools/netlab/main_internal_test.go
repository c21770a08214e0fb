package netlab

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRemoveStale proves a run cleans up after a killed one: the
// namespaces of a run whose process is gone are removed, with what still
// ran in them, and a live run's are left alone.
func TestRemoveStale(t *testing.T) {
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	name := namePrefix + strconv.Itoa(gone.Process.Pid) + "-h1-stale"
	require.NoError(t, ip("netns", "add", name))
	t.Cleanup(func() { _ = ip("netns", "del", name) })
	left := exec.Command("nsenter", "--net="+filepath.Join(netnsDir, name), "--", "sleep", "60")
	require.NoError(t, left.Start())
	waited := make(chan struct{})
	go func() { _ = left.Wait(); close(waited) }()
	t.Cleanup(func() { _ = left.Process.Kill(); <-waited })
	// nsenter joins the namespace after it starts: until then nothing of
	// the dead run is in there to be found (a busy machine shows it).
	require.Eventually(t, func() bool {
		out, _ := exec.Command("ip", "netns", "pids", name).Output()
		return slices.Contains(strings.Fields(string(out)), strconv.Itoa(left.Process.Pid))
	}, 10*time.Second, 20*time.Millisecond, "the leftover process joins the dead run's namespace")

	removeStale()

	require.NoFileExists(t, filepath.Join(netnsDir, name), "the dead run's namespace is removed")
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("what ran in the dead run's namespace still runs")
	}
	require.FileExists(t, filepath.Join(netnsDir, os.Getenv(envRun)+ctlName), "this live run's namespaces stay")
}
