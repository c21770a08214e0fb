// Package devstack starts private Redis, PostgreSQL and Kafka-protocol
// services on this machine for dev mode and tests.
//
// Redis and PostgreSQL run as child processes of the calling program, each
// on a free 127.0.0.1 port with its files and log under a folder the caller
// chooses; Kafka is an in-process kfake broker (StartKafka) or a cluster of
// 1 or 3 Apache Kafka child processes (StartApacheKafka). Children live in their own
// process group and get a parent-death signal from the kernel, so they never
// outlive the program, even when it is killed with SIGKILL. When a binary is
// missing, the error says which Debian package to install.
//
// PostgreSQL refuses to run as root; when the program runs as root the
// cluster is made and run as the postgres system user.
package devstack
