// Package fleet runs the system as a fleet of separate OS processes, as
// production runs it.
//
// A fleet is any number of
// gateways, workers and sweepers (`seckill serve` with SECKILL_ROLES), each
// its own process with its own log, on the private services of
// deploy/devstack: a redis-server or a Redis Cluster, PostgreSQL, and the
// in-process Kafka-protocol broker or Apache Kafka as three nodes
// (Options.Broker).
//
// Process is the runner of one seckill process: start it and wait for its
// /readyz, kill it with SIGKILL as a crash would, stop it with SIGTERM.
// Start brings up the services and a Shape of processes (3 gateways, 2
// workers and 2 sweepers on a Redis Cluster of 3 masters for the fleet
// test; one of each on one redis-server for the fault
// suite in deploy/tools/chaos, which builds on it), and Fleet.Close ends them all.
// The processes get the kernel's parent-death signal, so none outlives the
// program that started it.
package fleet
