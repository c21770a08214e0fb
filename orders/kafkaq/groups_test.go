package kafkaq_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/kafkaq"
)

// groupMembers returns the members of group that hold partitions of
// topic, each with the partitions it was assigned, once the group is
// Stable; nil while it rebalances or cannot be described.
func groupMembers(t testing.TB, brokers []string, group, topic string) map[string][]int32 {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, kafkaq.ConsumerGroupConfig())
	if err != nil {
		t.Logf("kafka admin: %v", err)
		return nil
	}
	defer admin.Close()
	groups, err := admin.DescribeConsumerGroups([]string{group})
	if err != nil || len(groups) != 1 {
		t.Logf("describe group %s: %v", group, err)
		return nil
	}
	if groups[0].State != "Stable" {
		return nil
	}
	out := map[string][]int32{}
	for id, m := range groups[0].Members {
		a, err := m.GetMemberAssignment()
		if err != nil {
			t.Logf("member %s assignment: %v", id, err)
			return nil
		}
		out[id] = a.Topics[topic]
	}
	return out
}

// offsetWatch samples a group's committed offsets until stopped and checks
// on each sample that they never go backwards and that every message below
// them is already persisted (PostgreSQL is read after the offsets, and
// effects only grow, so a commit ahead of its transaction shows).
type offsetWatch struct {
	stop func()
	mu   sync.Mutex
	errs []string
	max  map[int32]int64
}

func watchOffsets(t *testing.T, b kafka, pool *pgxpool.Pool, group, topic string, log [][]int64) *offsetWatch {
	w := &offsetWatch{max: map[int32]int64{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			offs := committed(t, b, group, topic, int32(len(log)))
			for part, off := range offs {
				if off < 0 {
					continue // nothing committed yet
				}
				w.mu.Lock()
				if off < w.max[part] {
					w.errs = append(w.errs, fmt.Sprintf("partition %d: committed offset went back from %d to %d", part, w.max[part], off))
				}
				w.max[part] = max(w.max[part], off)
				w.mu.Unlock()
				var persisted int64
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM effects WHERE order_id = ANY($1)`, log[part][:off]).Scan(&persisted); err != nil {
					continue // the test is ending
				}
				if persisted < off {
					w.mu.Lock()
					w.errs = append(w.errs, fmt.Sprintf("partition %d: offset %d committed with %d of its messages persisted", part, off, persisted))
					w.mu.Unlock()
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	w.stop = func() { cancel(); <-done }
	t.Cleanup(w.stop)
	return w
}

func (w *offsetWatch) check(t *testing.T) {
	t.Helper()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Empty(t, w.errs)
}
