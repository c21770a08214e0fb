package app

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestMaskURL: every password a connection string can carry is masked,
// whatever characters it holds, and the rest (which server, which
// database) stays as written.
func TestMaskURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// Nothing to hide.
		{"redis://db:6379/0", "redis://db:6379/0"},
		{"redis://default@db:6379", "redis://default@db:6379"},
		{"postgres://db:5432/seckill?sslmode=disable", "postgres://db:5432/seckill?sslmode=disable"},
		{"host=db dbname=seckill", "host=db dbname=seckill"},
		{"", ""},
		// Userinfo.
		{"redis://default:Zq9s3cret@db:6379/0", "redis://default:****@db:6379/0"},
		{"rediss://default:Zq9s3cret@db:6380", "rediss://default:****@db:6380"},
		{"redis://:Zq9s3cret@db:6379", "redis://:****@db:6379"},
		{"REDIS://default:Zq9s3cret@db", "REDIS://default:****@db"},
		{"postgres://app:Zq9s3cret@db:5432/seckill", "postgres://app:****@db:5432/seckill"},
		{"postgresql://app:Zq9s3cret@db/seckill?sslmode=require", "postgresql://app:****@db/seckill?sslmode=require"},
		{"postgres://app:Zq9%2Fs3cret@db/seckill", "postgres://app:****@db/seckill"},
		{"redis://app:Zq9s3cret@10.0.0.1:6379?addr=10.0.0.2:6379", "redis://app:****@10.0.0.1:6379?addr=10.0.0.2:6379"},
		// Reserved characters written as they are (url.Parse fails or
		// reads another host): the userinfo still ends at the last '@'.
		{"redis://default:Zq9/s3cret@db:6379/0", "redis://default:****@db:6379/0"},
		{"redis://default:Zq9?s3cret@db:6379", "redis://default:****@db:6379"},
		{"redis://default:Zq9#s3cret@db:6379", "redis://default:****@db:6379"},
		{"redis://default:Zq9@s3cret@db:6379", "redis://default:****@db:6379"},
		{"redis://default:Zq9:s3cret@db:6379", "redis://default:****@db:6379"},
		{"redis://default:123/s3cret@db:6379", "redis://default:****@db:6379"},
		{"postgresql://app:Z/q?9#s@3:c%ret@db/seckill", "postgresql://app:****@db/seckill"},
		{"redis://default:Zq9 s3cret@db", "redis://default:****@db"},
		// Query parameters, whatever their case or escaping.
		{"postgres://db/seckill?sslmode=require&password=Zq9s3cret", "postgres://db/seckill?sslmode=require&password=****"},
		{"postgres://db/seckill?PassWord=Zq9s3cret&sslmode=require", "postgres://db/seckill?PassWord=****&sslmode=require"},
		{"postgres://db/seckill?sslpassword=Zq9s3cret", "postgres://db/seckill?sslpassword=****"},
		{"postgres://db/seckill?pass%77ord=Zq9s3cret", "postgres://db/seckill?pass%77ord=****"},
		{"redis://db:6379?password=Zq9s3cret", "redis://db:6379?password=****"},
		{"redis://u:Zq9s3cret@db:6379?password=Zq9s3cret", "redis://u:****@db:6379?password=****"},
		// Unix sockets.
		{"unix://:Zq9s3cret@/var/run/redis.sock?db=1", "unix://:****@/var/run/redis.sock?db=1"},
		{"unix:///var/run/redis.sock?db=1&password=Zq9s3cret", "unix:///var/run/redis.sock?db=1&password=****"},
		{"postgres://app:Zq9s3cret@%2Fvar%2Frun%2Fpostgresql/seckill", "postgres://app:****@%2Fvar%2Frun%2Fpostgresql/seckill"},
		{"postgres:///seckill?host=/var/run/postgresql&password=Zq9s3cret", "postgres:///seckill?host=/var/run/postgresql&password=****"},
		// Keyword/value DSNs.
		{"host=db user=app password=Zq9s3cret dbname=seckill", "host=db user=app password=**** dbname=seckill"},
		{"host=db PASSWORD = Zq9s3cret dbname=seckill", "host=db PASSWORD = **** dbname=seckill"},
		{`host=db password='Zq9 s3\'cret' dbname=seckill`, "host=db password=**** dbname=seckill"},
		{"host=db password='Zq9 s3cret", "host=db password=****"},
		{"host=db sslpassword=Zq9s3cret", "host=db sslpassword=****"},
		{"host=db password=Zq9://s3cret@db", "host=db password=****"},
		{"host=/var/run/postgresql password=Zq9s3cret", "host=/var/run/postgresql password=****"},
		// The forms masked before reserved characters were.
		{"postgres://app:s3cret@db:5432/seckill", "postgres://app:****@db:5432/seckill"},
		{"postgres://app:s3c@ret@db:5432/seckill", "postgres://app:****@db:5432/seckill"},
		{"postgres://app@db/seckill", "postgres://app@db/seckill"},
		{"postgres://db/seckill?user=app&password=s3cret&sslmode=disable", "postgres://db/seckill?user=app&password=****&sslmode=disable"},
		{"postgresql://db/seckill?PASSWORD=s3cret", "postgresql://db/seckill?PASSWORD=****"},
		{"postgres://app:s3cret@db/seckill?sslpassword=s3cret#x", "postgres://app:****@db/seckill?sslpassword=****#x"},
		{"redis://:s3cret@cache:6379/0", "redis://:****@cache:6379/0"},
		{"redis://cache:6379/0?password=s3cret", "redis://cache:6379/0?password=****"},
		{"host=db password = s3cret dbname=seckill", "host=db password = **** dbname=seckill"},
		{`host=db password='s3cret 2\' x' dbname=seckill`, "host=db password=**** dbname=seckill"},
	} {
		got := maskURL(c.in)
		require.Equal(t, c.want, got, "%s", c.in)
		require.NotContains(t, got, "s3cret", c.in)
	}
}

// TestURLErrorsHideThePassword: the errors the Redis and PostgreSQL
// clients give for a connection string they cannot read quote it (Go's
// url.Error does, and pgx's wraps one); told through urlError, they name
// the variable and keep the reason, never the password.
func TestURLErrorsHideThePassword(t *testing.T) {
	parseRedis := func(raw string) error { _, err := redis.ParseURL(raw); return err }
	parsePostgres := func(raw string) error { _, err := pgxpool.ParseConfig(raw); return err }
	quoted := 0
	for _, c := range []struct {
		variable, raw string
		parse         func(string) error
	}{
		{"SECKILL_REDIS_URL", "redis://default:Zq9/s3cret@db:6379/0", parseRedis},
		{"SECKILL_REDIS_URL", "redis://default:Zq9s3cret@db:port/0", parseRedis},
		{"SECKILL_REDIS_URL", "rediss://default:Zq9?s3cret@db", parseRedis},
		{"SECKILL_REDIS_URL", "unix://:Zq9s3cret@/var/run/redis.sock?db=x", parseRedis},
		{"SECKILL_REDIS_URL", "redis://default:Zq9\x7fs3cret@db", parseRedis},
		{"SECKILL_DATABASE_URL", "postgres://app:Zq9/s3cret@db/seckill", parsePostgres},
		{"SECKILL_DATABASE_URL", "postgresql://app:Zq9s3cret@db:port/seckill", parsePostgres},
		{"SECKILL_DATABASE_URL", "postgres://app:Zq9s3cret@db/seckill?connect_timeout=soon", parsePostgres},
		{"SECKILL_DATABASE_URL", "host=db password=Zq9s3cret port=port", parsePostgres},
		{"SECKILL_DATABASE_URL", "host=db password='Zq9 s3cret", parsePostgres},
	} {
		err := c.parse(c.raw)
		require.Error(t, err, c.raw)
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), fmt.Sprintf("%q", c.raw)) {
			quoted++
		}
		read := readPostgres
		if c.variable == "SECKILL_REDIS_URL" {
			read = readRedisURL
		}
		wrapped := urlError(c.variable, c.raw, err, read)
		require.NotContains(t, wrapped.Error(), "s3cret", c.raw)
		require.NotContains(t, wrapped.Error(), "Zq9", "%s: not even a piece of it", c.raw)
		require.Contains(t, wrapped.Error(), c.variable, c.raw)
		require.ErrorIs(t, wrapped, err, "the cause stays in the chain")
	}
	require.GreaterOrEqual(t, quoted, 3, "the clients' own errors quote the string")
	var ue *url.Error
	_, err := redis.ParseURL("redis://default:Zq9/s3cret@db:6379/0")
	require.ErrorAs(t, urlError("SECKILL_REDIS_URL", "redis://default:Zq9/s3cret@db:6379/0", err, readRedisURL), &ue)
}

// TestStartUpErrorsHideThePassword runs the real start-up (serve, migrate,
// reconcile) with connection strings the clients cannot read or reach, and
// reads everything it would show: the log on stderr and the fatal error
// main prints. The password is in neither; the variable at fault is named.
func TestStartUpErrorsHideThePassword(t *testing.T) {
	const secret = "Zq9/s3cret"
	base := map[string]string{
		"SECKILL_REDIS_URL":     stack.RedisURL,
		"SECKILL_DATABASE_URL":  stack.DatabaseURL,
		"SECKILL_KAFKA_BROKERS": stack.KafkaBrokers[0],
		"SECKILL_JWT_SECRET":    "test-secret-0123456789abcdefghijklmnopqrstuvwxyz",
		"SECKILL_ADMIN_TOKEN":   "admin-token",
		"SECKILL_ROLES":         "worker",
	}
	for _, c := range []struct {
		name  string
		args  []string
		env   map[string]string
		names string // the variable the error must name
	}{
		{"serve, Redis URL with a reserved character", []string{"serve"},
			map[string]string{"SECKILL_REDIS_URL": "redis://default:" + secret + "@127.0.0.1:6379/0"}, "SECKILL_REDIS_URL"},
		{"serve, rediss URL with a bad port", []string{"serve"},
			map[string]string{"SECKILL_REDIS_URL": "rediss://default:Zq9s3cret@127.0.0.1:port"}, "SECKILL_REDIS_URL"},
		{"serve, Redis that does not answer", []string{"serve"},
			map[string]string{"SECKILL_REDIS_URL": "redis://default:Zq9s3cret@127.0.0.1:1/0"}, "redis"},
		{"serve, cluster URL with a reserved character", []string{"serve"},
			map[string]string{"SECKILL_REDIS_CLUSTER_ADDRS": "redis://default:" + secret + "@127.0.0.1:6379?addr=127.0.0.1:6380"}, "SECKILL_REDIS_CLUSTER_ADDRS"},
		{"serve, PostgreSQL URL with a reserved character", []string{"serve"},
			map[string]string{"SECKILL_DATABASE_URL": "postgres://app:" + secret + "@127.0.0.1/seckill"}, "SECKILL_DATABASE_URL"},
		{"serve, PostgreSQL DSN with a bad port", []string{"serve"},
			map[string]string{"SECKILL_DATABASE_URL": "host=127.0.0.1 password=Zq9s3cret port=port"}, "SECKILL_DATABASE_URL"},
		{"migrate, PostgreSQL URL with a reserved character", []string{"migrate"},
			map[string]string{"SECKILL_DATABASE_URL": "postgresql://app:" + secret + "@127.0.0.1/seckill"}, "SECKILL_DATABASE_URL"},
		{"reconcile, Redis URL with a reserved character", []string{"reconcile"},
			map[string]string{"SECKILL_REDIS_URL": "redis://default:" + secret + "@127.0.0.1:6379/0"}, "SECKILL_REDIS_URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range c.env {
				env[k] = v
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var stdout, stderr strings.Builder
			err := Run(ctx, c.args, func(k string) string { return env[k] }, &stdout, &stderr)
			require.Error(t, err)
			shown := stdout.String() + stderr.String() + "seckill: " + err.Error()
			require.NotContains(t, shown, "s3cret", "what the process shows")
			require.NotContains(t, shown, "Zq9", "not even a piece of the password")
			require.NotContains(t, shown, url.PathEscape(secret))
			require.Contains(t, err.Error(), c.names, "the error names what to fix")
			require.False(t, errors.Is(err, context.DeadlineExceeded), "it failed on the URL, not on the deadline: %v", err)
		})
	}
}

// TestURLErrorsHideShortPasswords: a password of one or two characters
// with a character the client cuts a URL at ('/', '?', '#' for go-redis,
// which reads a URL as net/url does; '/' for pgx, which reads it as libpq
// does) leaves its pieces in a port, a path, a database or a host to dial;
// the message says that the password is at fault and how to write it, and
// shows no piece of it. One the client reads whole is not shown either,
// nor one read whole when the fault is elsewhere in the string.
func TestURLErrorsHideShortPasswords(t *testing.T) {
	// fail is what the start-up gives for raw: the client's error, or,
	// for a string it reads (as written or not), the dial's, which names
	// what it dials as dialRedis and dialPool do.
	redisFail := func(raw string) error {
		opts, err := redis.ParseURL(raw)
		if err != nil {
			return err
		}
		return fmt.Errorf("redis at %s does not answer: dial tcp %s: connect: connection refused", opts.Addr, opts.Addr)
	}
	postgresFail := func(raw string) error {
		pcfg, err := pgxpool.ParseConfig(raw)
		if err != nil {
			return err
		}
		c := pcfg.ConnConfig
		return fmt.Errorf("postgresql at %s does not answer: failed to connect to `user=%s database=%s`: %s:%d: connect: connection refused", c.Host, c.User, c.Database, c.Host, c.Port)
	}
	type form struct {
		variable, url string
		fail          func(string) error
		read          readConn
		cuts          string // where the client ends the userinfo early
	}
	forms := []form{
		{"SECKILL_REDIS_URL", "redis://default:%s@db:6379/0", redisFail, readRedisURL, "/?#"},
		{"SECKILL_REDIS_URL", "rediss://:%s@db", redisFail, readRedisURL, "/?#"},
		{"SECKILL_DATABASE_URL", "postgres://app:%s@db:5432/seckill", postgresFail, readPostgres, "/"},
		{"SECKILL_DATABASE_URL", "postgresql://app:%s@db/seckill?sslmode=disable", postgresFail, readPostgres, "/"},
	}
	// The passwords' letters, J and W, are in no message of the
	// variables, the clients or the fix; the digit is looked for where a
	// misread puts it, as a port.
	for _, pw := range []string{"/", "?", "#", "J/", "/J", "J?", "?J", "J#", "#J", "1/", "/1"} {
		for _, f := range forms {
			raw := fmt.Sprintf(f.url, pw)
			wrapped := urlError(f.variable, raw, f.fail(raw), f.read).Error()
			require.NotContains(t, wrapped, "J", "%s: %s", raw, wrapped)
			require.NotContains(t, wrapped, ":1", "%s: %s", raw, wrapped)
			require.NotContains(t, wrapped, raw, "%s: %s", raw, wrapped)
			require.True(t, strings.HasPrefix(wrapped, f.variable+": "), "%s: %s", raw, wrapped)
			if strings.ContainsAny(pw, f.cuts) {
				require.Contains(t, wrapped, maskURL(raw)+": the password holds a character that must be percent-encoded: '/', '?', '#', '@' or ':'",
					"%s: the string as read, the password masked, what is wrong and what to do: %s", raw, wrapped)
			} else {
				require.Contains(t, wrapped, "postgresql at db does not answer", "%s: read whole, the dial's error is told: %s", raw, wrapped)
			}
		}
	}
	// Read as written, the fault elsewhere (a port that is not a number):
	// the message tells that fault and holds no piece of the password,
	// even where the client would quote one (an escape that is not one).
	for _, pw := range []string{"J", "JW", "%J", "J%W"} {
		for _, f := range []form{
			{"SECKILL_REDIS_URL", "redis://default:%s@db:port/0", redisFail, readRedisURL, ""},
			{"SECKILL_DATABASE_URL", "postgres://app:%s@db:port/seckill", postgresFail, readPostgres, ""},
		} {
			raw := fmt.Sprintf(f.url, pw)
			err := f.fail(raw)
			require.Error(t, err, raw)
			wrapped := urlError(f.variable, raw, err, f.read)
			require.NotContains(t, wrapped.Error(), "J", "%s: %s", raw, wrapped)
			require.NotContains(t, wrapped.Error(), "W", "%s: %s", raw, wrapped)
			require.Contains(t, wrapped.Error(), "port", "%s: the fault is named: %s", raw, wrapped)
			require.ErrorIs(t, wrapped, err, "the cause stays in the chain")
		}
	}
}
