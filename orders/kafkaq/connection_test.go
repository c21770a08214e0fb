package kafkaq_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/kafkaq"
)

// cut is how the proxy breaks a connection that carries a produce request.
type cut int

const (
	// loseRequest closes the connection instead of passing the request on:
	// the broker never sees it.
	loseRequest cut = iota
	// loseAck passes the request on, waits for the broker's answer, drops
	// it and closes the connection: the broker has appended the batch, the
	// producer never hears so.
	loseAck
)

func (c cut) String() string {
	if c == loseAck {
		return "ack lost"
	}
	return "request lost"
}

// cuttingProxy is a TCP proxy in front of every broker of a cluster. The
// producer reaches the brokers through it (kafkaq.WithDialer): it reads
// the Kafka framing (a 4-byte size, then for a request the API key and
// correlation id, for an answer the correlation id) and breaks the
// connection of the next produce requests as its plan says, both sides at
// once, as a network failure would.
type cuttingProxy struct {
	t       testing.TB
	targets map[string]string // broker address -> the proxy's listener for it

	mu   sync.Mutex
	plan []cut // the cuts still to make, in order
	done []cut // the cuts made
}

func newCuttingProxy(t testing.TB, brokers []string, plan ...cut) *cuttingProxy {
	t.Helper()
	p := &cuttingProxy{t: t, targets: map[string]string{}, plan: plan}
	for _, b := range brokers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = ln.Close() })
		p.targets[b] = ln.Addr().String()
		go p.serve(ln, b)
	}
	return p
}

// Dial connects to the proxy's listener for addr (a broker's advertised
// address); it implements kafkaq.Dialer.
func (p *cuttingProxy) Dial(network, addr string) (net.Conn, error) {
	via, ok := p.targets[addr]
	if !ok {
		return nil, errors.New("cutting proxy: no listener for " + addr)
	}
	return net.DialTimeout(network, via, 5*time.Second)
}

func (p *cuttingProxy) cuts() []cut {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]cut(nil), p.done...)
}

// next takes the next cut of the plan, if any is left.
func (p *cuttingProxy) next() (cut, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.plan) == 0 {
		return 0, false
	}
	c := p.plan[0]
	p.plan = p.plan[1:]
	return c, true
}

func (p *cuttingProxy) made(c cut) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = append(p.done, c)
}

func (p *cuttingProxy) serve(ln net.Listener, broker string) {
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", broker, 5*time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		go p.pipe(client.(*net.TCPConn), server.(*net.TCPConn))
	}
}

// pipe carries one connection until either side or a cut closes it.
func (p *cuttingProxy) pipe(client, server *net.TCPConn) {
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			// No lingering: both ends get a reset, not an orderly end.
			_ = client.SetLinger(0)
			_ = server.SetLinger(0)
			_ = client.Close()
			_ = server.Close()
		})
	}
	defer closeBoth()
	var mu sync.Mutex
	dropAnswer := map[int32]bool{} // correlation ids whose answer is to be lost
	go func() {
		defer closeBoth()
		for {
			frame, err := readFrame(server)
			if err != nil {
				return
			}
			corr := int32(binary.BigEndian.Uint32(frame[4:8]))
			mu.Lock()
			drop := dropAnswer[corr]
			mu.Unlock()
			if drop {
				p.made(loseAck)
				return
			}
			if _, err := client.Write(frame); err != nil {
				return
			}
		}
	}()
	for {
		frame, err := readFrame(client)
		if err != nil {
			return
		}
		const produceKey = 0
		if len(frame) >= 12 && binary.BigEndian.Uint16(frame[4:6]) == produceKey {
			if c, ok := p.next(); ok {
				if c == loseRequest {
					p.made(loseRequest)
					return
				}
				mu.Lock()
				dropAnswer[int32(binary.BigEndian.Uint32(frame[8:12]))] = true
				mu.Unlock()
			}
		}
		if _, err := server.Write(frame); err != nil {
			return
		}
	}
}

// readFrame reads one size-prefixed Kafka request or answer, the size
// included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return nil, errors.New("cutting proxy: bad frame size")
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// readLog returns the order ids of each of topic's first partitions in
// offset order, read from the oldest message to the end.
func readLog(t testing.TB, brokers []string, topic string, partitions int32) [][]int64 {
	t.Helper()
	client, err := sarama.NewClient(brokers, kafkaq.ConsumerGroupConfig())
	require.NoError(t, err)
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	require.NoError(t, err)
	defer consumer.Close()
	log := make([][]int64, partitions)
	for part := range partitions {
		end, err := client.GetOffset(topic, part, sarama.OffsetNewest)
		require.NoError(t, err)
		if end == 0 {
			continue
		}
		pc, err := consumer.ConsumePartition(topic, part, sarama.OffsetOldest)
		require.NoError(t, err)
		timeout := time.After(time.Minute)
		for done := false; !done; {
			select {
			case msg := <-pc.Messages():
				r, err := kafkaq.Decode(msg.Value)
				require.NoError(t, err)
				log[part] = append(log[part], r.OrderID)
				done = msg.Offset+1 >= end
			case <-timeout:
				require.FailNow(t, "partition not read to its end", "topic %s partition %d end %d", topic, part, end)
			}
		}
		require.NoError(t, pc.Close())
	}
	return log
}

// readAll returns every order id in topic's first partitions with how
// many times it appears.
func readAll(t testing.TB, brokers []string, topic string, partitions int32) map[int64]int {
	t.Helper()
	seen := map[int64]int{}
	for _, ids := range readLog(t, brokers, topic, partitions) {
		for _, id := range ids {
			seen[id]++
		}
	}
	return seen
}

// The producer's connections break while produce requests are in flight:
// a request lost before the broker saw it, and answers lost after the
// broker appended the batch. sarama sees the connection fail, opens a new
// one and sends the same batches again with the same producer id and
// sequence numbers; the broker appends what it had not, and answers a
// batch it already has with its first offsets instead of appending it
// again. So every Publish succeeds and every message is in the topic once.
func TestPublishConnectionBroken(t *testing.T) {
	b := apache(t)
	const partitions = 3
	topic := b.newTopic(t, partitions)
	proxy := newCuttingProxy(t, b.brokers, loseAck, loseRequest, loseAck, loseAck, loseRequest, loseAck)
	p, err := kafkaq.NewProducer(b.brokers, topic, testLog(t), kafkaq.WithDialer(proxy))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })

	const publishers, each = 20, 10
	var wg sync.WaitGroup
	for g := range int64(publishers) {
		wg.Go(func() {
			for i := range int64(each) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := p.Publish(ctx, reservation(g*each+i+1, g+1))
				cancel()
				if err != nil {
					t.Errorf("publish: %v", err)
				}
			}
		})
	}
	wg.Wait()
	made := proxy.cuts()
	t.Logf("connections cut: %v", made)
	require.Len(t, made, 6, "every planned cut happened")
	require.Contains(t, made, loseAck)

	seen := readAll(t, b.brokers, topic, partitions)
	require.Len(t, seen, publishers*each, "every message is in the topic")
	for id, n := range seen {
		require.Equal(t, 1, n, "order %d written %d times", id, n)
	}
}
