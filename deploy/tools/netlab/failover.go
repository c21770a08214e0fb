package netlab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/deploy/tools/chaos"
	"github.com/flashsale/seckill/seckill/pause"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// FaultRedisFailover needs a Redis Cluster whose masters have a replica
// each (FleetOptions.Shape.RedisReplicas).
const FaultRedisFailover = "net: a Redis master cut off from its replica and half the gateways past a failover"

// failoverWithin bounds each wait of the failover fault: for the replica's
// promotion, the old master's refusal, its return as a replica.
const failoverWithin = time.Minute

// redisFailover cuts the master of the crowd's voucher off from every
// other Redis node (its replica among them) and from the last half of the
// gateways, for Down and at least until its replica is promoted, then
// heals the partition. The other gateways keep writing to the old master
// until it finds itself in the minority (cluster-node-timeout) and refuses;
// Redis replicates asynchronously, so what it acknowledged after the cut
// is not on the replica that took over, and the old master drops it when
// it rejoins as that replica's replica. The fault counts those
// reservations and, once the crowd is done, says what became of each.
func (f *Fleet) redisFailover(ctx context.Context, w chaos.Watch, res *chaos.Result) error {
	rc := f.RedisCluster
	if rc == nil {
		return errors.New("netlab: the failover fault needs a Redis Cluster with replicas")
	}
	voucherID := w.VoucherID()
	keys := redisstock.VoucherKeys(voucherID)
	nodes := map[string]*redis.Client{}
	for _, a := range rc.Addrs {
		nodes[a] = redis.NewClient(&redis.Options{Addr: a, DialTimeout: time.Second, ReadTimeout: time.Second,
			WriteTimeout: time.Second, MaxRetries: -1})
	}
	defer func() {
		for _, c := range nodes {
			_ = c.Close()
		}
	}()
	oldAddr, replicas, err := masterAndReplicas(ctx, rc.Addrs, nodes, redisstock.SlotKey(voucherID))
	if err != nil {
		return err
	}
	old := f.hostOf(oldAddr)
	if old == nil {
		return fmt.Errorf("netlab: no host of the lab for Redis node %s", oldAddr)
	}
	var rest []*Host
	for _, h := range f.group("redis") {
		if h != old {
			rest = append(rest, h)
		}
	}
	gws := f.group("gateway-")
	cutGWs := gws[len(gws)-len(gws)/2:]

	began := time.Now()
	heal := f.lab.Partition([]*Host{old}, append(rest, cutGWs...))
	healed := false
	defer func() {
		if !healed {
			heal()
		}
	}()
	// The old master stops taking writes once no replica acknowledged
	// within the replica lag (when it has one), or once it finds itself in
	// the minority (cluster_state:fail); a replica takes its slots over.
	var (
		refused, promoted time.Duration
		newAddr           string
	)
	for deadline := began.Add(failoverWithin); refused == 0 || promoted == 0; {
		if refused == 0 && (clusterState(ctx, nodes[oldAddr]) == "fail" || noGoodReplica(ctx, nodes[oldAddr])) {
			refused = time.Since(began)
		}
		for _, a := range replicas {
			if promoted == 0 && role(ctx, nodes[a]) == "master" {
				promoted, newAddr = time.Since(began), a
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netlab: %v after the cut, %s refuses writes: %v, one of %v is master: %v",
				failoverWithin, oldAddr, refused > 0, replicas, promoted > 0)
		}
		if err := pause.For(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	if err := pause.For(ctx, time.Until(began.Add(max(f.opts.Down, promoted+time.Second)))); err != nil {
		return err
	}
	replica := f.hostOf(newAddr)
	if replica == nil {
		return fmt.Errorf("netlab: no host of the lab for Redis node %s", newAddr)
	}
	// The old master, in the minority, refuses reads too: let the lab read
	// what it holds (nothing writes to it any more), and take that back
	// before it rejoins.
	if err := nodes[oldAddr].ConfigSet(ctx, "cluster-allow-reads-when-down", "yes").Err(); err != nil {
		return fmt.Errorf("netlab: let %s be read: %w", oldAddr, err)
	}
	oldOrders, oerr := nodes[oldAddr].HGetAll(ctx, keys.Ledger).Result()
	newOrders, nerr := nodes[newAddr].HGetAll(ctx, keys.Ledger).Result()
	cerr := nodes[oldAddr].ConfigSet(ctx, "cluster-allow-reads-when-down", "no").Err()
	heal()
	healed = true
	healedAt := time.Now()
	if err := errors.Join(oerr, nerr, cerr); err != nil {
		return fmt.Errorf("netlab: read the voucher's orders on both masters: %w", err)
	}
	res.FaultEnded = healedAt

	lost, releasesLost := lostHolds(oldOrders, newOrders)
	accepted := w.Accepted()
	acked := 0
	for _, id := range lost {
		if _, ok := accepted[id]; ok {
			acked++
		}
	}
	res.Notes = append(res.Notes,
		fmt.Sprintf("%s (%s), the master of voucher %d, cut off from the other %d Redis nodes and from %s: it refused writes %.1f s after the cut, its replica %s (%s) was master %.1f s after; healed %.1f s after the cut",
			old.Name, old.IP, voucherID, len(rest), hostNames(cutGWs), refused.Seconds(), replica.Name, replica.IP,
			promoted.Seconds(), healedAt.Sub(began).Seconds()),
		fmt.Sprintf("lost acknowledgements: %d reservations the old master held that the new one does not have (%d of them answered 202 so far); %d releases the old master made that the new one does not have",
			len(lost), acked, releasesLost))
	if err := untilGone(ctx, healedAt, res, "the old master was a replica of the new one", func() (string, error) {
		if r := role(ctx, nodes[oldAddr]); r != "slave" {
			return "the old master's role is " + r, nil
		}
		return "", nil
	}); err != nil {
		return err
	}
	res.Aftermath = func(ctx context.Context, res *chaos.Result) error {
		return f.failoverAftermath(ctx, w, res, lost, newOrders)
	}
	return nil
}

// failoverAftermath says what became of each reservation the old master
// acknowledged and the new one lost, and of the orders PostgreSQL refused.
func (f *Fleet) failoverAftermath(ctx context.Context, w chaos.Watch, res *chaos.Result, lost []int64, newOrders map[string]string) error {
	voucherID := w.VoucherID()
	accepted := w.Accepted()
	status := map[int64]string{}
	rows, err := f.Pool.Query(ctx, "SELECT id, status FROM orders WHERE voucher_id = $1", voucherID)
	if err != nil {
		return fmt.Errorf("netlab: read the voucher's orders: %w", err)
	}
	for rows.Next() {
		var id int64
		var s string
		if err := rows.Scan(&id, &s); err != nil {
			rows.Close()
			return err
		}
		status[id] = s
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	fates := map[string]int{}
	for _, id := range lost {
		s := status[id]
		if s == "" {
			s = "no order"
		}
		if _, ok := accepted[id]; !ok {
			s = "never answered 202, " + s
		}
		fates[s]++
	}
	// The failed orders of the voucher: a 202 PostgreSQL then refused,
	// sold by the new master (after the failover) or not.
	failed := map[string]int{}
	for id, s := range status {
		if s != "failed" {
			continue
		}
		where := "sold before the failover or by the old master"
		if v, ok := newOrders[strconv.FormatInt(id, 10)]; ok && v != "x" {
			where = "held by the new master at the failover"
		} else if !slices.Contains(lost, id) {
			where = "sold after the failover"
		}
		if _, ok := accepted[id]; ok {
			where = "202, " + where
		}
		failed[where]++
	}
	heals, err := healsOf(f.sweeperLogs(), voucherID)
	if err != nil {
		return err
	}
	res.Notes = append(res.Notes,
		fmt.Sprintf("the %d lost reservations ended in PostgreSQL as: %s", len(lost), orNone(counts(fates))),
		fmt.Sprintf("orders of the voucher PostgreSQL recorded failed: %s", orNone(counts(failed))),
		"the healer's rebuilds of the voucher from PostgreSQL: "+orNone(strings.Join(heals, "; ")))
	return nil
}

// lostHolds compares a voucher's ledger on the old master with the new
// master's: the live holds only the old one has (lost), and the orders the
// old one released ("x") that the new one still holds. Only the order
// fields count: the others (request keys, users) are not numbers.
func lostHolds(oldOrders, newOrders map[string]string) (lost []int64, releasesLost int) {
	for id, v := range oldOrders {
		nv, onNew := newOrders[id]
		switch {
		case v != "x" && !onNew:
			if n, err := strconv.ParseInt(id, 10, 64); err == nil {
				lost = append(lost, n)
			}
		case v == "x" && onNew && nv != "x":
			releasesLost++
		}
	}
	slices.Sort(lost)
	return lost, releasesLost
}

// masterAndReplicas finds the master serving key's slot and its replicas.
func masterAndReplicas(ctx context.Context, addrs []string, nodes map[string]*redis.Client, key string) (master string, replicas []string, err error) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer func() { _ = cc.Close() }()
	m, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return "", nil, fmt.Errorf("netlab: the master of %s: %w", key, err)
	}
	master = m.Options().Addr
	mc := nodes[master]
	if mc == nil {
		return "", nil, fmt.Errorf("netlab: master %s is not a node of the fleet's cluster", master)
	}
	id, err := mc.ClusterMyID(ctx).Result()
	if err != nil {
		return "", nil, fmt.Errorf("netlab: CLUSTER MYID of %s: %w", master, err)
	}
	lines, err := mc.Do(ctx, "CLUSTER", "REPLICAS", id).StringSlice()
	if err != nil {
		return "", nil, fmt.Errorf("netlab: CLUSTER REPLICAS of %s: %w", master, err)
	}
	for _, l := range lines {
		// "<id> <ip:port@bus>[,<hostname>] <flags> ...", as CLUSTER NODES.
		if f := strings.Fields(l); len(f) > 1 {
			addr, _, _ := strings.Cut(f[1], "@")
			if nodes[addr] == nil {
				return "", nil, fmt.Errorf("netlab: replica %s is not a node of the fleet's cluster", addr)
			}
			replicas = append(replicas, addr)
		}
	}
	if len(replicas) == 0 {
		return "", nil, fmt.Errorf("netlab: master %s has no replica: the fault needs FleetOptions.Shape.RedisReplicas", master)
	}
	return master, replicas, nil
}

// noGoodReplica reports whether a master with min-replicas-to-write
// refuses writes for want of a replica that acknowledged in time.
func noGoodReplica(ctx context.Context, c *redis.Client) bool {
	info, err := c.Info(ctx, "replication").Result()
	return err == nil && strings.Contains(info, "min_slaves_good_slaves:0")
}

// clusterState is a node's cluster_state ("ok", "fail"), or why there was
// none.
func clusterState(ctx context.Context, c *redis.Client) string {
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return "no answer"
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "cluster_state:"); ok {
			return v
		}
	}
	return "unknown"
}

// role is a node's ROLE ("master", "slave"), or why there was none.
func role(ctx context.Context, c *redis.Client) string {
	r, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(r) == 0 {
		return "no answer"
	}
	s, _ := r[0].(string)
	return s
}

// hostOf is the fleet's host whose address addr's host is.
func (f *Fleet) hostOf(addr string) *Host {
	ip, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.hosts {
		if h.IP == ip {
			return h
		}
	}
	return nil
}

func (f *Fleet) sweeperLogs() []string {
	var out []string
	for _, p := range f.Sweepers {
		out = append(out, p.LogPath)
	}
	return out
}

// healLine picks the voucher, reason and time off sale from the healer's
// line of a rebuild (the text log of a seckill process).
var healLine = regexp.MustCompile(`voucher rebuilt from PostgreSQL.* voucher_id=(\d+) reason=(\S+).* off_sale_for=(\S+)`)

// healsOf lists the healer's rebuilds of voucherID the logs tell of, as
// "drift, off sale for 1.2s".
func healsOf(logs []string, voucherID int64) ([]string, error) {
	want := strconv.FormatInt(voucherID, 10)
	var out []string
	for _, path := range logs {
		file, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("netlab: %w", err)
		}
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if m := healLine.FindStringSubmatch(sc.Text()); m != nil && m[1] == want {
				out = append(out, m[2]+", off sale for "+m[3])
			}
		}
		err = sc.Err()
		_ = file.Close()
		if err != nil {
			return nil, fmt.Errorf("netlab: read %s: %w", path, err)
		}
	}
	return out, nil
}

func hostNames(hs []*Host) string {
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.Name
	}
	return strings.Join(names, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
