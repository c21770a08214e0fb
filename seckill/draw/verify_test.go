package draw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/draw"
)

// readmeBlock is the sh block after the marker `<!-- verify: name -->` in
// the package's README: the test runs what the README tells people to run.
func readmeBlock(t *testing.T, name string) string {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- verify: " + regexp.QuoteMeta(name) + " -->\n```sh\n(.*?)```").FindSubmatch(b)
	require.NotNil(t, m, "README.md has no verify block %q", name)
	return string(m[1])
}

// sh runs script in bash with env in dir and answers its stdout.
func sh(t *testing.T, dir, script string, env ...string) string {
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "stderr: %s", errb.String())
	return out.String()
}

// TestVerifyByHand makes a draw of 300 entries through Redis, PostgreSQL
// and the private drand network, serves the voucher and its entry list as
// the gateway does, and checks the draw as the README tells anyone to, with
// curl, jq, sha256sum and openssl: the entries against their hash, every
// ticket from the round's signature, the winners and the cut-off, and a
// shopper's own ticket and result.
func TestVerifyByHand(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "openssl", "sha256sum", "sed", "sort"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the README's commands need %s (make test-deps)", tool)
	}
	ctx := context.Background()
	rdb := stack.Redis(t)
	in := newInstance(t, rdb, stack.NewDatabase(t))
	const id, entries, stock, limit = 280501, 300, 41, 2
	_, l := drawVoucher(t, in, id, 3*time.Second)
	for u := range int64(entries) {
		_, err := in.draws.Enter(ctx, l, 800_000+u*7)
		require.NoError(t, err)
	}
	untilBegun(t, rdb, l)
	out := drawn(t, in, l, stock, limit)
	require.Equal(t, 21, out.Draw.Winners, "41 units at 2 each: 21 winners")
	face, err := in.draws.Face(ctx, id)
	require.NoError(t, err)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/vouchers/" + strconv.Itoa(id):
			_ = json.NewEncoder(w).Encode(map[string]any{"id": strconv.Itoa(id), "stock_total": stock, "per_user_limit": limit,
				"draw": map[string]any{"entries_hash": face.EntriesHash, "entries": face.Entries, "cutoff": face.Cutoff,
					"beacon": map[string]any{"round": face.Beacon.Round, "signature": face.Beacon.Signature}}})
		case "/api/v1/vouchers/" + strconv.Itoa(id) + "/draw/entries":
			b, err := in.draws.EntryList(r.Context(), id)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			_, _ = w.Write(b)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	dir := t.TempDir()
	env := []string{"SECKILL=" + srv.URL, "VOUCHER_ID=" + strconv.Itoa(id)}
	whole := sh(t, dir, readmeBlock(t, "the whole draw"), env...)
	t.Logf("the whole draw:\n%s", whole)
	assert.Equal(t, "entries: ok\ncut-off: ok, 21 won\n", whole)
	tickets, err := os.ReadFile(dir + "/tickets.txt")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(tickets)), "\n")
	require.Len(t, lines, entries)
	for i, e := range out.Draw.Ranked {
		require.Equal(t, e.Ticket.String()+" "+e.EntryID, lines[i], "rank %d", i)
	}

	// One shopper: the last winner and the first on the waitlist.
	r, ok := draw.RandomnessFrom(face)
	require.True(t, ok)
	for i, want := range map[int]string{20: "won", 21: "waitlisted"} {
		e := out.Draw.Ranked[i]
		got := sh(t, dir, readmeBlock(t, "one shopper"), append(env, "ENTRY_ID="+e.EntryID,
			"RANDOMNESS="+r.String(), "CUTOFF="+face.Cutoff)...)
		assert.Equal(t, strings.TrimSpace(e.Ticket.String()+"\n"+want), strings.TrimSpace(got), "rank %d", i)
	}

	// And the check can fail: an entry list that is not the one frozen.
	bad := sh(t, dir, `printf 'x\n' >> entries.txt; [ "$(sha256sum < entries.txt | cut -d' ' -f1)" = "$(jq -r .draw.entries_hash voucher.json)" ] && echo "entries: ok"; true`)
	assert.Empty(t, bad)
}
