package edge_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// solve asks path for a challenge and answers it: the challenge_id and the
// nonce.
func (g *liveGateway) solve(t *testing.T, path, addr string) (id, nonce string) {
	t.Helper()
	status, _, raw := g.do(t, http.MethodGet, path, "", "", addr)
	require.Equal(t, http.StatusOK, status, raw)
	var ch struct {
		ChallengeID    string `json:"challenge_id"`
		Salt           string `json:"salt"`
		DifficultyBits int    `json:"difficulty_bits"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &ch))
	return ch.ChallengeID, edge.Solve(ch.Salt, ch.DifficultyBits)
}

// Joining the line of a pow voucher takes a solved challenge, as buying
// does: none or a wrong one is 400 challenge_invalid, a solved one joins
// (once: it is spent), and a shopper already in line keeps the place
// without one. Registration with SECKILL_REGISTER_CHALLENGE=pow takes a
// challenge asked with purpose=register, which a voucher's does not
// replace, nor the other way round.
func TestProofOfWorkToJoinAndRegister(t *testing.T) {
	t.Parallel()
	g := newLiveGateway(t, edge.Config{PoW: edge.PoWConfig{BaseBits: 6, MaxBits: 8}}, func(c *gateway.Config, d *gateway.Deps) {
		c.RegisterChallenge = gateway.RegisterPoW
		d.Room = waitroom.New(waitroom.Config{Redis: stack.Redis(t), Secret: []byte("pow-join-room-secret")})
	})
	// Its own voucher ids: the package's tests share one Redis.
	pgstoretest.SpreadVoucherIDs(t, g.pool)
	begin := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	end := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	status, _, raw := g.do(t, http.MethodPost, "/api/v1/admin/vouchers", `{"title":"pow line","kind":"seckill","price_cents":100,`+
		`"stock":5,"per_user_limit":1,"begin_at":"`+begin+`","end_at":"`+end+`","challenge":"pow","waiting_room":{"admit_per_second":5}}`, catalogAdmin, "")
	require.Equal(t, http.StatusCreated, status, raw)
	var v struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(raw), &v))
	join := "/api/v1/vouchers/" + v.ID + "/queue"
	token := g.token(t, 51)
	const addr = "10.3.0.1"

	for _, body := range []string{`{}`, `{"challenge_id":"00","challenge_answer":"1"}`} {
		status, _, raw = g.do(t, http.MethodPost, join, body, token, addr)
		require.Equal(t, http.StatusBadRequest, status, raw)
		require.Contains(t, raw, `"challenge_invalid"`, body)
	}
	id, nonce := g.solve(t, "/api/v1/challenges?voucher_id="+v.ID, addr)
	solved := `{"challenge_id":"` + id + `","challenge_answer":"` + nonce + `"}`
	status, _, raw = g.do(t, http.MethodPost, join, solved, token, addr)
	require.Equal(t, http.StatusOK, status, raw)
	require.Contains(t, raw, `"state":"waiting"`)
	status, _, raw = g.do(t, http.MethodPost, join, `{}`, token, addr)
	require.Equal(t, http.StatusOK, status, "in line: the place is kept without a challenge: %s", raw)
	status, _, raw = g.do(t, http.MethodPost, join, solved, g.token(t, 52), addr)
	require.Equal(t, http.StatusBadRequest, status, "spent: %s", raw)
	require.Contains(t, raw, `"challenge_invalid"`)

	register := func(user, extra string) (int, string) {
		status, _, raw := g.do(t, http.MethodPost, "/api/v1/users", `{"username":"`+user+`","password":"correct horse battery"`+extra+`}`, "", addr)
		return status, raw
	}
	status, raw = register("pow_nobody", ``)
	require.Equal(t, http.StatusBadRequest, status, raw)
	require.Contains(t, raw, `"challenge_invalid"`)
	id, nonce = g.solve(t, "/api/v1/challenges?voucher_id="+v.ID, addr)
	status, raw = register("pow_voucher", `,"challenge_id":"`+id+`","challenge_answer":"`+nonce+`"`)
	require.Equal(t, http.StatusBadRequest, status, "a voucher's challenge registers nobody: %s", raw)
	id, nonce = g.solve(t, "/api/v1/challenges?purpose=register", addr)
	status, raw = register("pow_ada", `,"challenge_id":"`+id+`","challenge_answer":"`+nonce+`"`)
	require.Equal(t, http.StatusCreated, status, raw)
	require.True(t, strings.Contains(raw, `"username":"pow_ada"`), raw)
	status, raw = register("pow_bob", `,"challenge_id":"`+id+`","challenge_answer":"`+nonce+`"`)
	require.Equal(t, http.StatusBadRequest, status, "used: %s", raw)

	for path, want := range map[string]int{
		"/api/v1/challenges?purpose=login":                       http.StatusBadRequest,
		"/api/v1/challenges?purpose=register&voucher_id=" + v.ID: http.StatusConflict,
	} {
		status, _, raw := g.do(t, http.MethodGet, path, "", "", addr)
		require.Equal(t, want, status, "%s: %s", path, raw)
	}
	// An answer that cannot be a nonce is the client's mistake wherever it
	// is sent, before anything is judged or spent.
	status, raw = register("pow_eve", `,"challenge_id":"`+id+`","challenge_answer":"12a"`)
	require.Equal(t, http.StatusBadRequest, status, raw)
	require.Contains(t, raw, `"invalid_input"`)
	status, _, raw = g.do(t, http.MethodPost, join, `{"challenge_id":"x","challenge_answer":"\u0084"}`, g.token(t, 54), addr)
	require.Equal(t, http.StatusBadRequest, status, raw)
	require.Contains(t, raw, `"invalid_input"`)
	// A register challenge cannot join the line either.
	id, nonce = g.solve(t, "/api/v1/challenges?purpose=register", addr)
	status, _, raw = g.do(t, http.MethodPost, join, `{"challenge_id":"`+id+`","challenge_answer":"`+nonce+`"}`, g.token(t, 53), addr)
	require.Equal(t, http.StatusBadRequest, status, raw)
}

// Where registering takes no proof of work, its challenge is 409.
func TestRegisterChallengeOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	g := newLiveGateway(t, edge.Config{PoW: edge.PoWConfig{BaseBits: 6, MaxBits: 8}})
	status, _, raw := g.do(t, http.MethodGet, "/api/v1/challenges?purpose=register", "", "", "10.3.0.2")
	require.Equal(t, http.StatusConflict, status, raw)
}
