package kafkaq

import "github.com/rcrowley/go-metrics"

// sarama keeps go-metrics of its own (rates, histograms of request sizes
// and latencies, per broker and per topic), updated on every request and
// read by nothing here: the producer's and the consumer's measures are
// this package's Prometheus collectors (metrics.go). They cost the buying
// path a sampled histogram's lock and heap work per request (2.7 % of the
// gateway's CPU in the accepted run's profiles by hand,
// deploy/tools/bench/README.md), so they are off: go-metrics then hands
// sarama do-nothing meters. It is go-metrics' own switch, read when a
// metric is made, so it is set before any client exists.
func init() { metrics.UseNilMetrics = true }
