package netlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/deploy/tools/chaos"
	"github.com/flashsale/seckill/deploy/tools/fleet"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill/pause"
)

// Names of the faults a Fleet makes, in the order Faults lists them.
const (
	FaultGatewayRedis   = "net: a gateway cut off from Redis"
	FaultSlowRedis      = "net: 40 ms round trip and 1 % loss between the gateways and Redis"
	FaultWorkerPostgres = "net: a worker cut off from PostgreSQL mid-batch"
	FaultWorkerKafka    = "net: a worker cut off from Kafka past its session"
	FaultShoppers       = "net: a gateway cut off from its shoppers only"
	// FaultSweeperRedis needs orders that expire during the crowd: a fleet
	// with a short SECKILL_PAY_TIMEOUT (FleetOptions.Env).
	FaultSweeperRedis = "net: the sweeper cut off from Redis while it cancels"
)

// Faults lists every fault a Fleet makes.
func Faults() []string {
	return []string{FaultGatewayRedis, FaultSlowRedis, FaultWorkerPostgres, FaultWorkerKafka, FaultShoppers}
}

// FleetOptions configures StartFleet.
type FleetOptions struct {
	// Bin is the seckill binary (fleet.Build), Dir the services' data and
	// the processes' logs.
	Bin, Dir string
	// Shape is the fleet; it needs two gateways and a worker at least.
	Shape fleet.Shape
	// Down is how long each fault lasts.
	Down time.Duration
	// RedisParams are go-redis URL parameters for every process's Redis
	// client (fleet.Options.RedisParams), e.g. a read timeout.
	RedisParams string
	// SlowLink is what FaultSlowRedis puts between the gateways and Redis;
	// zero is 20 ms (±1 ms) each way and 1 % loss each way, a 40 ms round
	// trip.
	SlowLink Link
	// RedisReplicaLag is fleet.Options.RedisReplicaLag: masters refuse
	// writes no replica acknowledged within it.
	RedisReplicaLag time.Duration
	// Env adds SECKILL_* settings to every process (fleet.Options.Env).
	Env map[string]string
	// Broker is the Kafka: the in-process broker (the zero value), or
	// Apache Kafka as three nodes, each on a host of its own
	// (FaultKafkaLeader needs it).
	Broker fleet.Broker
	// Shoppers is how many hosts the crowd's connections come from
	// (shopper-1 and on, each connection from the next); zero keeps them
	// on the control host.
	Shoppers int
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

// Fleet is a fleet of `seckill serve` processes (deploy/tools/fleet) with every
// service and process on a host of its own, and the faults it can make.
type Fleet struct {
	*fleet.Fleet
	lab  *Lab
	opts FleetOptions

	mu       sync.Mutex
	hosts    map[string]*Host // by the fleet's name: "gateway-1", "redis-2", "postgres", "shopper-1"
	placeErr error            // the first host that could not be made

	shoppers []*Host       // where the crowd dials from; none: the control host
	dials    atomic.Uint64 // picks the next shopper host
}

// StartFleet starts the fleet of opts on new hosts of lab: one per gateway,
// worker and sweeper, per Redis node, for PostgreSQL and for the in-process
// broker's listener.
func StartFleet(ctx context.Context, lab *Lab, opts FleetOptions) (*Fleet, error) {
	if opts.Shape.Gateways < 2 || opts.Shape.Workers < 1 {
		return nil, fmt.Errorf("netlab: the faults need two gateways and a worker at least (shape %+v)", opts.Shape)
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	f := &Fleet{lab: lab, opts: opts, hosts: map[string]*Host{}}
	fl, err := fleet.Start(ctx, fleet.Options{
		Bin: opts.Bin, Dir: opts.Dir, Shape: opts.Shape, Logf: opts.Logf, RedisParams: opts.RedisParams,
		Env: opts.Env, RedisReplicaLag: opts.RedisReplicaLag, Broker: opts.Broker,
		Place: func(name string) devstack.Place {
			h, err := f.host(name)
			if err != nil {
				// A namespace that is not there: the start fails, and
				// says which host could not be made.
				return devstack.Place{Host: "10.231.0.255", Netns: "/nonexistent/" + name}
			}
			return h.Place()
		},
	})
	if err != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		return nil, fmt.Errorf("netlab: %w (hosts: %v)", err, f.placeErr)
	}
	f.Fleet = fl
	for i := range opts.Shoppers {
		h, err := f.host(fmt.Sprintf("shopper-%d", i+1))
		if err != nil {
			fl.Close()
			return nil, err
		}
		f.shoppers = append(f.shoppers, h)
	}
	return f, nil
}

// dialShopper dials addr from the next shopper host, as a shopper's
// device does: its socket lives in that host's namespace.
func (f *Fleet) dialShopper(ctx context.Context, network, addr string) (net.Conn, error) {
	h := f.shoppers[f.dials.Add(1)%uint64(len(f.shoppers))]
	var conn net.Conn
	err := devstack.InNetns(h.Netns, func() error {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		conn = c
		return err
	})
	return conn, err
}

// host is the host named name, made on first use.
func (f *Fleet) host(name string) (*Host, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.hosts[name]; h != nil {
		return h, nil
	}
	h, err := f.lab.Host(name)
	if err != nil {
		if f.placeErr == nil {
			f.placeErr = err
		}
		return nil, err
	}
	f.hosts[name] = h
	return h, nil
}

// group is the hosts whose names start with prefix, in name order.
func (f *Fleet) group(prefix string) []*Host {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*Host
	for name, h := range f.hosts {
		if strings.HasPrefix(name, prefix) {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b *Host) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// System is the fleet and its faults, for chaos.Run.
func (f *Fleet) System() *chaos.System {
	sys := &chaos.System{Fleet: f.Fleet, Faults: map[string]chaos.Inject{
		FaultGatewayRedis:   f.gatewayFromRedis,
		FaultSlowRedis:      f.slowRedis,
		FaultWorkerPostgres: f.workerFromPostgres,
		FaultWorkerKafka:    f.workerFromKafka,
		FaultShoppers:       f.gatewayFromShoppers,
		FaultSweeperRedis:   f.sweeperFromRedis,
		FaultRedisFailover:  f.redisFailover,
		FaultKafkaLeader:    f.kafkaLeader,
	}}
	if len(f.shoppers) > 0 {
		sys.ShopperDial = f.dialShopper
	}
	return sys
}

// gatewayFromRedis cuts the last gateway off from every Redis node for
// Down. The others keep selling; it should answer 503 fast while cut off
// and sell again by itself once the link is back.
func (f *Fleet) gatewayFromRedis(ctx context.Context, w chaos.Watch, res *chaos.Result) error {
	gws := f.group("gateway-")
	gw := gws[len(gws)-1]
	cut := len(gws) - 1
	watch := f.watchBreakers(ctx)
	began := time.Now()
	heal := f.lab.Partition([]*Host{gw}, f.group("redis"))
	err := pause.For(ctx, f.opts.Down)
	heal()
	healed := time.Now()
	breakers := watch()
	if err != nil {
		return err
	}
	// Back by itself: the first buy it accepts, or refuses as sold out,
	// once the link is back; and the buys it held through the cut
	// answered.
	res.FaultEnded = healed
	var back *chaos.Answer
	for deadline := healed.Add(30 * time.Second); back == nil || w.InFlight() > 0; {
		for _, a := range w.Answers() {
			if a.Gateway == cut && a.At.After(healed) && (a.Label == "202" || a.Label == "409") {
				back = &a
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
		if err := pause.For(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	during := window(w.Answers(), began, healed)
	res.Notes = append(res.Notes,
		fmt.Sprintf("%s (%s) cut off from Redis for %v; the buys sent to it meanwhile: %s", gw.Name, gw.IP, f.opts.Down, during.of(cut)),
		fmt.Sprintf("the buys sent to the other gateways meanwhile: %s", during.except(cut)),
		"breakers seen during the cut: "+breakers)
	if back == nil {
		res.Notes = append(res.Notes, fmt.Sprintf("%s answered no buy sent after the link came back with 202 or 409 within 30 s", gw.Name))
		return nil
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%s answered %s to a buy sent %.1f s after the link came back",
		gw.Name, back.Label, back.At.Sub(healed).Seconds()))
	return nil
}

// settle waits until no buy is in flight, or for up to d: the buys a
// fault held are answered.
func settle(ctx context.Context, w chaos.Watch, d time.Duration) error {
	for deadline := time.Now().Add(d); w.InFlight() > 0 && time.Now().Before(deadline); {
		if err := pause.For(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// slowRedis puts FleetOptions.SlowLink (20 ms each way and 1 % loss each
// way) between every gateway and every Redis node for Down: how many buys go through, how
// slowly, and whether a breaker opens though Redis answers.
func (f *Fleet) slowRedis(ctx context.Context, w chaos.Watch, res *chaos.Result) error {
	watch := f.watchBreakers(ctx)
	began := time.Now()
	link := f.opts.SlowLink
	if link == (Link{}) {
		link = Link{Delay: 20 * time.Millisecond, Jitter: time.Millisecond, Loss: 0.01}
	}
	restore := f.lab.Impair(f.group("gateway-"), f.group("redis"), link)
	err := pause.For(ctx, f.opts.Down)
	restore()
	ended := time.Now()
	breakers := watch()
	if err == nil {
		err = settle(ctx, w, 20*time.Second)
	}
	if err != nil {
		return err
	}
	res.FaultEnded = ended
	before := window(w.Answers(), began.Add(-f.opts.Down), began)
	during := window(w.Answers(), began, ended)
	res.Notes = append(res.Notes,
		fmt.Sprintf("for %v before: %s", f.opts.Down, before.summary()),
		fmt.Sprintf("for %v with %v (±%v) each way and %.1f %% loss: %s", f.opts.Down, link.Delay, link.Jitter, link.Loss*100, during.summary()),
		"breakers seen meanwhile: "+breakers)
	return nil
}

// workerFromPostgres cuts the first worker off from PostgreSQL for Down
// at a moment it has a transaction open (a batch being written), so its
// packets vanish both ways mid-transaction: what PostgreSQL does with the
// open transaction, and whether the other worker keeps writing meanwhile.
func (f *Fleet) workerFromPostgres(ctx context.Context, w chaos.Watch, res *chaos.Result) error {
	wk := f.group("worker-")[0]
	before, err := f.orderCount(ctx)
	if err != nil {
		return err
	}
	// A batch takes milliseconds: cut, and look whether a transaction of
	// the worker was caught open; if not, mend and try again.
	var (
		heal   func()
		caught []int32
		tries  int
		began  time.Time
	)
	for tries = 1; tries <= 50 && caught == nil; tries++ {
		began = time.Now()
		heal = f.lab.Partition([]*Host{wk}, f.group("postgres"))
		if err := pause.For(ctx, 200*time.Millisecond); err != nil {
			heal()
			return err
		}
		open, err := f.openTransactions(ctx, wk, began)
		if err != nil {
			heal()
			return err
		}
		if len(open) > 0 {
			caught = open
			break
		}
		heal()
		if err := pause.For(ctx, time.Duration(rand.N(100))*time.Millisecond); err != nil {
			return err
		}
	}
	if caught == nil {
		return fmt.Errorf("netlab: no cut of %s caught a transaction of it open in %d tries", wk.Name, tries-1)
	}
	err = pause.For(ctx, f.opts.Down)
	during, cerr := f.orderCount(ctx)
	held, herr := f.stillThere(ctx, caught)
	heal()
	healed := time.Now()
	if err = errors.Join(err, cerr, herr); err != nil {
		return err
	}
	res.FaultEnded = healed
	res.Notes = append(res.Notes,
		fmt.Sprintf("%s (%s) cut off from PostgreSQL for %v, at try %d with %d of its transactions open (backends %v); PostgreSQL took %d orders meanwhile from the other worker",
			wk.Name, wk.IP, f.opts.Down, tries, len(caught), caught, during-before),
		fmt.Sprintf("at the end of the cut PostgreSQL still held %d of those transactions open", len(held)))
	// How long the backends of the transactions cut off stay: PostgreSQL
	// learns the client is gone only from its socket.
	if len(held) == 0 {
		return nil
	}
	return untilGone(ctx, healed, res, "those transactions ended", func() (string, error) {
		left, err := f.stillThere(ctx, held)
		if len(left) == 0 {
			return "", err
		}
		return fmt.Sprintf("transactions %v still open", left), err
	})
}

// untilGone asks left every 100 ms, for up to a minute after healed, until
// it says nothing is left, and notes how long after healed that was as
// done ("... 1.2 s after the link came back"), or what was still left.
func untilGone(ctx context.Context, healed time.Time, res *chaos.Result, done string, left func() (string, error)) error {
	for deadline := healed.Add(time.Minute); ; {
		what, err := left()
		if err != nil {
			return err
		}
		if what == "" {
			res.Notes = append(res.Notes, fmt.Sprintf("%s %.1f s after the link came back", done, time.Since(healed).Seconds()))
			return nil
		}
		if time.Now().After(deadline) {
			res.Notes = append(res.Notes, what+" a minute after the link came back")
			return nil
		}
		if err := pause.For(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// openTransactions lists the PostgreSQL backends of h inside a
// transaction that began before since.
func (f *Fleet) openTransactions(ctx context.Context, h *Host, since time.Time) ([]int32, error) {
	var pids []int32
	err := f.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
		WHERE client_addr = $1::inet AND xact_start < $2`, h.IP, since).Scan(&pids)
	return pids, err
}

// stillThere is those of pids whose transaction is still open.
func (f *Fleet) stillThere(ctx context.Context, pids []int32) ([]int32, error) {
	var left []int32
	err := f.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
		WHERE pid = ANY($1) AND xact_start IS NOT NULL`, pids).Scan(&left)
	return left, err
}

func (f *Fleet) orderCount(ctx context.Context) (int64, error) {
	var n int64
	err := f.Pool.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n)
	return n, err
}

// workerFromKafka cuts the first worker off from the broker for Down,
// longer than the consumer group's session (sarama's 10 s): the group
// gives its partitions to the other worker while it still runs, holding
// what it had fetched, and it comes back to a group that moved on.
func (f *Fleet) workerFromKafka(ctx context.Context, w chaos.Watch, res *chaos.Result) error {
	wk := f.group("worker-")[0]
	down := max(f.opts.Down, 15*time.Second)
	heal := f.lab.Partition([]*Host{wk}, f.group("kafka"))
	err := pause.For(ctx, down)
	members := f.groupMembers()
	heal()
	res.Notes = append(res.Notes, fmt.Sprintf("%s (%s) cut off from the broker for %v (the group's session is 10 s); at the end the group had %s",
		wk.Name, wk.IP, down, members))
	return err
}

// sweeperFromRedis cuts every sweeper off from Redis for Down while
// unpaid orders expire: each cancellation commits in PostgreSQL with its
// stock's return to Redis owed (redis_release_pending, an outbox), which
// must be paid once the link is back.
func (f *Fleet) sweeperFromRedis(ctx context.Context, w chaos.Watch, res *chaos.Result) error {
	sweepers := f.group("sweeper-")
	if len(sweepers) == 0 {
		return errors.New("netlab: no sweeper to cut off")
	}
	cancelledBefore, _, err := f.cancellations(ctx)
	if err != nil {
		return err
	}
	heal := f.lab.Partition(sweepers, f.group("redis"))
	err = pause.For(ctx, f.opts.Down)
	cancelled, owed, cerr := f.cancellations(ctx)
	heal()
	healed := time.Now()
	if err = errors.Join(err, cerr); err != nil {
		return err
	}
	res.FaultEnded = healed
	res.Notes = append(res.Notes, fmt.Sprintf("%d sweepers cut off from Redis for %v: %d orders cancelled meanwhile, %d returns of stock to Redis owed at the end",
		len(sweepers), f.opts.Down, cancelled-cancelledBefore, owed))
	if owed == 0 {
		return nil
	}
	return untilGone(ctx, healed, res, "every return paid", func() (string, error) {
		_, owed, err := f.cancellations(ctx)
		if owed == 0 {
			return "", err
		}
		return fmt.Sprintf("%d returns still owed", owed), err
	})
}

// cancellations counts the cancelled orders and those whose stock's
// return to Redis is still owed.
func (f *Fleet) cancellations(ctx context.Context) (cancelled, owed int64, err error) {
	err = f.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'cancelled'), count(*) FILTER (WHERE redis_release_pending)
		FROM orders`).Scan(&cancelled, &owed)
	return cancelled, owed, err
}

// groupMembers says the workers' consumer group's state and members.
func (f *Fleet) groupMembers() string {
	admin, err := sarama.NewClusterAdmin(f.Brokers(), kafkaq.ConsumerGroupConfig())
	if err != nil {
		return "no answer: " + err.Error()
	}
	defer func() { _ = admin.Close() }()
	groups, err := admin.DescribeConsumerGroups([]string{kafkaq.DefaultGroup})
	if err != nil || len(groups) != 1 {
		return fmt.Sprintf("no answer: %v", err)
	}
	var hosts []string
	for _, m := range groups[0].Members {
		hosts = append(hosts, m.ClientHost)
	}
	slices.Sort(hosts)
	return fmt.Sprintf("%d members (%s), state %s", len(hosts), strings.Join(hosts, ", "), groups[0].State)
}

// gatewayFromShoppers cuts the last gateway off from the shoppers' hosts
// (the control host when they have none of their own) for Down, and from
// nothing else: its
// connections go silent, each shopper waits out its client's timeout
// (15 s) and asks the next gateway with the same key, which must give the
// same order back.
func (f *Fleet) gatewayFromShoppers(ctx context.Context, w chaos.Watch, res *chaos.Result) error {
	gws := f.group("gateway-")
	gw, cut := gws[len(gws)-1], len(gws)-1
	began := time.Now()
	shoppers := f.shoppers
	if len(shoppers) == 0 {
		shoppers = []*Host{f.lab.Control()}
	}
	heal := f.lab.Partition([]*Host{gw}, shoppers)
	err := pause.For(ctx, f.opts.Down)
	heal()
	healed := time.Now()
	if err == nil {
		err = settle(ctx, w, 30*time.Second)
	}
	if err != nil {
		return err
	}
	res.FaultEnded = healed
	during := window(w.Answers(), began, healed)
	res.Notes = append(res.Notes,
		fmt.Sprintf("%s (%s) cut off from its shoppers (%s) for %v; the buys sent to it meanwhile: %s", gw.Name, gw.IP, hostNames(shoppers), f.opts.Down, during.of(cut)),
		fmt.Sprintf("the buys sent to the other gateways meanwhile (retries from it among them): %s", during.except(cut)))
	return nil
}

// watchBreakers asks every gateway for its breaker every 250 ms until the
// returned function is called, which says what each gateway's breaker
// was seen doing.
func (f *Fleet) watchBreakers(ctx context.Context) func() string {
	ctx, cancel := context.WithCancel(ctx)
	seen := make([]map[string]int, len(f.Gateways))
	var wg sync.WaitGroup
	for i, g := range f.Gateways {
		seen[i] = map[string]int{}
		wg.Go(func() {
			for ctx.Err() == nil {
				seen[i][breakerState(ctx, g.Addr, f.AdminToken)]++
				_ = pause.For(ctx, 250*time.Millisecond)
			}
		})
	}
	return func() string {
		cancel()
		wg.Wait()
		parts := make([]string, len(seen))
		for i, m := range seen {
			parts[i] = f.Gateways[i].Name + " " + counts(m)
		}
		return strings.Join(parts, "; ")
	}
}

// breakerState is a gateway's GET /api/v1/admin/breaker state (with the
// paths not closed), or why there was none.
func breakerState(ctx context.Context, addr, admin string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v1/admin/breaker", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "no answer in 2 s"
		}
		return "no answer"
	}
	defer resp.Body.Close()
	var out struct {
		State string            `json:"state"`
		Paths map[string]string `json:"paths"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		return "HTTP " + resp.Status
	}
	state := out.State
	for _, p := range slices.Sorted(maps.Keys(out.Paths)) {
		if out.Paths[p] != "closed" {
			state += " (" + p + " " + out.Paths[p] + ")"
		}
	}
	return state
}
