package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/migrations"
	"github.com/flashsale/seckill/orders/kafkaq"
)

// Topic is the orders topic every process of a fleet uses.
const Topic = "seckill.orders"

// Shape is how many processes of each role a fleet runs, and on what.
type Shape struct {
	Gateways, Workers, Sweepers int
	// Partitions of the orders topic; 0 means 6. Workers beyond it idle.
	Partitions int32
	// RedisMasters is 1 (or 0) for one plain redis-server, 3 or more for a
	// Redis Cluster of that many masters (no replicas), which every process
	// reaches through SECKILL_REDIS_CLUSTER_ADDRS.
	RedisMasters int
	// RedisReplicas is how many replicas each master of a Redis Cluster
	// has (0: none), so a master's loss is a failover, not an outage.
	RedisReplicas int
}

// Fleet3x2x2 is the fleet of the fleet test and `make fleet`: three
// gateways, two workers, two sweepers, on a Redis Cluster of three masters.
var Fleet3x2x2 = Shape{Gateways: 3, Workers: 2, Sweepers: 2, RedisMasters: 3}

// Broker is the Kafka a fleet's processes write to and read from.
type Broker int

const (
	// BrokerInProcess is the in-process Kafka-protocol broker (kfake, one
	// node, deploy/devstack.StartKafka): it starts at once, and a test can
	// leave a kind of request unanswered through its Cluster (the fault
	// suite strikes a worker and a gateway that way). The zero value.
	BrokerInProcess Broker = iota
	// BrokerApache3 is Apache Kafka as three KRaft nodes, each its own
	// process (deploy/devstack.StartApacheKafka): the brokers of
	// docker-compose.yml, replication factor 3 and min.insync.replicas 2.
	BrokerApache3
)

// String names the broker in progress messages.
func (b Broker) String() string {
	switch b {
	case BrokerInProcess:
		return "the in-process broker"
	case BrokerApache3:
		return "Apache Kafka as 3 nodes"
	}
	return fmt.Sprintf("broker %d", int(b))
}

// Options configures Start.
type Options struct {
	// Bin is the seckill binary (see Build).
	Bin string
	// Dir is where the services keep their data and the processes their logs.
	Dir   string
	Shape Shape
	// Broker chooses the Kafka; the zero value is the in-process broker.
	Broker Broker
	// RedisPersist turns redis-server's append-only file on (the fault suite
	// kills it and wants the data back).
	RedisPersist bool
	// AdminToken and JWTSecret every process shares; generated when empty.
	AdminToken, JWTSecret string
	// Env adds SECKILL_* settings to every process, over the fleet's own.
	Env map[string]string
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
	// RedisReplicaLag makes each master of a cluster with replicas refuse
	// writes while no replica has acknowledged within it
	// (devstack.RedisClusterOptions.ReplicaLag); zero leaves it off.
	RedisReplicaLag time.Duration
	// RedisParams are go-redis URL parameters every process's Redis
	// address gets, e.g. "read_timeout=250ms&write_timeout=250ms" (the
	// client's own defaults when empty): a deployment sets them in
	// SECKILL_REDIS_URL, or in SECKILL_REDIS_CLUSTER_ADDRS's URL form.
	RedisParams string
	// Place puts each service and process on a host of its own
	// (deploy/tools/netlab): it is asked for "redis" (or "redis-1" and on for the
	// nodes of a cluster, masters first, then replicas), "postgres", "kafka" (the in-process broker's
	// listener; "kafka-1" to "kafka-3" for Apache Kafka's nodes) and each
	// process's name ("gateway-1", "worker-2", ...). Nil,
	// or a zero Place, is 127.0.0.1 in this namespace.
	Place func(name string) devstack.Place
}

// Fleet is the running services and processes. Its fields are for reading.
type Fleet struct {
	// Redis is the plain redis-server of a one-master shape; RedisCluster
	// the cluster of the others. One of the two is nil.
	Redis        *devstack.Redis
	RedisCluster *devstack.RedisCluster
	Postgres     *devstack.Postgres
	// Kafka is the in-process broker (BrokerInProcess), ApacheKafka the
	// three-node cluster (BrokerApache3); the other is nil.
	Kafka       *devstack.Kafka
	ApacheKafka *devstack.ApacheKafka
	// Pool is a PostgreSQL pool on the fleet's database, for checks.
	Pool *pgxpool.Pool

	Gateways, Workers, Sweepers []*Process

	// AdminToken and JWTSecret are what every process was given.
	AdminToken, JWTSecret string

	opts Options
	env  map[string]string
}

// Start brings up the services and the processes of opts.Shape, each
// process ready (its /readyz answers 200) when it returns.
func Start(ctx context.Context, opts Options) (_ *Fleet, err error) {
	if opts.Bin == "" || opts.Dir == "" {
		return nil, errors.New("fleet: Options.Bin and Options.Dir are required")
	}
	s := opts.Shape
	if s.Gateways < 1 || s.Workers < 0 || s.Sweepers < 0 {
		return nil, fmt.Errorf("fleet: a fleet needs a gateway at least, and no negative counts (shape %+v)", s)
	}
	if s.RedisMasters == 2 || s.RedisMasters < 0 {
		return nil, fmt.Errorf("fleet: %d Redis masters: one plain redis-server (1) or a cluster of 3 or more", s.RedisMasters)
	}
	if s.RedisReplicas < 0 || (s.RedisReplicas > 0 && s.RedisMasters < 3) {
		return nil, fmt.Errorf("fleet: %d Redis replicas: replicas are for a cluster of 3 or more masters (shape %+v)", s.RedisReplicas, s)
	}
	if s.RedisMasters > 1 && opts.RedisPersist {
		return nil, errors.New("fleet: RedisPersist is for the plain redis-server only")
	}
	if opts.Broker != BrokerInProcess && opts.Broker != BrokerApache3 {
		return nil, fmt.Errorf("fleet: unknown Options.Broker %d: use BrokerInProcess or BrokerApache3", opts.Broker)
	}
	if s.Partitions == 0 {
		s.Partitions = 6
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Place == nil {
		opts.Place = func(string) devstack.Place { return devstack.Place{} }
	}
	if opts.AdminToken == "" {
		opts.AdminToken = randomHex(16)
	}
	if opts.JWTSecret == "" {
		opts.JWTSecret = randomHex(32)
	}
	f := &Fleet{AdminToken: opts.AdminToken, JWTSecret: opts.JWTSecret, opts: opts}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()

	redisKind := "redis-server"
	if s.RedisMasters > 1 {
		redisKind = fmt.Sprintf("a Redis Cluster of %d masters with %d replicas each", s.RedisMasters, s.RedisReplicas)
	}
	opts.Logf("fleet: starting %s, PostgreSQL and %s in %s", redisKind, opts.Broker, opts.Dir)
	// The three start side by side: each mostly waits (initdb, the cluster
	// handshake, the JVMs), and three Kafka nodes take the longest.
	var redisErr, pgErr, kafkaErr error
	var services sync.WaitGroup
	services.Go(func() {
		if s.RedisMasters > 1 {
			places := make([]devstack.Place, s.RedisMasters*(1+s.RedisReplicas))
			for i := range places {
				places[i] = opts.Place(fmt.Sprintf("redis-%d", i+1))
			}
			f.RedisCluster, redisErr = devstack.StartRedisCluster(ctx, devstack.RedisClusterOptions{
				Dir: filepath.Join(opts.Dir, "redis-cluster"), Masters: s.RedisMasters, Replicas: s.RedisReplicas, Places: places,
				ReplicaLag: opts.RedisReplicaLag,
			})
			return
		}
		f.Redis, redisErr = devstack.StartRedis(ctx, devstack.RedisOptions{
			Dir: filepath.Join(opts.Dir, "redis"), Persist: opts.RedisPersist, Place: opts.Place("redis"),
		})
	})
	services.Go(func() {
		f.Postgres, pgErr = devstack.StartPostgres(ctx, devstack.PostgresOptions{
			Dir: filepath.Join(opts.Dir, "postgres"), Place: opts.Place("postgres"),
		})
	})
	services.Go(func() { kafkaErr = f.startKafka(ctx, s.Partitions) })
	services.Wait()
	if err = errors.Join(redisErr, pgErr, kafkaErr); err != nil {
		return nil, err
	}
	// Once, before any process: as `seckill migrate` once per release.
	if err = migrations.ApplyURL(ctx, f.Postgres.URL); err != nil {
		return nil, err
	}
	if f.Pool, err = pgxpool.New(ctx, f.Postgres.URL); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	f.env = f.baseEnv()

	for _, role := range []struct {
		name  string
		n     int
		procs *[]*Process
	}{{"gateway", s.Gateways, &f.Gateways}, {"worker", s.Workers, &f.Workers}, {"sweeper", s.Sweepers, &f.Sweepers}} {
		for i := range role.n {
			p, err := f.newProcess(role.name, fmt.Sprintf("%s-%d", role.name, i+1))
			if err != nil {
				return nil, err
			}
			*role.procs = append(*role.procs, p)
		}
	}
	// Started side by side: each takes a second or two, mostly waiting.
	all := f.processes()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, p := range all {
		wg.Go(func() { errs[i] = p.Start(ctx, 2*time.Minute) })
	}
	wg.Wait()
	if err = errors.Join(errs...); err != nil {
		return nil, err
	}
	if s.Workers > 0 && f.Kafka != nil {
		// A worker killed while its first join to the consumer group is still
		// pending can stay in the group as a member that never expires on the
		// in-process broker, holding its partitions; so the fleet is ready
		// only once every worker holds its share. Apache Kafka expires a
		// member that stops heartbeating, joined or not (at the latest after
		// the rebalance and session timeouts), so a fleet on it is ready as
		// soon as its processes are.
		if err := waitForWorkers(ctx, f.Kafka.Brokers, s.Workers, time.Minute); err != nil {
			return nil, err
		}
	}
	opts.Logf("fleet: %d gateways %v, %d workers, %d sweepers ready; logs in %s",
		len(f.Gateways), f.GatewayAddrs(), len(f.Workers), len(f.Sweepers), opts.Dir)
	return f, nil
}

// startKafka starts the broker opts.Broker names with the orders topic.
func (f *Fleet) startKafka(ctx context.Context, partitions int32) (err error) {
	topics := map[string]int32{Topic: partitions}
	dir := filepath.Join(f.opts.Dir, "kafka")
	if f.opts.Broker == BrokerApache3 {
		places := make([]devstack.Place, 3)
		for i := range places {
			places[i] = f.opts.Place(fmt.Sprintf("kafka-%d", i+1))
		}
		f.ApacheKafka, err = devstack.StartApacheKafka(ctx, devstack.ApacheKafkaOptions{Brokers: 3, Topics: topics, Dir: dir, Places: places})
		return err
	}
	f.Kafka, err = devstack.StartKafka(ctx, devstack.KafkaOptions{Topics: topics, Dir: dir, Place: f.opts.Place("kafka")})
	return err
}

// Brokers are the Kafka brokers' host:port addresses, as every process has
// them in SECKILL_KAFKA_BROKERS.
func (f *Fleet) Brokers() []string {
	if f.ApacheKafka != nil {
		return f.ApacheKafka.Brokers
	}
	return f.Kafka.Brokers
}

// BaseEnv is the configuration of a seckill process on this machine,
// services aside: the topic, the secrets, a short shutdown, and the
// per-address limits lifted.
func BaseEnv(adminToken, jwtSecret string) map[string]string {
	return map[string]string{
		"SECKILL_KAFKA_TOPIC":      Topic,
		"SECKILL_JWT_SECRET":       jwtSecret,
		"SECKILL_ADMIN_TOKEN":      adminToken,
		"SECKILL_SHUTDOWN_TIMEOUT": "5s",
		// A crowd on this machine comes from 127.0.0.1, one address: the
		// per-address budgets would make it a crowd of one. The per-user
		// and global limits stay as shipped unless Options.Env says.
		"SECKILL_IP_RATE":      "1000000",
		"SECKILL_IP_BURST":     "1000000",
		"SECKILL_BUY_IP_RATE":  "1000000",
		"SECKILL_BUY_IP_BURST": "1000000",
		// And the caps on connections and sockets per address.
		"SECKILL_CONNS_PER_ADDR": "1000000",
		"SECKILL_WS_PER_ADDR":    "1000000",

		"SECKILL_SHOPPER_IP_RATE": "1000000", "SECKILL_SHOPPER_IP_BURST": "1000000",
	}
}

// baseEnv is the configuration every process of the fleet shares.
func (f *Fleet) baseEnv() map[string]string {
	env := BaseEnv(f.AdminToken, f.JWTSecret)
	env["SECKILL_DATABASE_URL"] = f.Postgres.URL
	env["SECKILL_KAFKA_BROKERS"] = strings.Join(f.Brokers(), ",")
	switch p := f.opts.RedisParams; {
	case f.RedisCluster != nil && p != "":
		// The one-URL form: the first node, the others as addr=.
		var q []string
		for _, a := range f.RedisCluster.Addrs[1:] {
			q = append(q, "addr="+a)
		}
		env["SECKILL_REDIS_CLUSTER_ADDRS"] = "redis://" + f.RedisCluster.Addrs[0] + "?" + strings.Join(append(q, p), "&")
	case f.RedisCluster != nil:
		env["SECKILL_REDIS_CLUSTER_ADDRS"] = strings.Join(f.RedisCluster.Addrs, ",")
	case p != "":
		env["SECKILL_REDIS_URL"] = f.Redis.URL + "?" + p
	default:
		env["SECKILL_REDIS_URL"] = f.Redis.URL
	}
	for k, v := range f.opts.Env {
		env[k] = v
	}
	return env
}

// newProcess prepares one `seckill serve` of one role on a free address.
func (f *Fleet) newProcess(role, name string) (*Process, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	place := f.opts.Place(name)
	if place.Host != "" {
		_, port, _ := net.SplitHostPort(addr)
		addr = net.JoinHostPort(place.Host, port)
	}
	env := make(map[string]string, len(f.env)+2)
	for k, v := range f.env {
		env[k] = v
	}
	env["SECKILL_ROLES"] = role
	env["SECKILL_HTTP_ADDR"] = addr
	p := NewProcess(name, f.opts.Bin, f.opts.Dir, []string{"serve"}, env)
	p.Netns = place.Netns
	return p, nil
}

// Env is the configuration every process of the fleet shares (services,
// secrets, limits), for a client such as the load tool.
func (f *Fleet) Env() map[string]string {
	out := make(map[string]string, len(f.env))
	for k, v := range f.env {
		out[k] = v
	}
	return out
}

// GatewayAddrs are the gateways' host:port addresses, in order.
func (f *Fleet) GatewayAddrs() []string {
	out := make([]string, len(f.Gateways))
	for i, g := range f.Gateways {
		out[i] = g.Addr
	}
	return out
}

func (f *Fleet) processes() []*Process {
	var all []*Process
	all = append(all, f.Gateways...)
	all = append(all, f.Workers...)
	return append(all, f.Sweepers...)
}

// Close stops every process (SIGTERM, SIGKILL after 10 s), then the
// services. It is safe on a fleet Start gave up on.
func (f *Fleet) Close() {
	var wg sync.WaitGroup
	for _, p := range f.processes() {
		wg.Go(func() { p.Stop(10 * time.Second) })
	}
	wg.Wait()
	if f.Pool != nil {
		f.Pool.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if f.Kafka != nil {
		f.Kafka.Close()
	}
	if f.ApacheKafka != nil {
		_ = f.ApacheKafka.Close()
	}
	if f.Redis != nil {
		_ = f.Redis.Stop(ctx)
	}
	if f.RedisCluster != nil {
		_ = f.RedisCluster.Stop(ctx)
	}
	if f.Postgres != nil {
		_ = f.Postgres.Stop(ctx)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// waitForWorkers waits until the workers' consumer group is stable with n
// members, each of them assigned its partitions.
func waitForWorkers(ctx context.Context, brokers []string, n int, timeout time.Duration) error {
	admin, err := sarama.NewClusterAdmin(brokers, kafkaq.ConsumerGroupConfig())
	if err != nil {
		return fmt.Errorf("fleet: the broker's admin client: %w", err)
	}
	defer func() { _ = admin.Close() }()
	deadline := time.Now().Add(timeout)
	state, members := "unknown", 0
	for {
		groups, err := admin.DescribeConsumerGroups([]string{kafkaq.DefaultGroup})
		if err == nil && len(groups) == 1 {
			state, members = groups[0].State, len(groups[0].Members)
			if state == "Stable" && members == n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fleet: consumer group %s not stable with %d workers after %v (state %s, %d members, last error %v)",
				kafkaq.DefaultGroup, n, timeout, state, members, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
