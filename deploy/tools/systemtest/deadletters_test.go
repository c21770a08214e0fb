package systemtest

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/cmd/seckill/app"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// A message the workers cannot read goes to the dead-letter topic (counted
// on /metrics), the partition moves on, and the hold it stood for still ends:
// the reconciler records it failed and gives its stock back. Operators list
// the letter and replay it with `seckill deadletters`.
func TestPoisonMessageIsDeadLetteredAndItsHoldEnds(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	ctx := context.Background()
	vid := ts.createVoucher(t, 5, 5, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	v, err := strconv.ParseInt(vid, 10, 64)
	require.NoError(t, err)

	// A gateway held stock for order 777 and wrote a message for it that
	// no worker can read (a bug in some producer).
	stock := redisstock.New(redisstock.Config{Redis: ts.rdb})
	orderID := v*10 + 7
	_, err = stock.Reserve(ctx, seckill.Reservation{OrderID: orderID, VoucherID: v, UserID: 77, Quantity: 2, ReservedAt: time.Now()})
	require.NoError(t, err)
	raw, err := sarama.NewSyncProducer(ts.cfg.KafkaBrokers, kafkaq.ProducerConfig())
	require.NoError(t, err)
	defer raw.Close()
	poison := `{"order_id":"` + strconv.FormatInt(orderID, 10) + `","voucher_id":"` + vid + `","user_id":"77","quantity":"two"}`
	_, _, err = raw.SendMessage(&sarama.ProducerMessage{Topic: ts.cfg.KafkaTopic, Key: sarama.StringEncoder(vid), Value: sarama.StringEncoder(poison)})
	require.NoError(t, err)

	// The partition is not blocked: a buy after it is persisted.
	shopper := ts.shopper(t, testUser())
	b := ts.buy(t, vid, shopper, 1, "")
	require.Equal(t, http.StatusAccepted, b.status, "%s", b.raw)
	ts.waitStatus(t, shopper, b.body["order_id"].(string), "created")

	getenv := func(k string) string {
		return map[string]string{
			"SECKILL_KAFKA_BROKERS": strings.Join(ts.cfg.KafkaBrokers, ","), "SECKILL_KAFKA_TOPIC": ts.cfg.KafkaTopic,
		}[k]
	}
	deadletters := func(args ...string) string {
		var out, errOut bytes.Buffer
		require.NoError(t, app.Run(ctx, append([]string{"deadletters"}, args...), getenv, &out, &errOut), "%s", errOut.String())
		return out.String()
	}
	require.Eventually(t, func() bool {
		return counter(t, ts.scrape(t), "seckill_consumer_dead_letters_total", "reason", kafkaq.ReasonUndecodable) == 1
	}, 30*time.Second, 50*time.Millisecond)
	list := deadletters("list")
	require.Contains(t, list, "0/0 ")
	require.Contains(t, list, kafkaq.ReasonUndecodable)
	require.Contains(t, list, "1 dead letters")
	require.Contains(t, deadletters("--json", "list"), `"quantity\":\"two\"`)

	// The workers made the dead-letter topic themselves, with the cluster's
	// replication: three copies, and a write needs two of them, as for the
	// orders topic (docker-compose.yml creates only that one).
	requireReplicated(t, ts.cfg.KafkaBrokers, ts.cfg.DeadLetterTopic(), 3, "2")

	// Every reservation ends: the hold is failed in PostgreSQL and its
	// stock is back in Redis, without anybody acting.
	require.Eventually(t, func() bool {
		var status string
		err := ts.pool.QueryRow(ctx, `SELECT status FROM orders WHERE id = $1`, orderID).Scan(&status)
		if err != nil || status != "failed" {
			return false
		}
		snap, err := stock.Snapshot(ctx, v)
		return err == nil && snap.Pending == 0 && snap.Left == 4
	}, 60*time.Second, 100*time.Millisecond, "the poisoned hold never ended")
	ts.checkInvariants(t, vid, 5)

	// A replay sends it back to the workers, which set it aside again.
	require.Contains(t, deadletters("replay", "0/0"), "replayed")
	require.Eventually(t, func() bool {
		return counter(t, ts.scrape(t), "seckill_consumer_dead_letters_total", "reason", kafkaq.ReasonUndecodable) == 2
	}, 30*time.Second, 50*time.Millisecond)
	var out, errOut bytes.Buffer
	require.Error(t, app.Run(ctx, []string{"deadletters", "replay", "zero"}, getenv, &out, &errOut))
	ts.checkInvariants(t, vid, 5)
}

// requireReplicated checks that every partition of topic has replicas
// copies, all in sync, and that the topic's min.insync.replicas is minISR.
func requireReplicated(t *testing.T, brokers []string, topic string, replicas int, minISR string) {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, kafkaq.ConsumerGroupConfig())
	require.NoError(t, err)
	defer admin.Close()
	metas, err := admin.DescribeTopics([]string{topic})
	require.NoError(t, err)
	require.Len(t, metas, 1)
	require.NotEmpty(t, metas[0].Partitions, "topic %s", topic)
	for _, p := range metas[0].Partitions {
		require.Len(t, p.Replicas, replicas, "topic %s partition %d's replicas", topic, p.ID)
		require.ElementsMatch(t, p.Replicas, p.Isr, "topic %s partition %d: every replica in sync", topic, p.ID)
	}
	res, err := admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"min.insync.replicas"}}}, sarama.DescribeConfigsOptions{})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, sarama.ErrNoError, res[0].ErrorCode, "topic %s: %s", topic, res[0].ErrorMsg)
	entries := res[0].Configs
	require.Len(t, entries, 1, "topic %s's min.insync.replicas", topic)
	require.Equal(t, minISR, entries[0].Value, "topic %s's min.insync.replicas", topic)
}
