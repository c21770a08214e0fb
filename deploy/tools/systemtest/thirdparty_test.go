package systemtest

import (
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/tools/systemtest/thirdparty"
)

// TestThirdPartyChecksADraw: a draw of 10,000 entries, checked as an
// outsider checks it, by package thirdparty, which imports nothing of the
// project (this test keeps it so): over HTTP it reads the voucher and the
// entry list, verifies the round's signature against the drand chain's own
// info, recomputes entries_hash, every ticket and the winners. Its result
// agrees with what the shoppers were told.
func TestThirdPartyChecksADraw(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("thirdparty/*.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			assert.False(t, strings.HasPrefix(path, "github.com/flashsale/"), "%s imports the project's %s", f, path)
			assert.True(t, !strings.Contains(path, ".") || strings.HasPrefix(path, "github.com/drand/drand/v2/"),
				"%s imports %s: only the standard library and drand's", f, path)
		}
	}

	env := drandEnv(t)
	ts := startSystem(t, env)
	const entries, stock, limit = 10_000, 3000, 2
	begin := time.Now().Add(25 * time.Second)
	created := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "a big draw", "kind": "seckill", "price_cents": 250, "stock": stock, "per_user_limit": limit,
		"begin_at": begin.UTC().Format(time.RFC3339Nano), "end_at": begin.Add(time.Hour).UTC().Format(time.RFC3339),
		"waiting_room": map[string]any{"admit_per_second": 10, "prequeue_seconds": 60, "mode": "draw"},
	}, nil)
	require.Equal(t, http.StatusCreated, created.status, "%s", created.raw)
	vid := created.body["id"].(string)

	path := "/api/v1/vouchers/" + vid + "/queue"
	toks := make([]string, entries)
	entryOf := make([]string, entries)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < entries; i += 16 {
				toks[i] = ts.shopper(t, 7_000_000+int64(i))
				e := ts.do(t, http.MethodPost, path, toks[i], nil, nil)
				if !assert.Equal(t, http.StatusOK, e.status, "%s", e.raw) {
					return
				}
				entryOf[i], _ = e.body["entry_id"].(string)
			}
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())
	require.True(t, time.Now().Before(begin), "10,000 entries before begin_at")

	client := &http.Client{Timeout: 30 * time.Second}
	var res thirdparty.Result
	deadline := time.Now().Add(time.Until(begin) + 30*time.Second)
	for {
		res, err = thirdparty.Check(t.Context(), client, ts.base, env["SECKILL_DRAND_URLS"], vid)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	require.NoError(t, err, "the draw checks out")
	require.Len(t, res.Ranked, entries)
	assert.Equal(t, stock/limit, res.Winners)

	// The outsider's winners are those the shop told: a sample of ranks
	// around the cut-off and at both ends.
	rank := make(map[string]int, entries)
	for i, e := range res.Ranked {
		rank[e] = i
	}
	byEntry := make(map[string]string, entries)
	for i, e := range entryOf {
		byEntry[e] = toks[i]
	}
	for _, r := range []int{0, 1, res.Winners - 2, res.Winners - 1, res.Winners, res.Winners + 1, entries - 1} {
		e := res.Ranked[r]
		q := ts.do(t, http.MethodGet, path, byEntry[e], nil, nil)
		require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
		assert.Equal(t, res.Tickets[e], q.body["ticket"], "rank %d", r)
		want := "won"
		if r >= res.Winners {
			want = "waitlisted"
			assert.EqualValues(t, r-res.Winners+1, q.body["position"], "rank %d", r)
		}
		assert.Equal(t, want, q.body["state"], "rank %d: %s", r, strconv.Itoa(rank[e]))
	}
}
