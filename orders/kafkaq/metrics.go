package kafkaq

import (
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Kafka transport's collectors: produce latency and errors on
// the gateway side, batch sizes and lag on the worker side. Build one per
// process with NewMetrics; give it to NewProducer with WithMetrics and to
// NewConsumer in ConsumerConfig.Metrics. A nil *Metrics records nothing.
type Metrics struct {
	produce      prometheus.Histogram
	produceError prometheus.Counter
	producedSize prometheus.Counter
	batchSize    prometheus.Histogram
	lag          *prometheus.GaugeVec
	dead         *prometheus.CounterVec

	// partitions are the lag gauge's children, resolved once per partition
	// (batches are frequent; partitions are few and fixed).
	mu         sync.Mutex
	partitions map[int32]prometheus.Gauge
}

// NewMetrics registers the collectors on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		produce: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_kafka_produce_duration_seconds",
			Help:    "From handing a reservation to the producer to its acknowledgement by every in-sync replica (or its failure).",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		produceError: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_kafka_produce_errors_total",
			Help: "Reservations the producer could not get acknowledged (broker error, closed producer, or the caller's deadline).",
		}),
		producedSize: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_kafka_produced_bytes_total",
			Help: "Bytes (key and value) of the reservations the brokers acknowledged: with the produce count, what one buy costs the broker.",
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_consumer_batch_size",
			Help:    "Reservations per batch handed to the workers (one PostgreSQL transaction each).",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
		}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_consumer_lag",
			Help: "Messages in a partition beyond this worker's last committed offset, as of its last batch, by partition.",
		}, []string{"partition"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_consumer_dead_letters_total",
			Help: "Messages set aside in the dead-letter topic, by reason: undecodable (not a reservation) or failed (the handler kept failing on it alone).",
		}, []string{"reason"}),
		partitions: map[int32]prometheus.Gauge{},
	}
	for _, r := range []string{ReasonUndecodable, ReasonFailed} {
		m.dead.WithLabelValues(r) // every series from the start, so rate() and alerts see the first one
	}
	for _, c := range []prometheus.Collector{m.produce, m.produceError, m.producedSize, m.batchSize, m.lag, m.dead} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ProducerOption configures a Producer.
type ProducerOption func(*Producer)

// WithMetrics times the producer's writes on m.
func WithMetrics(m *Metrics) ProducerOption {
	return func(p *Producer) { p.metrics = m }
}

// Dialer opens the producer's connections to the brokers.
type Dialer interface {
	Dial(network, addr string) (net.Conn, error)
}

// WithDialer makes the producer reach every broker through d (a SOCKS
// proxy, a tunnel) rather than dialing the address itself. The fault tests
// put a TCP proxy there that breaks connections mid-request.
func WithDialer(d Dialer) ProducerOption {
	return func(p *Producer) { p.dialer = d }
}

// produced records one Publish of a message of size bytes that began at
// start.
func (m *Metrics) produced(start time.Time, size int, err error) {
	if m == nil {
		return
	}
	m.produce.Observe(time.Since(start).Seconds())
	if err != nil {
		m.produceError.Inc()
		return
	}
	m.producedSize.Add(float64(size))
}

// batch records the size of one batch handed to the handler.
func (m *Metrics) batch(n int) {
	if m == nil || n == 0 {
		return
	}
	m.batchSize.Observe(float64(n))
}

// deadLettered counts one message set aside.
func (m *Metrics) deadLettered(reason string) {
	if m == nil {
		return
	}
	m.dead.WithLabelValues(reason).Inc()
}

// setLag records a partition's lag; a negative lag means the partition left
// this consumer, and its series goes away.
func (m *Metrics) setLag(partition int32, lag int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if lag < 0 {
		if _, ok := m.partitions[partition]; ok {
			delete(m.partitions, partition)
			m.lag.DeleteLabelValues(strconv.FormatInt(int64(partition), 10))
		}
		return
	}
	g, ok := m.partitions[partition]
	if !ok {
		g = m.lag.WithLabelValues(strconv.FormatInt(int64(partition), 10))
		m.partitions[partition] = g
	}
	g.Set(float64(lag))
}
