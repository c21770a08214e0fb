package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
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
