// Package chaos is the fault suite: it runs a paced crowd of shoppers against
// the real system and injects one fault at a time, then checks that the sale
// stayed honest and healed without an operator.
//
// Everything is real. Redis, PostgreSQL and the Kafka-protocol broker are the
// private services of deploy/devstack, and the system runs as separate OS
// processes of the seckill binary (deploy/tools/fleet: `seckill serve` with
// SECKILL_ROLES gateway, worker and sweeper, or `seckill dev` for the
// whole-process fault), so a fault is a real signal or a real restart:
//
//   - PostgreSQL frozen: SIGSTOP of the postmaster and its backends, SIGCONT later;
//   - PostgreSQL restarted: SIGKILL, then started again on the same data;
//   - redis-server killed -9 and started again from its append-only file;
//   - Redis data lost: FLUSHALL;
//   - a worker killed mid-batch: the broker withholds its offset-commit
//     answers, so the worker is caught between its PostgreSQL commit and its
//     Kafka commit, and is killed there with SIGKILL;
//   - a gateway killed between the script and the Kafka write: the broker
//     withholds its produce answers, so buys are caught after reserve.lua and
//     before the message is written, and the gateway is killed there with
//     SIGKILL;
//   - the broker restarted on the same address and data;
//   - the gateway out of file descriptors: its open-file limit lowered under
//     it (prlimit) and idle connections from other loopback addresses until
//     it cannot accept, held, then closed; it must stay up;
//   - a flood of WebSockets without a token from one address: no more than
//     the cap per address open, and a shopper's socket from another address
//     still does;
//   - the whole `seckill dev` process killed -9 (its Redis and PostgreSQL
//     children go with it) and started again on the same data folder.
//
// After each fault it checks: no oversell in PostgreSQL; stock_left + sold ==
// total; every accepted order (202) ends created, paid, cancelled or failed,
// never unknown and never stuck in reserved; and the drift report (the admin
// stats route) is clean again, with nothing pending. The waits are generous
// deadlines, never assertions on time: the seconds measured are reported.
//
// These faults run on the in-process broker, whose request hooks catch the
// worker and the gateway mid-write. FaultFleet is the same crowd on a fleet
// of its own (3 gateways, 2 workers, 2 sweepers on a Redis Cluster of 3
// masters and Apache Kafka as 3 nodes: docker-compose.yml's topology),
// spread over every gateway, while one gateway and one worker
// are killed with SIGKILL and stay dead; shoppers whose gateway gives no
// answer retry on the next one.
//
// With Options.ApacheKafka the served system runs on a three-node Apache
// Kafka cluster (replication factor 3, min.insync.replicas 2) instead, with
// the faults of ApacheFaults: the busiest partition's leader killed -9 and
// started again, a broker frozen, two of three brokers down (buys answered
// 503 with a Retry-After, never 202), the active controller killed, the whole
// cluster restarted; a frozen node keeps the answers away where the
// in-process broker withholds them (the group coordinator for the worker
// killed mid-batch, every leader of the topic for the gateway killed before
// its Kafka write). TestFaultsApacheKafka runs two of them in make test and
// all of them in make chaos.
//
// Run drives one or all faults and returns a Result per fault; WriteTable
// prints them. The package's test runs every fault with a small crowd (make
// test) or with the full crowd (make chaos, which sets SECKILL_CHAOS=full);
// TestFleet runs FaultFleet (make test, and make fleet with SECKILL_FLEET=full).
package chaos
