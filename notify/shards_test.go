package notify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
)

// TestEventsReachEveryShardOnBothShapes runs two hubs (two gateways) and a
// publisher on the plain server and on the 3-master cluster: a buyer of
// every shard channel gets its events, published one by one and in
// batches, on both hubs, in order, and nobody else's.
func TestEventsReachEveryShardOnBothShapes(t *testing.T) {
	for _, shape := range stack.RedisShapes(t) {
		t.Run(shape.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			hubs := startHubs(t, shape, 2)
			pub := notify.NewPublisher(stack.Client(t, shape))

			// Users 1000..1000+2*ChannelCount-1: two buyers per channel.
			const first = 1000
			var subs [2][]*notify.Subscription
			var batch []orders.Event
			for u := int64(first); u < first+2*notify.ChannelCount; u++ {
				for i, h := range hubs {
					s := h.Subscribe(u)
					t.Cleanup(s.Close)
					subs[i] = append(subs[i], s)
				}
				publish(t, pub, order(u*10, u, orders.StatusCreated))
				batch = append(batch, orders.Event{Order: order(u*10, u, orders.StatusPaid), At: time.Now()})
			}
			require.NoError(t, pub.PublishBatch(ctx, batch))

			for i := range hubs {
				for j, s := range subs[i] {
					u := int64(first + j)
					f := next(t, s)
					require.Equal(t, fmt.Sprint(u*10), f.Order.OrderID, "hub %d user %d", i, u)
					require.EqualValues(t, orders.StatusCreated, f.Order.Status)
					f = next(t, s)
					require.Equal(t, fmt.Sprint(u*10), f.Order.OrderID)
					require.EqualValues(t, orders.StatusPaid, f.Order.Status, "in publish order")
					requireNothing(t, s)
				}
			}
		})
	}
}

// startHubs runs n hubs (n gateways) on the shape until t ends, each on a
// client of its own, and returns them Ready.
func startHubs(t *testing.T, shape stacktest.RedisShape, n int) []*notify.Hub {
	t.Helper()
	hubs := make([]*notify.Hub, n)
	for i := range hubs {
		h, err := notify.NewHub(notify.HubConfig{Redis: stack.Client(t, shape)})
		require.NoError(t, err)
		t.Cleanup(runHub(t, h))
		hubs[i] = h
	}
	return hubs
}

// TestChannelSlots checks the shard channels against the 3-master cluster:
// channel i's slot (the server's CLUSTER KEYSLOT) lies in the i-th sixteenth
// of the slots, so the masters share the channels evenly; and one
// subscription across two slots is refused (CROSSSLOT), which is why the
// hub holds one connection per channel.
func TestChannelSlots(t *testing.T) {
	shape := stack.RedisShapes(t)[1]
	rdb := stack.Client(t, shape).(*redis.ClusterClient)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	channels := notify.Channels()
	require.Len(t, channels, notify.ChannelCount)
	perMaster := map[string]int{}
	for i, ch := range channels {
		slot, err := rdb.ClusterKeySlot(ctx, ch).Result()
		require.NoError(t, err)
		require.GreaterOrEqual(t, slot, int64(i*16384/notify.ChannelCount), ch)
		require.Less(t, slot, int64((i+1)*16384/notify.ChannelCount), ch)
		m, err := rdb.MasterForKey(ctx, ch)
		require.NoError(t, err)
		perMaster[m.Options().Addr]++
	}
	require.Len(t, perMaster, 3, "every master carries channels: %v", perMaster)
	for addr, n := range perMaster {
		require.InDelta(t, notify.ChannelCount/3, n, 1, "an even share on %s: %v", addr, perMaster)
	}
	for u := range int64(3 * notify.ChannelCount) {
		require.Equal(t, channels[u%notify.ChannelCount], notify.ChannelOf(u))
	}

	ps := rdb.SSubscribe(ctx, channels[0], channels[1])
	defer ps.Close()
	_, err := ps.ReceiveTimeout(ctx, 5*time.Second)
	require.ErrorContains(t, err, "CROSSSLOT", "one SSUBSCRIBE over two slots")
}
