package beacon_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/beacon"
)

// The package's private drand network, started once.
var network *devstack.Drand

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "seckill-beacon-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	network, err = devstack.StartDrand(ctx, devstack.DrandOptions{Dir: dir, Period: time.Second})
	if err == nil {
		err = network.Wait(ctx)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "beacon tests need a drand network (make test-deps builds bin/drand): %v\n", err)
		return 1
	}
	defer network.Stop(context.Background())
	return m.Run()
}

func chainHash(t *testing.T) string {
	h, err := network.ChainHash(context.Background())
	require.NoError(t, err)
	return h
}

// TestRoundsVerify: the chain's info hashes to its chain hash, a round
// out verifies and its randomness is SHA-256 of its signature, a round to
// come is ErrNotYet, and a round's time follows genesis and period.
func TestRoundsVerify(t *testing.T) {
	ctx := context.Background()
	c := beacon.New(beacon.Config{URLs: []string{network.URL}, ChainHash: chainHash(t)})
	ch, err := c.Chain(ctx)
	require.NoError(t, err)
	assert.Equal(t, chainHash(t), ch.Hash)
	assert.Equal(t, time.Second, ch.Period)

	r, err := c.Round(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), r.Number)
	require.NoError(t, ch.Verify(1, r.Signature))
	assert.Error(t, ch.Verify(2, r.Signature), "a signature is its round's alone")

	future, _ := ch.RoundAt(time.Now().Add(time.Hour))
	_, err = c.Round(ctx, future)
	require.ErrorIs(t, err, beacon.ErrNotYet)

	at := ch.Genesis.Add(2500 * time.Millisecond)
	n, when := ch.RoundAt(at)
	assert.Equal(t, uint64(4), n, "genesis is round 1: 2.5 s after it, the next round is 4")
	assert.Equal(t, ch.Genesis.Add(3*time.Second), when)
	n, when = ch.RoundAt(ch.Genesis.Add(2 * time.Second))
	assert.Equal(t, uint64(4), n, "a round exactly at t is not after it")
	assert.True(t, when.After(ch.Genesis.Add(2*time.Second)))
}

// TestLyingRelaysAreCaught: an endpoint that serves another chain's info,
// or a round with a forged signature, is not believed; with an honest
// endpoint after it, the client takes the honest answer.
func TestLyingRelaysAreCaught(t *testing.T) {
	ctx := context.Background()
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(network.URL + r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if strings.Contains(r.URL.Path, "/public/") {
			// Flip one byte of the signature.
			i := strings.Index(string(b), `"signature":"`) + len(`"signature":"`)
			if b[i] == 'a' {
				b[i] = 'b'
			} else {
				b[i] = 'a'
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	}))
	defer liar.Close()

	only := beacon.New(beacon.Config{URLs: []string{liar.URL}, ChainHash: chainHash(t)})
	_, err := only.Round(ctx, 1)
	require.Error(t, err)
	assert.NotErrorIs(t, err, beacon.ErrNotYet)
	assert.ErrorIs(t, err, apperr.ErrUnavailable)

	both := beacon.New(beacon.Config{URLs: []string{liar.URL, network.URL}, ChainHash: chainHash(t)})
	r, err := both.Round(ctx, 1)
	require.NoError(t, err)
	ch, err := both.Chain(ctx)
	require.NoError(t, err)
	require.NoError(t, ch.Verify(1, r.Signature))

	wrong := beacon.New(beacon.Config{URLs: []string{network.URL}, ChainHash: beacon.QuicknetChainHash})
	_, err = wrong.Chain(ctx)
	require.Error(t, err, "an endpoint of another chain than the one configured")
	assert.Contains(t, err.Error(), "not "+beacon.QuicknetChainHash)
	assert.False(t, errors.Is(err, beacon.ErrNotYet))
}
