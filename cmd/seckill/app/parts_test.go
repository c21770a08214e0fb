package app

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// journal records what the parts of a test did, in order.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(line string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, line)
}

func (j *journal) read() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.lines...)
}

// loop is a part that writes when it starts and when it stops, and runs
// until its context ends.
func loop(j *journal, name string) part {
	return part{name: name, run: func(ctx context.Context) error {
		j.add("start " + name)
		<-ctx.Done()
		j.add("stop " + name)
		return nil
	}}
}

// A part with a ready channel holds the parts after it until it is ready;
// at the end the parts stop in the reverse order, each once the later
// ones have returned.
func TestPartsStartInOrderAndStopInReverse(t *testing.T) {
	var j journal
	letReady := make(chan struct{})
	ready := make(chan struct{})
	subscribed := part{name: "hub", ready: ready, run: func(ctx context.Context) error {
		j.add("start hub")
		<-letReady
		close(ready)
		<-ctx.Done()
		j.add("stop hub")
		return nil
	}}
	parts := []part{loop(&j, "ops"), subscribed, loop(&j, "gateway"), loop(&j, "worker")}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	var started, stopping sync.WaitGroup
	started.Add(1)
	stopping.Add(1)
	go func() {
		done <- runParts(ctx, parts, started.Done, stopping.Done)
	}()

	require.Eventually(t, func() bool { return len(j.read()) == 2 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // time enough to start the gateway, were it not held
	require.ElementsMatch(t, []string{"start ops", "start hub"}, j.read(), "nothing after the hub starts before it is ready")

	close(letReady)
	started.Wait()
	require.Eventually(t, func() bool { return len(j.read()) == 4 }, 5*time.Second, time.Millisecond)
	require.ElementsMatch(t, []string{"start ops", "start hub", "start gateway", "start worker"}, j.read())

	cancel()
	stopping.Wait()
	require.NoError(t, <-done)
	require.Equal(t, []string{"stop worker", "stop gateway", "stop hub", "stop ops"}, j.read()[4:])
}

// A part that fails before it is ready: nothing after it starts, what
// started stops, and the failure is named.
func TestPartFailingBeforeReadyStartsNoMore(t *testing.T) {
	var j journal
	boom := errors.New("redis did not confirm the subscription")
	failing := part{name: "notify hub", ready: make(chan struct{}), run: func(context.Context) error { return boom }}
	startedCalled := false
	err := runParts(t.Context(), []part{loop(&j, "ops"), failing, loop(&j, "gateway")},
		func() { startedCalled = true }, func() {})
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "notify hub: ")
	require.False(t, startedCalled)
	require.Equal(t, []string{"start ops", "stop ops"}, j.read())
}

// A part that fails once all run ends them all, in the reverse order.
func TestPartFailingLaterStopsTheOthers(t *testing.T) {
	var j journal
	lost := errors.New("lease lost")
	failLater := make(chan struct{})
	failing := part{name: "order ids", run: func(ctx context.Context) error {
		j.add("start order ids")
		<-failLater
		return lost
	}}
	err := runParts(t.Context(), []part{loop(&j, "ops"), failing, loop(&j, "gateway")},
		func() { close(failLater) }, func() {})
	require.ErrorIs(t, err, lost)
	require.ErrorContains(t, err, "order ids: ")
	lines := j.read()
	require.ElementsMatch(t, []string{"start ops", "start order ids", "start gateway", "stop gateway", "stop ops"}, lines)
	require.Less(t, slices.Index(lines, "stop gateway"), slices.Index(lines, "stop ops"), "stopped in the reverse order")
}
