// Package helmcheck checks the Helm chart in deploy/helm/seckill without a
// cluster: its test renders the chart with helm (the version the Makefile
// pins, built into bin/ from the Go module proxy), decodes every object
// strictly into the Kubernetes API's Go types (an unknown or duplicated
// field fails), checks what the API server would refuse or a rollout would
// trip on (names, labels, selectors, named ports, probes, budgets,
// autoscalers, the variables against the configuration of cmd/seckill),
// and evaluates every pod template with Kubernetes' own Pod Security
// Admission at the restricted level. deploy/helm/seckill/README.md says
// what is and is not checked.
package helmcheck
