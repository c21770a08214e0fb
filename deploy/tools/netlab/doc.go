// Package netlab gives every process of the system a host of its own: a
// network namespace with a real address, joined to the others through a
// switch that delays, loses and drops frames between hosts, so a test can
// make the faults only a network makes (a partition, a silent link, latency
// and loss) and watch the system through them.
//
// Each host is a namespace (`ip netns add`) with one interface, eth0, at
// 10.231.0.N/24, the other end of a veth pair whose first end lives in the
// lab's own namespace. There a switch in this process (a packet socket on
// each first end) forwards every frame to the host it is for after the
// link's delay: by default 0.2 to 0.5 ms, uniformly, in order (a link does
// not reorder), both ways. Lab.Impair changes the delay and adds loss
// between two groups of hosts, Lab.Partition drops everything between them
// (silently: no reset, no unreachable, as a dead router does), Lab.Cut
// takes a host's link down. The kernel's own qdiscs would do the same with
// tc netem and filters, but not every kernel has them (this one has
// neither netem nor a tc classifier), and the switch needs nothing but
// packet sockets.
//
// The test process lives on a host of its own too, the control host
// (10.231.0.1): Main re-runs the test binary inside it, so everything a
// test dials (the services' readiness, the crowd, the checks) goes through
// the switch like any other host's traffic, and the machine's own network
// is left alone. Services are started in their hosts with nsenter (see
// deploy/devstack.Place, deploy/tools/fleet.Options.Place). The crowd's
// shoppers may have hosts of their own (FleetOptions.Shoppers): each of
// their connections is dialed from inside one of them.
//
// Every namespace of a run is named seckill-netlab-<pid>-<host>; Main
// removes them when the run ends, however it ends, and a new run first
// removes those of runs whose process is gone (a killed run).
package netlab
