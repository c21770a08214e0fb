package draw_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/draw"
)

// TestInsiderLearnsNothing: during the entry window an insider reads every
// value of the voucher's keys in Redis, every row of every table in
// PostgreSQL and everything the gateway logged, and tries each value (as
// text, and as the bytes its hex or base64 spells) as the key of the
// published formula, over "<voucher_id>:<entry_id>" and
// "<voucher_id>:<user_id>". None yields any ticket of the draw made after.
func TestInsiderLearnsNothing(t *testing.T) {
	ctx := context.Background()
	rdb := stack.Redis(t)
	pool := stack.NewDatabase(t)
	in := newInstance(t, rdb, pool)
	const id, n = 280401, 40
	_, l := drawVoucher(t, in, id, 2500*time.Millisecond)
	users := make([]int64, n)
	for i := range users {
		users[i] = 50_000 + int64(i)
		_, err := in.draws.Enter(ctx, l, users[i])
		require.NoError(t, err)
	}
	// The drawer's window work, logged like the gateway's.
	drawer := draw.NewDrawer(draw.DrawerConfig{Draws: in.draws, Targets: targetsOf(t, l),
		Log: slog.New(slog.NewJSONHandler(in.log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	drawer.Tick(ctx)

	// Everything an insider can read in the window.
	var values []string
	var keys []string
	iter := rdb.Scan(ctx, 0, "*{v"+strconv.Itoa(id)+"}*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	require.NoError(t, iter.Err())
	require.NotEmpty(t, keys)
	for _, k := range keys {
		values = append(values, k)
		values = append(values, redisValues(t, rdb, k)...)
	}
	tables, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`)
	require.NoError(t, err)
	var names []string
	for tables.Next() {
		var name string
		require.NoError(t, tables.Scan(&name))
		names = append(names, name)
	}
	require.NoError(t, tables.Err())
	require.Contains(t, names, "draw_commitments")
	rows := 0
	for _, name := range names {
		r, err := pool.Query(ctx, `SELECT row_to_json(x)::text FROM "`+name+`" x`)
		require.NoError(t, err)
		for r.Next() {
			var js string
			require.NoError(t, r.Scan(&js))
			values = append(values, js)
			values = append(values, tokens(js)...)
			rows++
		}
		require.NoError(t, r.Err())
	}
	require.Positive(t, rows)
	logged := in.log.String()
	require.NotEmpty(t, logged)
	values = append(values, logged)
	values = append(values, tokens(logged)...)

	untilBegun(t, rdb, l)
	out := drawn(t, in, l, 10, 1)
	require.Len(t, out.Draw.Ranked, n)
	tickets := map[string]bool{}
	for _, e := range out.Draw.Ranked {
		tickets[e.Ticket.String()] = true
	}

	tried := 0
	for _, v := range values {
		for _, key := range keyForms(v) {
			for _, e := range out.Draw.Ranked {
				for _, msg := range []string{strconv.Itoa(id) + ":" + e.EntryID, strconv.Itoa(id) + ":" + strconv.FormatInt(e.UserID, 10)} {
					m := hmac.New(sha256.New, key)
					m.Write([]byte(msg))
					require.False(t, tickets[hex.EncodeToString(m.Sum(nil))], "a value read in the window gives a ticket: %q", v)
					tried++
				}
			}
		}
	}
	t.Logf("%d keys, %d rows, %d log bytes: %d values, %d HMACs tried, none a ticket", len(keys), rows, len(logged), len(values), tried)
}

// redisValues is every value held at key, whatever its type.
func redisValues(t *testing.T, rdb redis.UniversalClient, key string) []string {
	ctx := context.Background()
	typ, err := rdb.Type(ctx, key).Result()
	require.NoError(t, err)
	var out []string
	switch typ {
	case "string":
		v, err := rdb.Get(ctx, key).Result()
		require.NoError(t, err)
		out = append(out, v)
	case "hash":
		m, err := rdb.HGetAll(ctx, key).Result()
		require.NoError(t, err)
		for f, v := range m {
			out = append(out, f, v)
		}
	case "set":
		m, err := rdb.SMembers(ctx, key).Result()
		require.NoError(t, err)
		out = append(out, m...)
	case "zset":
		m, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		require.NoError(t, err)
		for _, z := range m {
			out = append(out, z.Member.(string), strconv.FormatFloat(z.Score, 'f', -1, 64))
		}
	case "list":
		m, err := rdb.LRange(ctx, key, 0, -1).Result()
		require.NoError(t, err)
		out = append(out, m...)
	default:
		t.Fatalf("key %s of type %s", key, typ)
	}
	return out
}

var tokenRe = regexp.MustCompile(`[A-Za-z0-9+/=_:.-]{8,}`)

// tokens are the words of s that could be a secret.
func tokens(s string) []string { return tokenRe.FindAllString(s, -1) }

// keyForms are the keys a value could stand for: its text, and the bytes
// its hex or base64 spells.
func keyForms(v string) [][]byte {
	forms := [][]byte{[]byte(v)}
	s := strings.Trim(v, `"`)
	if b, err := hex.DecodeString(s); err == nil && len(b) > 0 {
		forms = append(forms, b)
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) > 0 {
		forms = append(forms, b)
	}
	return forms
}
