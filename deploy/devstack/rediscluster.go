package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClusterOptions configures StartRedisCluster.
type RedisClusterOptions struct {
	// Dir holds one folder per node (node-<i>: its nodes.conf, append-only
	// file and redis.log) and cluster.json, the nodes' ports. It is created
	// if missing.
	Dir string
	// Masters is the number of masters the 16384 slots are spread over; at
	// least 3, the least `redis-cli --cluster create` accepts.
	Masters int
	// Replicas is the number of replicas of each master (0 or more). With
	// one, a killed master's replica takes its slots over after NodeTimeout.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a master may not answer
	// before the others count it failed and its replica is promoted. Zero
	// means 5 s.
	NodeTimeout time.Duration
	// ReplicaLag, when positive and the masters have replicas, makes each
	// master refuse writes while none of its replicas has acknowledged
	// the replication stream within ReplicaLag (min-replicas-to-write 1,
	// min-replicas-max-lag in whole seconds, at least 1): a master cut off
	// from its replicas stops acknowledging writes a failover would lose
	// after ReplicaLag instead of NodeTimeout, and a master left without
	// a replica refuses writes.
	ReplicaLag time.Duration
	// Persist turns on each node's append-only file and keeps the cluster
	// across runs: a later start with the same Dir brings the same nodes
	// back on the same ports. When that fails (a port taken meanwhile, a
	// cluster that does not come back healthy) the folder is wiped and a
	// new, empty cluster is made.
	Persist bool
	// Places puts node i on Places[i] (each on a host of its own); a node
	// beyond the list runs on 127.0.0.1.
	Places []Place
	// Log receives progress messages; nil discards them.
	Log *slog.Logger
}

// RedisCluster is a private Redis Cluster: redis-server child processes in
// cluster mode on 127.0.0.1, their slots assigned by
// `redis-cli --cluster create`.
type RedisCluster struct {
	// Addrs are every node's host:port (masters and replicas): the seed
	// list of a cluster client (SECKILL_REDIS_CLUSTER_ADDRS).
	Addrs []string

	opts  RedisClusterOptions
	log   *slog.Logger
	nodes []*clusterNode
}

// clusterNode is one redis-server of the cluster.
type clusterNode struct {
	addr string
	srv  *server
}

// clusterPorts is cluster.json: what a later start needs to bring the same
// nodes back.
type clusterPorts struct {
	Masters  int      `json:"masters"`
	Replicas int      `json:"replicas"`
	Nodes    [][2]int `json:"nodes"` // client port, cluster bus port
}

// StartRedisCluster starts Masters*(1+Replicas) redis-server processes in
// cluster mode on free ports, joins them with `redis-cli --cluster create`
// and returns once every node reports cluster_state:ok and sees every slot
// served (and every replica is in sync with its master).
func StartRedisCluster(ctx context.Context, opts RedisClusterOptions) (*RedisCluster, error) {
	switch {
	case opts.Dir == "":
		return nil, errors.New("devstack: RedisClusterOptions.Dir is empty")
	case opts.Masters < 3:
		return nil, fmt.Errorf("devstack: a Redis Cluster needs at least 3 masters (redis-cli --cluster create refuses fewer), asked for %d", opts.Masters)
	case opts.Replicas < 0:
		return nil, fmt.Errorf("devstack: negative number of replicas %d", opts.Replicas)
	case opts.ReplicaLag > 0 && opts.Replicas == 0:
		return nil, errors.New("devstack: RedisClusterOptions.ReplicaLag needs replicas")
	}
	if opts.NodeTimeout <= 0 {
		opts.NodeTimeout = 5 * time.Second
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("devstack: redis cluster dir: %w", err)
	}
	opts.Dir = dir
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	c := &RedisCluster{opts: opts, log: logger(opts.Log)}
	if opts.Persist {
		if err := c.reuse(ctx); err == nil {
			return c, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			c.log.Warn("devstack: the Redis Cluster of the last run did not come back; making a new, empty one (PostgreSQL keeps the record; the healer rebuilds the sales' Redis state from it)", "dir", dir, "err", err)
		}
		c.stopAll(context.WithoutCancel(ctx))
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("devstack: clear %s: %w", dir, err)
	}
	return onFreePorts(func() (*RedisCluster, error) {
		if err := c.create(ctx); err != nil {
			c.stopAll(context.WithoutCancel(ctx))
			return nil, err
		}
		return c, nil
	}, func() { _ = os.RemoveAll(dir) })
}

// create starts fresh nodes and makes them one cluster.
func (c *RedisCluster) create(ctx context.Context) error {
	n := c.opts.Masters * (1 + c.opts.Replicas)
	ports := clusterPorts{Masters: c.opts.Masters, Replicas: c.opts.Replicas}
	// freePort's listener is closed at once, so the kernel may hand the
	// same port out again: two nodes on one port would be one node.
	taken := map[int]bool{}
	distinct := func() (int, error) {
		for {
			p, err := freePort()
			if err != nil || !taken[p] {
				taken[p] = true
				return p, err
			}
		}
	}
	for range n {
		p, err := distinct()
		if err != nil {
			return err
		}
		bus, err := distinct()
		if err != nil {
			return err
		}
		ports.Nodes = append(ports.Nodes, [2]int{p, bus})
	}
	began := time.Now()
	if err := c.startNodes(ctx, ports); err != nil {
		return err
	}
	cli, err := findBinary("redis-cli", "redis-tools", "/usr/bin", "/usr/local/bin")
	if err != nil {
		return err
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(c.opts.Replicas), "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("devstack: redis-cli %s: %w:\n%s", strings.Join(args, " "), err, indent(lastLines(string(out), 20)))
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return err
	}
	b, _ := json.Marshal(ports)
	if err := os.WriteFile(filepath.Join(c.opts.Dir, "cluster.json"), b, 0o600); err != nil {
		return fmt.Errorf("devstack: write cluster.json: %w", err)
	}
	c.log.Info("devstack: redis cluster ready", "masters", c.opts.Masters, "replicas_each", c.opts.Replicas,
		"nodes", strings.Join(c.Addrs, ","), "dir", c.opts.Dir, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// reuse brings back the nodes of an earlier run (Persist) on their ports.
// It fails with os.ErrNotExist when there is none to bring back.
func (c *RedisCluster) reuse(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(c.opts.Dir, "cluster.json"))
	if err != nil {
		return err
	}
	var ports clusterPorts
	if err := json.Unmarshal(b, &ports); err != nil {
		return fmt.Errorf("cluster.json: %w", err)
	}
	if ports.Masters != c.opts.Masters || ports.Replicas != c.opts.Replicas {
		return fmt.Errorf("the last run's cluster had %d masters with %d replicas each, this one wants %d with %d",
			ports.Masters, ports.Replicas, c.opts.Masters, c.opts.Replicas)
	}
	if err := c.startNodes(ctx, ports); err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.WaitHealthy(waitCtx); err != nil {
		return err
	}
	c.log.Info("devstack: redis cluster of the last run is back", "nodes", strings.Join(c.Addrs, ","), "dir", c.opts.Dir)
	return nil
}

// startNodes launches one redis-server per entry of ports, in parallel, and
// waits until each answers PING.
func (c *RedisCluster) startNodes(ctx context.Context, ports clusterPorts) error {
	bin, err := findBinary("redis-server", "redis-server", "/usr/bin", "/usr/local/bin", "/usr/sbin")
	if err != nil {
		return err
	}
	appendOnly := "no"
	if c.opts.Persist {
		appendOnly = "yes"
	}
	c.nodes, c.Addrs = nil, nil
	for i, p := range ports.Nodes {
		dir := filepath.Join(c.opts.Dir, "node-"+strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("devstack: redis cluster dir: %w", err)
		}
		var place Place
		if i < len(c.opts.Places) {
			place = c.opts.Places[i]
		}
		addr := net.JoinHostPort(place.host(), strconv.Itoa(p[0]))
		spec, err := place.wrap(procSpec{
			name: "redis-server " + addr,
			bin:  bin,
			args: []string{
				"--port", strconv.Itoa(p[0]),
				"--bind", place.host(),
				// Protected mode lets in only loopback clients; a placed
				// server is reached from other hosts.
				"--protected-mode", yesNo(!place.remote()),
				"--save", "",
				"--appendonly", appendOnly,
				"--dir", dir,
				"--daemonize", "no",
				"--logfile", "",
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-port", strconv.Itoa(p[1]),
				"--cluster-node-timeout", strconv.FormatInt(c.opts.NodeTimeout.Milliseconds(), 10),
				// A replica takes over however long it was cut off: a
				// private cluster would rather serve than wait for an
				// operator.
				"--cluster-replica-validity-factor", "0",
				// While one master is down the others keep serving
				// their slots: only the sales on the failed master's
				// slots wait for the failover.
				"--cluster-require-full-coverage", "no",
				// A replica's first sync starts at once, not after
				// the default 5 s wait for more replicas to join it.
				"--repl-diskless-sync-delay", "0",
			},
			dir:      dir,
			logPath:  filepath.Join(dir, "redis.log"),
			deathSig: syscall.SIGTERM,
		})
		if err != nil {
			return err
		}
		if lag := c.opts.ReplicaLag; lag > 0 {
			spec.args = append(spec.args, "--min-replicas-to-write", "1",
				"--min-replicas-max-lag", strconv.FormatInt(max(int64(lag/time.Second), 1), 10))
		}
		c.nodes = append(c.nodes, &clusterNode{addr: addr, srv: &server{
			log:     c.log,
			spec:    spec,
			stopSig: syscall.SIGTERM,
			ready:   func(ctx context.Context, _ *process) error { return ping(ctx, addr) },
		}})
		c.Addrs = append(c.Addrs, addr)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i, n := range c.nodes {
		wg.Go(func() { errs[i] = n.srv.start(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WaitHealthy waits until every running node reports cluster_state:ok, knows
// every other running node, sees all 16384 slots served, and every replica's
// link to its master is up. Tests call it after bringing a node back.
func (c *RedisCluster) WaitHealthy(ctx context.Context) error {
	var last error
	for {
		if last = c.healthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: redis cluster %s not healthy (%w): %v; logs under %s", strings.Join(c.Addrs, ","), ctx.Err(), last, c.opts.Dir)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *RedisCluster) healthy(ctx context.Context) error {
	running := 0
	for _, n := range c.nodes {
		if n.srv.pid() != 0 {
			running++
		}
	}
	for _, n := range c.nodes {
		if n.srv.pid() == 0 {
			continue
		}
		err := func() error {
			rdb := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
			defer rdb.Close()
			info, err := rdb.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_known_nodes:" + strconv.Itoa(running)} {
				if !strings.Contains(info, want+"\r\n") {
					return fmt.Errorf("%s: no %s yet", n.addr, want)
				}
			}
			// Each node must also know every replica as one: a replica
			// whose role has not reached a node by gossip yet is listed
			// there as a master without slots, a shard of its own in
			// CLUSTER SHARDS.
			nodes, err := rdb.ClusterNodes(ctx).Result()
			if err != nil {
				return err
			}
			for line := range strings.SplitSeq(strings.TrimSpace(nodes), "\n") {
				f := strings.Fields(line)
				if len(f) >= 3 && len(f) < 9 && strings.Contains(f[2], "master") && !strings.Contains(f[2], "fail") {
					addr, _, _ := strings.Cut(f[1], "@")
					return fmt.Errorf("%s: sees %s as a master without slots (a replica it does not know as one yet)", n.addr, addr)
				}
			}
			repl, err := rdb.Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
				return fmt.Errorf("%s: replica not in sync with its master yet", n.addr)
			}
			// A replica that just synced rewrites its append-only file,
			// and refuses SIGTERM until that is done ("Writing initial
			// AOF, can't exit"): healthy means it can also be stopped.
			pers, err := rdb.Info(ctx, "persistence").Result()
			if err != nil {
				return err
			}
			for _, busy := range []string{"loading:1", "aof_rewrite_in_progress:1", "aof_rewrite_scheduled:1"} {
				if strings.Contains(pers, busy+"\r\n") {
					return fmt.Errorf("%s: %s", n.addr, busy)
				}
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// Masters returns the addresses of the nodes that serve slots now, as the
// cluster itself says (CLUSTER NODES of the first node that answers), in
// the order of Addrs.
func (c *RedisCluster) Masters(ctx context.Context) ([]string, error) {
	var errs []error
	for _, n := range c.nodes {
		if n.srv.pid() == 0 {
			continue
		}
		rdb := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1})
		out, err := rdb.ClusterNodes(ctx).Result()
		_ = rdb.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var masters []string
		for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			// <id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link> <slot>...
			if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			masters = append(masters, addr)
		}
		slices.SortFunc(masters, func(a, b string) int { return slices.Index(c.Addrs, a) - slices.Index(c.Addrs, b) })
		return masters, nil
	}
	return nil, fmt.Errorf("devstack: no node of the redis cluster answers: %w", errors.Join(errs...))
}

func (c *RedisCluster) node(addr string) (*clusterNode, error) {
	for _, n := range c.nodes {
		if n.addr == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("devstack: %s is not a node of this redis cluster (%s)", addr, strings.Join(c.Addrs, ","))
}

// Kill ends the node at addr with SIGKILL, as a crash would. Its replica (if
// any) takes its slots over after NodeTimeout.
func (c *RedisCluster) Kill(addr string) error {
	n, err := c.node(addr)
	if err != nil {
		return err
	}
	n.srv.kill()
	return nil
}

// Restart starts the node at addr again on its ports with its nodes.conf, so
// it rejoins the cluster (a master whose replica was promoted meanwhile
// comes back as that replica's replica). Call WaitHealthy to wait for it.
func (c *RedisCluster) Restart(ctx context.Context, addr string) error {
	n, err := c.node(addr)
	if err != nil {
		return err
	}
	return n.srv.restart(ctx)
}

// Pids are the running nodes' process ids.
func (c *RedisCluster) Pids() []int {
	var pids []int
	for _, n := range c.nodes {
		if p := n.srv.pid(); p != 0 {
			pids = append(pids, p)
		}
	}
	return pids
}

// Stop shuts every node down (SIGTERM, then SIGKILL if ctx ends first). It is
// safe to call more than once.
func (c *RedisCluster) Stop(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i, n := range c.nodes {
		wg.Go(func() { errs[i] = n.srv.stop(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *RedisCluster) stopAll(ctx context.Context) {
	_ = c.Stop(ctx)
	c.nodes, c.Addrs = nil, nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
