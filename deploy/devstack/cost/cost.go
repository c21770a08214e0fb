// Package cost reads what a stretch of work cost the services under it,
// from the services' own counters: Redis's INFO commandstats and INFO cpu,
// PostgreSQL's pg_stat_database and pg_stat_wal. Read before and after the
// work; Sub gives what the work took. deploy/tools/cmd/bench divides that by the buys a
// crowd made (the cost table of make bench), and the Redis benchmarks of
// seckill/redisstock by their calls.
package cost

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Command is what Redis counted of one command: calls and the time spent in
// them. Commands a script runs are counted under their own names, besides
// the script's EVALSHA.
type Command struct {
	Calls int64
	Usec  int64
}

// Redis is what a Redis server (or every master of a cluster, summed) had
// done when it was read.
type Redis struct {
	Commands map[string]Command // by name in lower case, subcommands as "client|setname"
	CPU      time.Duration      // used_cpu_sys + used_cpu_user
}

// Reading INFO is itself a command: the reader's own calls are left out of
// Total.
const infoCommand = "info"

// ReadRedis reads INFO commandstats and INFO cpu; on a Redis Cluster client
// it sums every master.
func ReadRedis(ctx context.Context, rdb redis.UniversalClient) (Redis, error) {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		sum := Redis{Commands: map[string]Command{}}
		err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			r, err := readOne(ctx, node)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			sum = sum.add(r)
			return nil
		})
		return sum, err
	}
	return readOne(ctx, rdb)
}

func readOne(ctx context.Context, rdb redis.Cmdable) (Redis, error) {
	// One INFO with both sections, so the reader counts one call.
	info, err := rdb.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return Redis{}, fmt.Errorf("cost: INFO: %w", err)
	}
	cmds, err := ParseCommandStats(info)
	if err != nil {
		return Redis{}, err
	}
	cpu, err := ParseCPU(info)
	if err != nil {
		return Redis{}, err
	}
	return Redis{Commands: cmds, CPU: cpu}, nil
}

// ParseCommandStats reads the cmdstat_ lines of INFO commandstats:
//
//	cmdstat_evalsha:calls=2,usec=55,usec_per_call=27.50,rejected_calls=0,failed_calls=0
func ParseCommandStats(info string) (map[string]Command, error) {
	out := map[string]Command{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, fields, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		name, ok = strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		var c Command
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			var dst *int64
			switch k {
			case "calls":
				dst = &c.Calls
			case "usec":
				dst = &c.Usec
			default:
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("cost: INFO commandstats %s: %s: %w", name, k, err)
			}
			*dst = n
		}
		out[strings.ToLower(name)] = c
	}
	return out, sc.Err()
}

// ParseCPU reads used_cpu_sys + used_cpu_user of INFO cpu: the CPU of the
// whole server process, its background threads included.
func ParseCPU(info string) (time.Duration, error) {
	var sum float64
	seen := 0
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("cost: INFO cpu %s: %w", k, err)
		}
		sum += f
		seen++
	}
	if seen != 2 {
		return 0, fmt.Errorf("cost: INFO cpu without used_cpu_sys and used_cpu_user")
	}
	return time.Duration(sum * float64(time.Second)), sc.Err()
}

// Sub is what was done between before and r.
func (r Redis) Sub(before Redis) Redis {
	d := Redis{Commands: map[string]Command{}, CPU: r.CPU - before.CPU}
	for name, c := range r.Commands {
		b := before.Commands[name]
		if c.Calls != b.Calls {
			d.Commands[name] = Command{Calls: c.Calls - b.Calls, Usec: c.Usec - b.Usec}
		}
	}
	return d
}

func (r Redis) add(o Redis) Redis {
	sum := Redis{Commands: maps.Clone(r.Commands), CPU: r.CPU + o.CPU}
	if sum.Commands == nil {
		sum.Commands = map[string]Command{}
	}
	for name, c := range o.Commands {
		s := sum.Commands[name]
		sum.Commands[name] = Command{Calls: s.Calls + c.Calls, Usec: s.Usec + c.Usec}
	}
	return sum
}

// Total is the calls of every command but the reader's own INFO.
func (r Redis) Total() int64 {
	var n int64
	for name, c := range r.Commands {
		if name != infoCommand {
			n += c.Calls
		}
	}
	return n
}

// scriptCommands are the commands that run a script.
var scriptCommands = []string{"evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro"}

// Scripts is the script calls: EVALSHA, EVAL and their read-only forms.
func (r Redis) Scripts() int64 {
	var n int64
	for _, name := range scriptCommands {
		n += r.Commands[name].Calls
	}
	return n
}

// ScriptTime is the time Redis measured around its scripts, their own
// commands included. Redis measures it by the wall clock: on a machine
// whose cores are busy it includes the waits for one, and may exceed the
// CPU; on a quiet one it is the scripts' share of the CPU.
func (r Redis) ScriptTime() time.Duration {
	var us int64
	for _, name := range scriptCommands {
		us += r.Commands[name].Usec
	}
	return time.Duration(us) * time.Microsecond
}

// Postgres is what one PostgreSQL database (and its cluster's WAL) had
// done when it was read.
type Postgres struct {
	Xacts       int64 // xact_commit + xact_rollback of the database
	RowsWritten int64 // tup_inserted + tup_updated + tup_deleted of the database
	WALBytes    int64 // pg_stat_wal.wal_bytes, the whole cluster's
}

// ReadPostgres reads pg_stat_database of url's database and pg_stat_wal.
//
// PostgreSQL adds a backend's counts to these views at most once a second
// while it is busy and within ten seconds once it is idle: let the work's
// connections settle that long before the read after it. Each read runs
// on a connection of its own, closed at once (a backend flushes its counts
// when it exits), so each read adds one transaction to the next window.
func ReadPostgres(ctx context.Context, url string) (Postgres, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return Postgres{}, fmt.Errorf("cost: pg_stat_database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var p Postgres
	err = conn.QueryRow(ctx, `
		SELECT d.xact_commit + d.xact_rollback, d.tup_inserted + d.tup_updated + d.tup_deleted, w.wal_bytes::bigint
		FROM pg_stat_database d, pg_stat_wal w
		WHERE d.datname = current_database()`).Scan(&p.Xacts, &p.RowsWritten, &p.WALBytes)
	if err != nil {
		return Postgres{}, fmt.Errorf("cost: pg_stat_database, pg_stat_wal: %w", err)
	}
	return p, nil
}

// Sub is what was done between before and p.
func (p Postgres) Sub(before Postgres) Postgres {
	return Postgres{Xacts: p.Xacts - before.Xacts, RowsWritten: p.RowsWritten - before.RowsWritten,
		WALBytes: p.WALBytes - before.WALBytes}
}
