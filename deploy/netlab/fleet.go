package netlab

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/seckill/deploy/chaos"
	"github.com/flashsale/seckill/deploy/fleet"
	"github.com/flashsale/seckill/deploy/localstack"
	"github.com/flashsale/seckill/seckill/pause"
)

// Names of the faults a Fleet makes, in the order Faults lists them.
const (
	FaultGatewayRedis   = "net: a gateway cut off from Redis"
	FaultSlowRedis      = "net: 40 ms round trip and 1 % loss between the gateways and Redis"
	FaultWorkerPostgres = "net: a worker cut off from PostgreSQL mid-batch"
)

// Faults lists every fault a Fleet makes.
func Faults() []string {
	return []string{FaultGatewayRedis, FaultSlowRedis, FaultWorkerPostgres}
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
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

// Fleet is a fleet of `seckill serve` processes (deploy/fleet) with every
// service and process on a host of its own, and the faults it can make.
type Fleet struct {
	*fleet.Fleet
	lab  *Lab
	opts FleetOptions

	mu       sync.Mutex
	hosts    map[string]*Host // by the fleet's name: "gateway-1", "redis-2", "postgres"
	placeErr error            // the first host that could not be made
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
		Bin: opts.Bin, Dir: opts.Dir, Shape: opts.Shape, Logf: opts.Logf,
		Place: func(name string) localstack.Place {
			h, err := f.host(name)
			if err != nil {
				// A namespace that is not there: the start fails, and
				// says which host could not be made.
				return localstack.Place{Host: "10.231.0.255", Netns: "/nonexistent/" + name}
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
	return f, nil
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
	return &chaos.System{Fleet: f.Fleet, Faults: map[string]chaos.Inject{
		FaultGatewayRedis:   f.gatewayFromRedis,
		FaultSlowRedis:      f.slowRedis,
		FaultWorkerPostgres: f.workerFromPostgres,
	}}
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

// slowRedis puts 20 ms each way and 1 % loss each way between every
// gateway and every Redis node for Down: how many buys go through, how
// slowly, and whether a breaker opens though Redis answers.
func (f *Fleet) slowRedis(ctx context.Context, w chaos.Watch, res *chaos.Result) error {
	watch := f.watchBreakers(ctx)
	began := time.Now()
	restore := f.lab.Impair(f.group("gateway-"), f.group("redis"), Link{Delay: 20 * time.Millisecond, Jitter: time.Millisecond, Loss: 0.01})
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
		fmt.Sprintf("for %v with 40 ms and 1 %% loss: %s", f.opts.Down, during.summary()),
		"breakers seen meanwhile: "+breakers)
	return nil
}

// workerFromPostgres cuts the first worker off from PostgreSQL for Down
// while the crowd's orders stream in, so it is cut in the middle of a
// batch: its transaction's packets vanish both ways.
func (f *Fleet) workerFromPostgres(ctx context.Context, w chaos.Watch, res *chaos.Result) error {
	wk := f.group("worker-")[0]
	heal := f.lab.Partition([]*Host{wk}, f.group("postgres"))
	err := pause.For(ctx, f.opts.Down)
	heal()
	res.Notes = append(res.Notes, fmt.Sprintf("%s (%s) cut off from PostgreSQL for %v with %d buys in flight at the end",
		wk.Name, wk.IP, f.opts.Down, w.InFlight()))
	return err
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
