package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/cost"
	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/api"
)

func TestPublishBatchArrivesInOrder(t *testing.T) {
	hub, _ := startHub(t, notify.HubConfig{})
	pub := notify.NewPublisher(newRedis(t))
	buyer := hub.Subscribe(701)
	defer buyer.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, pub.PublishBatch(ctx, nil))
	at := time.Now()
	require.NoError(t, pub.PublishBatch(ctx, []orders.Event{
		{Order: order(7001, 701, orders.StatusCreated), At: at},
		{Order: order(7002, 702, orders.StatusCreated), At: at},
		{Order: order(7003, 701, orders.StatusFailed), At: at},
	}))
	f := next(t, buyer)
	require.Equal(t, notify.OrderJSON(order(7001, 701, orders.StatusCreated)), *f.Order)
	f = next(t, buyer)
	require.Equal(t, notify.OrderJSON(order(7003, 701, orders.StatusFailed)), *f.Order)
	requireNothing(t, buyer)
}

// TestPublishBatchOneMessagePerChannel: a batch of many buyers' events over
// a few shard channels costs one SPUBLISH per channel (counted by Redis,
// every master's on the cluster), and each buyer's sockets on two hubs get
// its events once each, in order, and nobody else's.
func TestPublishBatchOneMessagePerChannel(t *testing.T) {
	for _, shape := range stack.RedisShapes(t) {
		t.Run(shape.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			hubs := startHubs(t, shape, 2)
			rdb := stack.Client(t, shape)
			pub := notify.NewPublisher(rdb)

			// Four buyers on each of six channels, three events each,
			// interleaved across buyers as a worker's batch is.
			shards := []int64{0, 3, 5, 7, 11, 14}
			var users []int64
			for k := range int64(4) {
				for _, s := range shards {
					users = append(users, 3000+k*notify.ChannelCount+s)
				}
			}
			statuses := []orders.Status{orders.StatusCreated, orders.StatusPaid, orders.StatusCancelled}
			var batch, markers []orders.Event
			for round, st := range statuses {
				for _, u := range users {
					batch = append(batch, orders.Event{Order: order(u*10+int64(round), u, st), At: time.Now()})
				}
			}
			subs := map[int64][]*notify.Subscription{}
			for _, u := range users {
				for _, h := range hubs {
					s := h.Subscribe(u)
					t.Cleanup(s.Close)
					subs[u] = append(subs[u], s)
				}
				markers = append(markers, orders.Event{Order: order(u*10+9, u, orders.StatusFailed), At: time.Now()})
			}
			// A buyer of a channel the batch uses, and one of a channel it
			// does not, each without events.
			bystanders := []*notify.Subscription{hubs[0].Subscribe(3000 + 8*notify.ChannelCount), hubs[1].Subscribe(3000 + 1)}
			for _, s := range bystanders {
				t.Cleanup(s.Close)
			}
			channels := map[string]bool{}
			for _, e := range batch {
				channels[notify.ChannelOf(e.Order.UserID)] = true
			}
			require.Len(t, channels, len(shards))

			before, err := cost.ReadRedis(ctx, rdb)
			require.NoError(t, err)
			require.NoError(t, pub.PublishBatch(ctx, batch))
			after, err := cost.ReadRedis(ctx, rdb)
			require.NoError(t, err)
			spublish := after.Sub(before).Commands["spublish"].Calls
			require.LessOrEqual(t, spublish, int64(len(channels)), "%d events", len(batch))
			require.Positive(t, spublish)
			// A second batch marks the end: anything of the first one seen
			// twice would come before it on its channel.
			require.NoError(t, pub.PublishBatch(ctx, markers))

			for _, u := range users {
				for i, s := range subs[u] {
					for round, st := range statuses {
						f := next(t, s)
						require.Equal(t, fmt.Sprint(u*10+int64(round)), f.Order.OrderID, "hub %d user %d", i, u)
						require.EqualValues(t, st, f.Order.Status, "in publish order")
					}
					require.Equal(t, fmt.Sprint(u*10+9), next(t, s).Order.OrderID, "hub %d user %d: once each", i, u)
					requireNothing(t, s)
				}
			}
			for _, s := range bystanders {
				requireNothing(t, s)
			}
		})
	}
}

// TestPublishBatchBoundsAMessage: a channel's share of a batch larger than
// MaxMessageBytes goes out as several arrays, none over the bound, in order.
func TestPublishBatchBoundsAMessage(t *testing.T) {
	hub, _ := startHub(t, notify.HubConfig{BufferSize: 1024})
	rdb := newRedis(t)
	pub := notify.NewPublisher(rdb)
	const user = 901
	sub := hub.Subscribe(user)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	raw := rdb.SSubscribe(ctx, notify.ChannelOf(user))
	defer raw.Close()
	_, err := raw.Receive(ctx)
	require.NoError(t, err)

	const n = 500 // about 400 bytes each: three messages or more
	batch := make([]orders.Event, n)
	for i := range batch {
		batch[i] = orders.Event{Order: order(int64(20_000+i), user, orders.StatusCreated), At: time.Now()}
	}
	before, err := cost.ReadRedis(ctx, rdb)
	require.NoError(t, err)
	require.NoError(t, pub.PublishBatch(ctx, batch))
	after, err := cost.ReadRedis(ctx, rdb)
	require.NoError(t, err)
	spublish := int(after.Sub(before).Commands["spublish"].Calls)
	require.Greater(t, spublish, 2)

	var ids []string
	for range spublish {
		m, err := raw.ReceiveMessage(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, len(m.Payload), notify.MaxMessageBytes)
		var list []struct {
			Order api.Order `json:"order"`
		}
		require.NoError(t, json.Unmarshal([]byte(m.Payload), &list))
		for _, e := range list {
			ids = append(ids, e.Order.OrderID)
		}
	}
	require.Len(t, ids, n)
	for i := range n {
		require.Equal(t, strconv.Itoa(20_000+i), ids[i])
		require.Equal(t, ids[i], next(t, sub).Order.OrderID)
	}
	requireNothing(t, sub)
}

// BenchmarkPublishBatch is what a worker's batch of 64 events costs Redis,
// with two hubs (two gateways) reading every channel: "one-per-event" is
// PublishBatch as it was (one SPUBLISH per event, pipelined),
// "one-per-channel" as it is. "channels-16" spreads the batch's 64 buyers
// four to a shard channel, as a crowd's batch is; "channels-1" puts them all
// on one, which leaves out what Redis spends per subscribed connection it
// writes to (each hub holds one per channel). An op is one batch;
// redis-cpu-µs/event is the server's CPU (INFO cpu) per event,
// spublish/event its SPUBLISH calls (INFO commandstats), and
// client-cpu-µs/event this process's CPU, the hubs' reading included.
// Compare the two paths in the same run.
func BenchmarkPublishBatch(b *testing.B) {
	const size = 64
	for range 2 {
		reg := prometheus.NewRegistry()
		h, err := notify.NewHub(notify.HubConfig{Redis: newRedis(b), Registerer: reg})
		require.NoError(b, err)
		b.Cleanup(runHub(b, h))
	}
	rdb := newRedis(b)
	pub := notify.NewPublisher(rdb)
	ctx := context.Background()
	for _, channels := range []int64{notify.ChannelCount, 1} {
		for _, c := range []struct {
			name    string
			publish func(context.Context, []orders.Event) error
		}{
			{"one-per-event", pub.PublishEach},
			{"one-per-channel", pub.PublishBatch},
		} {
			b.Run(fmt.Sprintf("channels-%d/%s", channels, c.name), func(b *testing.B) {
				batch := make([]orders.Event, size)
				for i := range batch {
					// Users 5000 + i*16/channels: i's shard channel when
					// spread, all on 5000's otherwise.
					user := 5000 + int64(i)*notify.ChannelCount/channels
					batch[i] = orders.Event{Order: order(int64(i), user, orders.StatusCreated), At: time.Now()}
				}
				server, err := cost.ReadRedis(ctx, rdb)
				require.NoError(b, err)
				client := cpuTime(b)
				b.ResetTimer()
				for i := range b.N {
					for j := range batch {
						batch[j].Order.ID = int64(i*size + j)
					}
					if err := c.publish(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				after, err := cost.ReadRedis(ctx, rdb)
				require.NoError(b, err)
				d, events := after.Sub(server), float64(b.N*size)
				b.ReportMetric(float64(d.CPU.Microseconds())/events, "redis-cpu-µs/event")
				b.ReportMetric(float64(d.Commands["spublish"].Calls)/events, "spublish/event")
				b.ReportMetric(float64((cpuTime(b)-client).Microseconds())/events, "client-cpu-µs/event")
			})
		}
	}
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
