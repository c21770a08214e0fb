// Package prometheus holds the platform's Prometheus alert rules
// (alerts.yml, loaded by deploy/prometheus.yml) and their unit tests
// (alerts_test.yml). Its Go test runs `promtool check rules`, `promtool test
// rules` and `promtool check config` on them, and checks that every rule has
// a unit test and every metric a rule reads is one the code serves.
package prometheus
