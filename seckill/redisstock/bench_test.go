package redisstock_test

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/cost"
	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/hoard"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// BenchmarkReserve is the buy path's Redis call: reserve.lua by EVALSHA,
// parallel, every call a new user, never sold out. "keyed" is the
// batched Store with an Idempotency-Key on every call, as the shoppers
// of the load tool send. It runs 25 goroutines per
// GOMAXPROCS (50 on two cores) to load Redis like redis-benchmark's default
// 50 clients, the ceiling to compare with. "batched" is the Store as the
// gateway builds it (concurrent reservations of a bucket share one script
// call, batch.go); "group-commit" sends one reserve.lua call per
// reservation, sharing only round trips (see GroupCommit); "round-trip-each"
// sends every call on its own, as before both.
func BenchmarkReserve(b *testing.B) {
	ctx := context.Background()
	bu, v := onSaleForever(b)
	for _, c := range []struct {
		name  string
		store *redisstock.Store
		keyed bool
	}{
		{"round-trip-each", redisstock.New(redisstock.Config{Redis: bu.rdb, NoGroupCommit: true, ReserveBatch: 1}), false},
		{"group-commit", redisstock.New(redisstock.Config{Redis: bu.rdb, ReserveBatch: 1}), false},
		{"batched", bu.store, false},
		{"keyed", bu.store, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(25)
			client, server := cpuTime(b), redisCost(b, bu.rdb)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := ""
					if c.keyed {
						key = "k"
					}
					if _, err := c.store.Reserve(ctx, res(v, next(), 1, key)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			// CPU per call, this process's and Redis's: on a shared machine
			// these move far less than the wall-clock time per call.
			b.ReportMetric(float64((cpuTime(b)-client).Microseconds())/float64(b.N), "client-cpu-µs/op")
			reportRedis(b, redisCost(b, bu.rdb).Sub(server))
		})
	}
}

// BenchmarkReserveBatch is the capacity of one Redis core for one voucher:
// reserve_batch.lua alone, by EVALSHA, on the package's redis-server, at a
// fixed number of buys per call, every buy a new user, never sold out. Four
// clients keep the server busy. An op is one reservation. redis-cpu-µs/op
// is the server's CPU (INFO cpu) per reservation, script-µs/op the script's
// own time (INFO commandstats), and ceiling-res/s the reservations one core
// holds at that CPU: the figure a gateway's batches of that size approach.
func BenchmarkReserveBatch(b *testing.B) {
	ctx := context.Background()
	bu, v := onSaleForever(b)
	k := redisstock.VoucherKeys(v.ID)
	keys := []string{k.Meta, k.Ledger, k.Pending}
	script := redis.NewScript(lua.ReserveBatch)
	require.NoError(b, script.Load(ctx, bu.rdb).Err())
	for _, n := range []int{1, 8, 32, 128} {
		b.Run(fmt.Sprintf("batch-%d", n), func(b *testing.B) {
			calls := max(b.N/n, 1)
			server := redisCost(b, bu.rdb)
			start := time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			for c := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					args := make([]any, 3+4*n)
					args[0], args[1], args[2] = n, 0, 1 // no rate limit
					for i := c; i < calls; i += 4 {
						for j := range n {
							args[3+4*j], args[4+4*j], args[5+4*j], args[6+4*j] = next(), next(), 1, "k"
						}
						reply, err := script.EvalSha(ctx, bu.rdb, keys, args...).Slice()
						for j := 0; err == nil && j < len(reply); j += 3 {
							if reply[j] != int64(0) {
								err = fmt.Errorf("buy %d: code %v", j/3, reply[j])
							}
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			held := float64(calls * n)
			d := redisCost(b, bu.rdb).Sub(server)
			cpu := float64(d.CPU.Microseconds()) / held
			b.ReportMetric(held/time.Since(start).Seconds(), "res/s")
			b.ReportMetric(cpu, "redis-cpu-µs/op")
			b.ReportMetric(float64(d.Commands["evalsha"].Usec)/held, "script-µs/op")
			b.ReportMetric(float64(d.Total())/held, "redis-cmds/op")
			if cpu > 0 {
				b.ReportMetric(1e6/cpu, "ceiling-res/s")
			}
		})
	}
}

// onSaleForever puts on sale, on the package's redis-server, a voucher of
// the most stock a voucher may have and a limit of one, for benchmarks
// whose every call is a new user.
func onSaleForever(b *testing.B) (bundle, seckill.Voucher) {
	bu := setup(b)
	now := serverNow(b, bu.rdb)
	v := voucher(seckill.MaxStock, 1, now.Add(-time.Minute), now.Add(time.Hour))
	require.NoError(b, bu.store.Warm(context.Background(), v))
	b.Cleanup(func() { _ = bu.store.Unwarm(context.Background(), v.ID) })
	return bu, v
}

// redisCost reads the Redis server's counters (every master's, summed, on a
// cluster): its CPU and commands.
func redisCost(b *testing.B, rdb redis.UniversalClient) cost.Redis {
	r, err := cost.ReadRedis(context.Background(), rdb)
	require.NoError(b, err)
	return r
}

// reportRedis reports what Redis spent per reservation: CPU (INFO cpu) and
// commands, a script's own included, and script calls (INFO commandstats).
func reportRedis(b *testing.B, d cost.Redis) {
	b.ReportMetric(float64(d.CPU.Microseconds())/float64(b.N), "redis-cpu-µs/op")
	b.ReportMetric(float64(d.Total())/float64(b.N), "redis-cmds/op")
	b.ReportMetric(float64(d.Scripts())/float64(b.N), "scripts/op")
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBuyRedis is an accepted buy's Redis calls before its event, in
// the buy's order: the per-user limit (redis_rate's GCRA, as gateway/edge
// asks it, through the same group commit), the unpaid strikes' read
// (seckill/hoard) and reserve.lua, keyed; every call a new user, never
// sold out. Its Redis CPU less BenchmarkReserve's keyed case is what the
// limit and the strikes cost a buy. "group-commit" reads the strikes
// through the group commit, as the gateway did; "strikes-round-trip-each"
// on the plain client, as before that. "limit-in-script" is the gateway's
// buy now: the limit judged inside the batched reservation
// (Config.UserLimit), the strikes read through the group commit.
func BenchmarkBuyRedis(b *testing.B) {
	ctx := context.Background()
	bu, v := onSaleForever(b)
	lim := redis_rate.NewLimiter(redisstock.GroupCommit(bu.rdb))
	limit := redis_rate.Limit{Rate: 5, Burst: 5, Period: time.Second}
	inScript := redisstock.New(redisstock.Config{Redis: bu.rdb, UserLimit: redisstock.UserLimit{Rate: 5, Burst: 5}})
	for _, c := range []struct {
		name  string
		hot   redis.Cmdable
		store *redisstock.Store // judges the limit; nil: redis_rate does
	}{
		{"strikes-round-trip-each", nil, nil},
		{"group-commit", redisstock.GroupCommit(bu.rdb), nil},
		{"limit-in-script", redisstock.GroupCommit(bu.rdb), inScript},
	} {
		b.Run(c.name, func(b *testing.B) {
			strikes := hoard.New(hoard.Config{Redis: bu.rdb, Hot: c.hot, Limit: 3})
			store := cmp.Or(c.store, bu.store)
			b.ReportAllocs()
			b.SetParallelism(25)
			server := redisCost(b, bu.rdb)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					user := next()
					var err error
					if c.store == nil {
						allowed, lerr := lim.Allow(ctx, "seckill:rl:user:"+strconv.FormatInt(user, 10), limit)
						if err = lerr; err == nil && allowed.Allowed == 0 {
							err = fmt.Errorf("user %d rate limited", user)
						}
					}
					if err == nil {
						err = strikes.Check(ctx, user)
					}
					if err == nil {
						_, err = store.Reserve(ctx, res(v, user, 1, "k"))
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			reportRedis(b, redisCost(b, bu.rdb).Sub(server))
		})
	}
}

// BenchmarkReserveSplit is one hot voucher on the package's Redis Cluster of
// three masters: all its stock in one bucket (one slot, so one master's core)
// against 8 buckets (spread over the masters), 25 goroutines per GOMAXPROCS,
// every call a new user, never sold out. Compare the ops/s of the two in the
// same run; on a machine whose cores the masters share, the ratio is what
// spreading gains there, not what separate hosts would. The Redis CPU and
// commands per reservation are every master's, summed: the cluster's cost
// of one buy, beside BenchmarkReserve's on one server.
func BenchmarkReserveSplit(b *testing.B) {
	ctx := context.Background()
	rdb := stack.Client(b, stacktest.RedisShape{ClusterAddrs: stack.RedisCluster(b).Addrs})
	store := redisstock.New(redisstock.Config{Redis: rdb})
	now := serverNow(b, rdb)
	for _, k := range []int{1, 8} {
		b.Run(fmt.Sprintf("buckets-%d", k), func(b *testing.B) {
			v := voucher(seckill.MaxStock, 1, now.Add(-time.Minute), now.Add(time.Hour))
			v.Shards = k
			require.NoError(b, store.Warm(ctx, v))
			b.Cleanup(func() { _ = store.Unwarm(context.Background(), v.ID) })
			b.SetParallelism(25)
			server := redisCost(b, rdb)
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := store.Reserve(ctx, res(v, next(), 1, "")); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
			reportRedis(b, redisCost(b, rdb).Sub(server))
		})
	}
}
