package draw_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
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

// TestVerifyByHand draws a voucher among 10,000 entries through Redis,
// exports the entry list, and checks the draw as the README tells anyone
// to, with sha256sum and openssl: the seed against the commitment, a
// shopper's ticket and result, and every ticket of the export (the
// recomputation of all 10,000 runs on the rows around the cut-off, 20,000
// processes being too slow for a test; the order and the winners are
// checked on all).
func TestVerifyByHand(t *testing.T) {
	for _, tool := range []string{"bash", "openssl", "sha256sum", "sed", "sort", "awk"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the README's commands need %s", tool)
	}
	ctx := context.Background()
	rdb := plain(t)
	in := newInstance(rdb)
	const id, entries = 270301, 10_000
	l := drawLine(t, rdb, id, 4*time.Second, 0)
	info, err := in.draws.Info(ctx, id)
	require.NoError(t, err)
	for u := range int64(entries) {
		_, err := in.draws.Enter(ctx, l, 800_000+u*7)
		require.NoError(t, err)
		if u == 0 {
			info, err = in.draws.Info(ctx, id)
			require.NoError(t, err)
		}
	}
	untilBegun(t, rdb, l)
	out, err := in.draws.Draw(ctx, l, 2000, 2)
	require.NoError(t, err)
	require.Equal(t, 1000, out.Draw.Winners)
	after, err := in.draws.Info(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, after.Seed)
	require.NotNil(t, after.Cutoff)
	seed, cutoff := after.Seed.String(), after.Cutoff.String()
	t.Logf("voucher %d: %d entries, %d won; commitment %s; seed %s; cutoff %s",
		id, after.Entries, after.Winners, info.Commitment, seed, cutoff)

	dir := t.TempDir()
	var csvOut bytes.Buffer
	require.NoError(t, in.draws.Export(ctx, l, &csvOut))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "entries.csv"), csvOut.Bytes(), 0o600))
	rows, err := csv.NewReader(bytes.NewReader(csvOut.Bytes())).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, entries+1)
	assert.Equal(t, []string{"user_id", "ticket", "result"}, rows[0])

	// One shopper: a winner near the cut-off and a loser just past it.
	for _, row := range [][]string{rows[1000], rows[1001]} {
		ticket := row[1]
		got := sh(t, dir, readmeBlock(t, "one shopper"), "SEED="+seed, "VOUCHER_ID="+strconv.Itoa(id),
			"USER_ID="+row[0], "TICKET="+ticket, "CUTOFF="+cutoff)
		t.Logf("user %s (%s):\n%s", row[0], row[2], got)
		lines := strings.Split(strings.TrimSpace(got), "\n")
		require.Len(t, lines, 3)
		assert.Equal(t, info.Commitment+"  -", lines[0], "sha256sum of the seed is the commitment")
		assert.True(t, strings.HasSuffix(lines[1], "= "+ticket), "openssl's HMAC is the ticket: %s", lines[1])
		assert.Equal(t, row[2] == string(draw.Won), lines[2] == ticket, "the sort tells the result")
	}

	// The whole draw: every ticket and the order on the rows around the
	// cut-off; the order and the winners on all.
	audit := readmeBlock(t, "the whole draw")
	near := append([][]string{rows[0]}, rows[900:1100]...)
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	require.NoError(t, w.WriteAll(near))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "near"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "near", "entries.csv"), b.Bytes(), 0o600))
	env := []string{"SEED=" + seed, "VOUCHER_ID=" + strconv.Itoa(id), "CUTOFF=" + cutoff}
	assert.Equal(t, "sorted\n101 won\n", sh(t, filepath.Join(dir, "near"), audit, env...))
	full := sh(t, dir, "tail -n +2 entries.csv | cut -d, -f2 | LC_ALL=C sort -c && echo sorted\n"+
		audit[strings.Index(audit, "awk"):], env...)
	assert.Equal(t, "sorted\n1000 won\n", full)

	// And the audit can fail: a ticket changed in the export is caught.
	rows[950][1] = rows[951][1]
	b.Reset()
	w = csv.NewWriter(&b)
	require.NoError(t, w.WriteAll(append([][]string{rows[0]}, rows[900:1100]...)))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "near", "entries.csv"), b.Bytes(), 0o600))
	assert.Contains(t, sh(t, filepath.Join(dir, "near"), audit+"\ntrue", env...), "user "+rows[950][0]+": ticket")
}
