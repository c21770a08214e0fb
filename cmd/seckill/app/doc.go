// Package app is the seckill binary's whole program: its command line, its
// configuration (CONFIG.md beside the binary lists every variable), and the
// wiring that builds each role (gateway, worker, sweeper) from the product's
// packages and runs it. cmd/seckill's main only calls Main; the system tests
// under deploy/tools/systemtest start the same roles through Run and
// NewSystem, as `seckill serve` does.
package app
