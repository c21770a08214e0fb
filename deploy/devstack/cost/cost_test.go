package cost_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/cost"
	"github.com/flashsale/seckill/deploy/devstack/stacktest"
)

var stack *stacktest.Stack

func TestMain(m *testing.M) { stacktest.Main(m, &stack) }

// The difference of two reads counts the commands sent between them, those
// a script runs included, on one server and summed over a cluster's masters.
func TestRedisCountsCommands(t *testing.T) {
	ctx := context.Background()
	script := redis.NewScript(`redis.call('HSET', KEYS[1], 'a', 1); redis.call('PEXPIRE', KEYS[1], 60000); return 1`)
	for _, shape := range stack.RedisShapes(t) {
		t.Run(shape.Name, func(t *testing.T) {
			rdb := stack.Client(t, shape)
			require.NoError(t, script.Load(ctx, rdb).Err())
			// Keys of several slots, so a cluster spreads them.
			keys := []string{"cost:{a}", "cost:{b}", "cost:{c}"}
			before, err := cost.ReadRedis(ctx, rdb)
			require.NoError(t, err)
			for _, k := range keys {
				require.NoError(t, rdb.Set(ctx, k, "v", time.Minute).Err())
				require.NoError(t, rdb.Get(ctx, k).Err())
				require.NoError(t, rdb.Get(ctx, k).Err())
				require.NoError(t, script.EvalSha(ctx, rdb, []string{k + ":h"}).Err())
			}
			after, err := cost.ReadRedis(ctx, rdb)
			require.NoError(t, err)

			d := after.Sub(before)
			assert.EqualValues(t, 3, d.Commands["set"].Calls)
			assert.EqualValues(t, 6, d.Commands["get"].Calls)
			assert.EqualValues(t, 3, d.Commands["evalsha"].Calls)
			assert.EqualValues(t, 3, d.Commands["hset"].Calls, "a script's commands count under their names")
			assert.EqualValues(t, 3, d.Commands["pexpire"].Calls)
			assert.EqualValues(t, 3, d.Scripts())
			// A new cluster client asks for the slots (CLUSTER SLOTS) and
			// the command table (COMMAND); nothing else talks to these
			// servers.
			other := d.Total() - d.Commands["cluster|slots"].Calls - d.Commands["command"].Calls
			assert.EqualValues(t, 18, other, "every command but the reads' INFO: %v", d.Commands)
			assert.Positive(t, d.Commands["evalsha"].Usec+d.Commands["hset"].Usec, "time spent is counted")
			assert.Equal(t, time.Duration(d.Commands["evalsha"].Usec)*time.Microsecond, d.ScriptTime())
			assert.GreaterOrEqual(t, d.CPU, time.Duration(0))
			assert.Positive(t, after.CPU, "a running server has used some CPU")
		})
	}
}

func TestParseCommandStats(t *testing.T) {
	got, err := cost.ParseCommandStats("# Commandstats\r\n" +
		"cmdstat_evalsha:calls=2,usec=55,usec_per_call=27.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setname:calls=1,usec=3,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r\n" +
		"\r\n# CPU\r\nused_cpu_sys:0.5\r\n")
	require.NoError(t, err)
	assert.Equal(t, map[string]cost.Command{"evalsha": {Calls: 2, Usec: 55}, "client|setname": {Calls: 1, Usec: 3}}, got)

	_, err = cost.ParseCommandStats("cmdstat_get:calls=x,usec=1\r\n")
	assert.Error(t, err)
}

func TestParseCPU(t *testing.T) {
	got, err := cost.ParseCPU("# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.500000\r\nused_cpu_sys_children:9.0\r\n")
	require.NoError(t, err)
	assert.Equal(t, 1750*time.Millisecond, got)

	_, err = cost.ParseCPU("# CPU\r\nused_cpu_user:0.5\r\n")
	assert.Error(t, err, "half the figure is not the figure")
}

// The difference of two reads counts the transactions, rows and WAL of the
// work between them, once PostgreSQL has published its backend's counts.
func TestPostgresCountsWrites(t *testing.T) {
	ctx := context.Background()
	url := stack.NewDatabaseURL(t)
	before, err := cost.ReadPostgres(ctx, url)
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	for _, name := range []string{"costa", "costb", "costc", "costd", "coste"} {
		_, err = tx.Exec(ctx, `INSERT INTO users (username, password_hash) VALUES ($1, 'x')`, name)
		require.NoError(t, err)
	}
	_, err = tx.Exec(ctx, `UPDATE users SET password_hash = 'y' WHERE username IN ('costa', 'costb')`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `DELETE FROM users WHERE username = 'costc'`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, conn.Close(ctx)) // the backend publishes its counts as it exits

	var d cost.Postgres
	require.Eventually(t, func() bool {
		after, err := cost.ReadPostgres(ctx, url)
		require.NoError(t, err)
		d = after.Sub(before)
		return d.RowsWritten >= 8
	}, 20*time.Second, 200*time.Millisecond)
	assert.EqualValues(t, 8, d.RowsWritten, "5 inserted, 2 updated, 1 deleted")
	assert.GreaterOrEqual(t, d.Xacts, int64(2), "the work's transaction and the first read's")
	assert.Positive(t, d.WALBytes)
}
