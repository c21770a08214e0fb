package netlab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/flashsale/seckill/deploy/tools/chaos"
	"github.com/flashsale/seckill/deploy/tools/fleet"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill/pause"
)

// FaultKafkaLeader needs Apache Kafka as three nodes (FleetOptions.Broker).
const FaultKafkaLeader = "net: the leader broker of a partition cut off from the other brokers"

// kafkaLeader cuts the node leading the orders topic's first partition off
// from the other two nodes, and from nothing else, for Down and at least
// 15 s (past the controller's broker session, 9 s by default): the clients
// still reach it, but it can neither replicate to its followers (so it
// cannot take a write with acks=all and min.insync.replicas 2) nor keep
// its place with the controller quorum, which moves its partitions'
// leadership to the others.
func (f *Fleet) kafkaLeader(ctx context.Context, w chaos.Watch, res *chaos.Result) error {
	ak := f.ApacheKafka
	if ak == nil {
		return errors.New("netlab: the Kafka leader fault needs Apache Kafka (FleetOptions.Broker)")
	}
	lead, err := ak.Leader(ctx, fleet.Topic, 0)
	if err != nil {
		return err
	}
	leader := f.hostOf(ak.Brokers[lead])
	if leader == nil {
		return fmt.Errorf("netlab: no host of the lab for broker %s", ak.Brokers[lead])
	}
	var others []string
	var otherHosts []*Host
	for i, a := range ak.Brokers {
		if i != lead {
			others = append(others, a)
			otherHosts = append(otherHosts, f.hostOf(a))
		}
	}
	if slices.Contains(otherHosts, nil) {
		return fmt.Errorf("netlab: no host of the lab for every broker of %v", ak.Brokers)
	}
	down := max(f.opts.Down, 15*time.Second)
	began := time.Now()
	heal := f.lab.Partition([]*Host{leader}, otherHosts)
	// When the majority gives partition 0 another leader.
	var moved time.Duration
	for deadline := began.Add(down); time.Now().Before(deadline); {
		if moved == 0 {
			if l, _, err := partitionView(others[0], 0); err == nil && l != int32(lead) && l >= 0 {
				moved = time.Since(began)
			}
		}
		if err := pause.For(ctx, 250*time.Millisecond); err != nil {
			heal()
			return err
		}
	}
	majority, isolated := viewOf(others[0]), viewOf(ak.Brokers[lead])
	members := f.groupMembers()
	heal()
	healed := time.Now()
	res.FaultEnded = healed
	during := window(w.Answers(), began, healed)
	movedText := "not within the cut"
	if moved > 0 {
		movedText = fmt.Sprintf("%.1f s after the cut", moved.Seconds())
	}
	res.Notes = append(res.Notes,
		fmt.Sprintf("%s (%s), node %d, leader of %s partition 0, cut off from the other brokers for %v; the others gave the partition another leader %s",
			leader.Name, leader.IP, lead, fleet.Topic, down, movedText),
		"at the end of the cut, partition 0 as the other brokers saw it: "+majority+"; as the cut-off one saw it: "+isolated,
		"the workers' group at the end of the cut: "+members,
		"the buys sent meanwhile: "+during.summary())
	return untilGone(ctx, healed, res, "every partition was led and in sync again", func() (string, error) {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := ak.WaitInSync(wctx); err != nil {
			return "not every partition in sync", nil
		}
		return "", nil
	})
}

// partitionView is the leader and in-sync replicas of the orders topic's
// partition as the broker at addr answers them.
func partitionView(addr string, partition int32) (leader int32, isr []int32, err error) {
	cfg := kafkaq.ConsumerGroupConfig()
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = time.Second, time.Second, time.Second
	b := sarama.NewBroker(addr)
	if err := b.Open(cfg); err != nil {
		return -1, nil, err
	}
	defer func() { _ = b.Close() }()
	md, err := b.GetMetadata(&sarama.MetadataRequest{Version: 7, Topics: []string{fleet.Topic}})
	if err != nil {
		return -1, nil, err
	}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			if p.ID == partition {
				return p.Leader, p.Isr, nil
			}
		}
	}
	return -1, nil, fmt.Errorf("netlab: %s has no partition %d of %s", addr, partition, fleet.Topic)
}

// viewOf says partition 0's leader and in-sync replicas as addr sees them.
func viewOf(addr string) string {
	l, isr, err := partitionView(addr, 0)
	if err != nil {
		return "no answer: " + err.Error()
	}
	ids := make([]string, len(isr))
	for i, n := range isr {
		ids[i] = strconv.Itoa(int(n))
	}
	return fmt.Sprintf("leader %d, in sync [%s]", l, strings.Join(ids, " "))
}
