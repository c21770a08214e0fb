package chaos

// The systems a fault is injected into, and each one's faults: the services
// with a gateway, a worker and a sweeper as processes; a fleet of several;
// and the whole `seckill dev` process.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flashsale/seckill/deploy/tools/fleet"
	"github.com/flashsale/seckill/seckill/pause"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// --- the services and `seckill serve` processes

// served is the shared services with the system as three processes: a
// gateway, a worker and a sweeper (a fleet of one of each).
type served struct {
	r *runner
	*fleet.Fleet
	rdb *redis.Client

	gateway, worker *fleet.Process // what the faults strike
	api             *api
	// apache is the Apache Kafka cluster the processes use instead of the
	// fleet's in-process broker (Options.ApacheKafka); nil otherwise.
	apache *apacheServed
}

// servedEnv is the served system's settings over the fleet's.
func servedEnv() map[string]string {
	// The crowd buys without sockets: the socket flood meets the shipped
	// cap per address.
	return map[string]string{"SECKILL_WS_PER_ADDR": strconv.Itoa(floodSocketsPerAddr)}
}

func (r *runner) startServed(ctx context.Context) (_ *served, err error) {
	// The in-process broker (the fleet's default, unless Options.ApacheKafka): the worker and gateway
	// kills strike while it leaves a kind of request unanswered (withhold,
	// through its request hooks), and the broker restart is its Stop and
	// Start; Apache Kafka has neither hook.
	dir := filepath.Join(r.opts.Dir, "served")
	if r.opts.ApacheKafka {
		return r.startApacheServed(ctx, dir)
	}
	f, err := fleet.Start(ctx, fleet.Options{
		Bin: r.opts.Bin, Dir: dir,
		Shape:        fleet.Shape{Gateways: 1, Workers: 1, Sweepers: 1},
		RedisPersist: true, AdminToken: r.admin, JWTSecret: r.secret, Logf: r.opts.Logf,
		Env: servedEnv(),
	})
	if err != nil {
		return nil, err
	}
	s := &served{r: r, Fleet: f, gateway: f.Gateways[0], worker: f.Workers[0]}
	if err := s.finish(); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// finish opens the suite's clients of the started system.
func (s *served) finish() error {
	ropts, err := redis.ParseURL(s.Redis.URL)
	if err != nil {
		return err
	}
	s.rdb = redis.NewClient(ropts)
	s.api = newAPI(s.gateway.Addr, s.r.admin, nil)
	return nil
}

func (s *served) close() {
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
	if s.apache != nil && s.worker != nil {
		s.worker.Stop(10 * time.Second)
	}
	s.Fleet.Close()
	if s.apache != nil {
		s.apache.close()
	}
}

// fault returns the injection of a fault on the served system. It returns
// once the fault is over: the service or process is back.
func (s *served) fault(name string) func(ctx context.Context, c *crowd, res *Result) error {
	o := s.r.opts
	if s.apache != nil {
		if f := s.apacheFault(name); f != nil {
			return f
		}
	}
	switch name {
	case FaultPostgresFrozen:
		return func(ctx context.Context, _ *crowd, _ *Result) error {
			if err := s.Postgres.Freeze(); err != nil {
				return err
			}
			defer s.Postgres.Thaw()
			return pause.For(ctx, o.Freeze)
		}
	case FaultPostgresRestart:
		return func(ctx context.Context, _ *crowd, _ *Result) error { return s.Postgres.Restart(ctx) }
	case FaultRedisKilled:
		return func(ctx context.Context, _ *crowd, _ *Result) error {
			s.Redis.Kill()
			if err := pause.For(ctx, o.Down); err != nil {
				return err
			}
			return s.Redis.Restart(ctx)
		}
	case FaultRedisDataLost:
		return func(ctx context.Context, _ *crowd, _ *Result) error { return s.rdb.FlushAll(ctx).Err() }
	case FaultWorkerKilled:
		return func(ctx context.Context, c *crowd, res *Result) error {
			// Offset commits get no answer: the worker persists a batch in
			// PostgreSQL and then waits on its Kafka commit, where it dies.
			held, release := s.withhold(kmsg.OffsetCommit)
			defer release()
			if err := waitHeld(ctx, held, "an offset commit"); err != nil {
				return err
			}
			if err := pause.For(ctx, 300*time.Millisecond); err != nil {
				return err
			}
			s.worker.Kill()
			res.Notes = append(res.Notes, fmt.Sprintf("worker killed with %d offset commits unanswered", held.Load()))
			release()
			return s.worker.Start(ctx, time.Minute)
		}
	case FaultGatewayKilled:
		return func(ctx context.Context, c *crowd, res *Result) error {
			// Produce requests get no answer: buys have run reserve.lua and
			// wait on the Kafka write, where the gateway dies.
			held, release := s.withhold(kmsg.Produce)
			defer release()
			if err := waitHeld(ctx, held, "a produce request"); err != nil {
				return err
			}
			if err := pause.For(ctx, time.Second); err != nil {
				return err
			}
			caught := c.inFlight.Load()
			s.gateway.Kill()
			res.Notes = append(res.Notes, fmt.Sprintf("gateway killed with %d buys in flight", caught))
			release()
			return s.gateway.Start(ctx, time.Minute)
		}
	case FaultDescriptors:
		return s.exhaustDescriptors
	case FaultSocketFlood:
		return s.floodSockets
	case FaultBrokerRestart:
		return func(ctx context.Context, _ *crowd, _ *Result) error {
			s.Kafka.Stop()
			if err := pause.For(ctx, o.Down); err != nil {
				return err
			}
			return s.Kafka.Start(ctx)
		}
	}
	return func(context.Context, *crowd, *Result) error { return fmt.Errorf("chaos: no injection for %q", name) }
}

// withhold makes the broker leave every request of kind unanswered (its
// client waits, as on a stalled broker) until release. held counts the
// requests withheld.
func (s *served) withhold(kind kmsg.Key) (held *atomic.Int64, release func()) {
	held = new(atomic.Int64)
	var on atomic.Bool
	on.Store(true)
	k := s.Kafka.Cluster()
	k.ControlKey(kind.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !on.Load() {
			k.DropControl()
			return nil, nil, false
		}
		k.KeepControl()
		held.Add(1)
		return nil, nil, true // handled, and no answer
	})
	return held, func() { on.Store(false) }
}

func waitHeld(ctx context.Context, held *atomic.Int64, what string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for held.Load() == 0 {
		if err := pause.For(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("chaos: no %s reached the broker: %w", what, err)
		}
	}
	return nil
}

// --- a fleet: several gateways, workers and sweepers

// fleetRun is a fleet of its own for FaultFleet.
type fleetRun struct {
	*fleet.Fleet
	apis []*api // one per gateway, in order
}

func (r *runner) startFleet(ctx context.Context) (*fleetRun, error) {
	shape := r.opts.Fleet
	if shape.Gateways == 0 {
		shape = fleet.Fleet3x2x2
	}
	if shape.Gateways < 2 || shape.Workers < 2 {
		return nil, fmt.Errorf("chaos: a fleet that loses a gateway and a worker needs two of each at least (shape %+v)", shape)
	}
	// Apache Kafka, three nodes: the topology of docker-compose.yml, and
	// this fault needs no hook into the broker.
	f, err := fleet.Start(ctx, fleet.Options{
		Bin: r.opts.Bin, Dir: filepath.Join(r.opts.Dir, "fleet"), Shape: shape, Broker: fleet.BrokerApache3,
		AdminToken: r.admin, JWTSecret: r.secret, Logf: r.opts.Logf,
	})
	if err != nil {
		return nil, err
	}
	fr := &fleetRun{Fleet: f}
	for _, addr := range f.GatewayAddrs() {
		fr.apis = append(fr.apis, newAPI(addr, r.admin, nil))
	}
	return fr, nil
}

// killGatewayAndWorker kills the last gateway and the first worker with
// SIGKILL, while buys are on their way, and leaves them dead: the other
// gateways take the shoppers who retry, the other workers take the dead
// one's partitions once the group's session times out. The first gateway,
// which the checks ask, stays.
func (f *fleetRun) killGatewayAndWorker(_ context.Context, c *crowd, res *Result) error {
	// Strike while a buy is on its way, when one comes within a second.
	for end := time.Now().Add(time.Second); c.inFlight.Load() == 0 && time.Now().Before(end); {
		time.Sleep(200 * time.Microsecond)
	}
	caught := c.inFlight.Load()
	gw, w := f.Gateways[len(f.Gateways)-1], f.Workers[0]
	gw.Kill()
	w.Kill()
	res.Notes = append(res.Notes, fmt.Sprintf("%s (%s) and %s killed with %d buys in flight across the fleet; %d gateways and %d workers left",
		gw.Name, gw.Addr, w.Name, caught, len(f.Gateways)-1, len(f.Workers)-1))
	kafka := "the in-process broker"
	if f.ApacheKafka != nil {
		kafka = fmt.Sprintf("Apache Kafka, %d nodes", len(f.ApacheKafka.Brokers))
	}
	res.Notes = append(res.Notes, "on "+kafka)
	return nil
}

// --- the whole process: `seckill dev`

// dev is one `seckill dev` process on its own data folder.
type dev struct {
	r    *runner
	proc *fleet.Process
	api  *api
	pool atomic.Pointer[pgxpool.Pool]
}

func (r *runner) startDev(ctx context.Context) (*dev, error) {
	dir := filepath.Join(r.opts.Dir, "dev")
	addr, err := fleet.FreeAddr()
	if err != nil {
		return nil, err
	}
	d := &dev{r: r}
	env := fleet.BaseEnv(r.admin, r.secret)
	env["SECKILL_HTTP_ADDR"] = addr
	env["SECKILL_DATA_DIR"] = filepath.Join(dir, "data")
	env["SECKILL_DEMO_VOUCHER"] = "false"
	d.proc = fleet.NewProcess("dev", r.opts.Bin, dir, []string{"dev"}, env)
	if err := mkdir(dir); err != nil {
		return nil, err
	}
	r.opts.Logf("starting seckill dev in %s", dir)
	if err := d.start(ctx); err != nil {
		d.close()
		return nil, err
	}
	d.api = newAPI(addr, r.admin, nil)
	return d, nil
}

// start starts the process and opens a pool on the PostgreSQL it started.
func (d *dev) start(ctx context.Context) error {
	if err := d.proc.Start(ctx, 2*time.Minute); err != nil {
		return err
	}
	url, err := lastPostgresURL(d.proc.LogPath)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	if old := d.pool.Swap(pool); old != nil {
		old.Close()
	}
	return nil
}

func (d *dev) currentPool() *pgxpool.Pool { return d.pool.Load() }

// killAndRestart kills the process with SIGKILL (its Redis and PostgreSQL
// children get the kernel's parent-death signal), waits until they are gone
// and starts it again on the same data folder.
func (d *dev) killAndRestart(ctx context.Context, c *crowd, res *Result) error {
	// Strike while a buy is on its way, when one comes within a second (a
	// buy takes milliseconds, so most moments have none).
	for end := time.Now().Add(time.Second); c.inFlight.Load() == 0 && time.Now().Before(end); {
		time.Sleep(200 * time.Microsecond)
	}
	caught := c.inFlight.Load()
	kids := d.proc.Kill()
	res.Notes = append(res.Notes, fmt.Sprintf("seckill dev killed with %d buys in flight; %d child processes", caught, len(kids)))
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := fleet.WaitGone(wctx, kids); err != nil {
		return err
	}
	return d.start(ctx)
}

func (d *dev) close() {
	d.proc.Stop(30 * time.Second)
	if p := d.pool.Load(); p != nil {
		p.Close()
	}
}

func mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}
