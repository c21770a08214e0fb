package devstack

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMissingBinaryErrorSaysWhatToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findBinary("redis-server-that-is-not-there", "redis-server", t.TempDir())
	require.ErrorContains(t, err, "redis-server-that-is-not-there not found")
	require.ErrorContains(t, err, "apt-get install redis-server")
}

func TestLogTailShowsOnlyThisRun(t *testing.T) {
	path := t.TempDir() + "/x.log"
	p, err := launch(procSpec{name: "sh", bin: "/bin/sh", args: []string{"-c", "echo one; exit 3"}, logPath: path})
	require.NoError(t, err)
	<-p.done
	p2, err := launch(procSpec{name: "sh", bin: "/bin/sh", args: []string{"-c", "echo two; exit 4"}, logPath: path})
	require.NoError(t, err)
	err = p2.exitError()
	require.ErrorContains(t, err, "exit status 4")
	require.ErrorContains(t, err, "two")
	require.NotContains(t, err.Error(), "one")
}

func TestCompareVersions(t *testing.T) {
	require.Equal(t, -1, compareVersions("9.6", "15"))
	require.Equal(t, 1, compareVersions("16", "15"))
	require.Equal(t, 0, compareVersions("15", "15"))
}

func TestStartErrorShowsLogTail(t *testing.T) {
	never := func(context.Context, *process) error { return errors.New("not yet") }
	s := &server{
		log:   logger(nil),
		spec:  procSpec{name: "fake", bin: "/bin/sh", args: []string{"-c", "echo 'Could not create server TCP listening socket: bind: Address already in use'; exit 1"}, logPath: t.TempDir() + "/fake.log"},
		ready: never,
	}
	err := s.start(t.Context())
	require.ErrorIs(t, err, errAddrInUse, "the caller retries on another port")
	require.ErrorContains(t, err, "fake exited (exit status 1)")
	require.ErrorContains(t, err, "bind: Address already in use")
	require.Zero(t, s.pid())

	// A child that runs but never answers is killed when ctx ends.
	s.spec.args = []string{"-c", "echo starting; exec sleep 60"}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = s.start(ctx)
	require.ErrorContains(t, err, "did not become ready")
	require.ErrorContains(t, err, "starting")
	require.Zero(t, s.pid())
}

// A cluster id starting with '-' is read by Kafka's storage tool as an
// option, and the format fails; one random id in 64 would.
func TestKafkaClusterIDNeverLooksLikeAnOption(t *testing.T) {
	for range 5000 {
		id := newKafkaClusterID()
		require.Len(t, id, 22, "Kafka's Uuid text form: 16 bytes, base64url unpadded")
		require.NotEqual(t, byte('-'), id[0], id)
	}
}

// A start whose port was taken is tried again on new ports, a few times at
// most, with what the taken attempt left cleared in between; any other
// failure ends it at once.
func TestOnFreePortsRetriesOnlyATakenPort(t *testing.T) {
	taken := fmt.Errorf("devstack: redis-server: %w", errAddrInUse)
	other := errors.New("devstack: redis-server not found")
	cases := []struct {
		name               string
		fails              []error
		wantCalls, retries int
		wantErr            error
	}{
		{"first try", nil, 1, 0, nil},
		{"taken once", []error{taken}, 2, 1, nil},
		{"taken every time", []error{taken, taken, taken, taken}, portAttempts, portAttempts - 1, taken},
		{"another failure", []error{other}, 1, 0, other},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls, retries := 0, 0
			v, err := onFreePorts(func() (int, error) {
				calls++
				if calls <= len(c.fails) {
					return 0, c.fails[calls-1]
				}
				return calls, nil
			}, func() { retries++ })
			require.Equal(t, c.wantCalls, calls)
			require.Equal(t, c.retries, retries)
			require.ErrorIs(t, err, c.wantErr)
			if c.wantErr == nil {
				require.Equal(t, calls, v)
			}
		})
	}
}
