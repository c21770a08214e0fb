package app

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/flashsale/seckill/deploy/devstack"
)

// composeFile is docker-compose.yml as far as these tests read it.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Networks map[string]struct {
		Ipam struct {
			Config []struct {
				Subnet string `yaml:"subnet"`
			} `yaml:"config"`
		} `yaml:"ipam"`
	} `yaml:"networks"`
	Volumes map[string]any `yaml:"volumes"`
}

type composeService struct {
	Image       string `yaml:"image"`
	Build       any    `yaml:"build"`
	Restart     string `yaml:"restart"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Command     any                    `yaml:"command"` // a string or a list
	Environment composeEnv             `yaml:"environment"`
	Volumes     []string               `yaml:"volumes"`
	Ports       []string               `yaml:"ports"`
	DependsOn   composeDeps            `yaml:"depends_on"`
	Deploy      struct{ Replicas int } `yaml:"deploy"`
	Networks    map[string]struct {
		IPv4 string `yaml:"ipv4_address"`
	} `yaml:"networks"`
}

// composeEnv is an environment block in either of compose's forms: a map,
// or a list of NAME=value.
type composeEnv map[string]string

func (e *composeEnv) UnmarshalYAML(n *yaml.Node) error {
	*e = composeEnv{}
	if n.Kind == yaml.SequenceNode {
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		for _, kv := range list {
			k, v, _ := strings.Cut(kv, "=")
			(*e)[k] = v
		}
		return nil
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return err
	}
	for k, v := range m {
		(*e)[k] = fmt.Sprint(v)
	}
	return nil
}

// composeDeps is depends_on in either form: a list of names, or a map of
// name to condition.
type composeDeps map[string]any

func (d *composeDeps) UnmarshalYAML(n *yaml.Node) error {
	*d = composeDeps{}
	if n.Kind == yaml.SequenceNode {
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		for _, name := range list {
			(*d)[name] = nil
		}
		return nil
	}
	var m map[string]any
	err := n.Decode(&m)
	for k, v := range m {
		(*d)[k] = v
	}
	return err
}

func (s composeService) commandText() string {
	switch c := s.Command.(type) {
	case string:
		return c
	case []any:
		parts := make([]string, len(c))
		for i, p := range c {
			parts[i] = fmt.Sprint(p)
		}
		return strings.Join(parts, " ")
	}
	return ""
}

func readCompose(t *testing.T) (composeFile, string) {
	t.Helper()
	raw, err := os.ReadFile("../../../docker-compose.yml")
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(raw, &f), "docker-compose.yml must be valid YAML")
	require.NotEmpty(t, f.Services)
	return f, string(raw)
}

// TestComposeSetsOnlyKnownVariables: every SECKILL_* name in
// docker-compose.yml, in an environment block or interpolated, is a
// variable of the configuration; a renamed or mistyped one would be
// ignored silently by the containers.
func TestComposeSetsOnlyKnownVariables(t *testing.T) {
	f, raw := readCompose(t)
	known := map[string]bool{}
	typ := reflect.TypeOf(Config{})
	for i := range typ.NumField() {
		known[typ.Field(i).Tag.Get("env")] = true
	}
	seen := 0
	for name, svc := range f.Services {
		for k, v := range svc.Environment {
			if strings.HasPrefix(k, "SECKILL_") {
				seen++
				require.True(t, known[k], "service %s sets %s, which the configuration does not have (seckill env lists them)", name, k)
				cfgVars := map[string]string{k: v}
				if strings.Contains(v, "${") {
					continue // interpolated from the user's environment
				}
				_, err := LoadConfig(func(key string) string { return cfgVars[key] })
				require.NoError(t, err, "service %s: %s=%s must parse", name, k, v)
			}
		}
	}
	require.Positive(t, seen, "the roles' environment blocks are read (anchors merged)")
	for _, name := range regexp.MustCompile(`\bSECKILL_[A-Z0-9_]+`).FindAllString(raw, -1) {
		require.True(t, known[name], "docker-compose.yml mentions %s, which the configuration does not have", name)
	}
}

// TestComposeShape: the production shape the README describes: a Redis
// Cluster of 3 masters with replicas, 3 Kafka brokers with replication
// factor 3 and min.insync.replicas=2, several gateways behind a proxy, and
// every name the services point at defined.
func TestComposeShape(t *testing.T) {
	f, _ := readCompose(t)
	services := f.Services
	gw, ok := services["gateway"]
	require.True(t, ok)

	// Redis Cluster: every seed is a cluster-mode redis service; the init
	// job makes 3 masters of them.
	seeds := strings.Split(gw.Environment["SECKILL_REDIS_CLUSTER_ADDRS"], ",")
	require.GreaterOrEqual(t, len(seeds), 3)
	require.Empty(t, gw.Environment["SECKILL_REDIS_URL"], "a cluster, not one server")
	var nodes []string
	for _, s := range seeds {
		host, port, err := net.SplitHostPort(s)
		require.NoError(t, err, s)
		require.Equal(t, "6379", port)
		svc, ok := services[host]
		require.True(t, ok, "seed %s is not a service", s)
		cmd := svc.commandText()
		require.Contains(t, cmd, "--cluster-enabled yes", host)
		require.Contains(t, cmd, "--cluster-announce-hostname "+host, host)
		require.Contains(t, cmd, "--appendonly yes", host)
		nodes = append(nodes, host)
	}
	initCmd := services["redis-cluster-init"].commandText()
	require.Contains(t, initCmd, "--cluster create")
	require.Contains(t, initCmd, "--cluster-replicas 1")
	for _, n := range nodes {
		require.Contains(t, initCmd, n, "the init job joins %s", n)
		require.Contains(t, services["redis-cluster-init"].DependsOn, n)
	}
	require.Equal(t, 3, len(nodes)/2, "6 nodes with one replica each are 3 masters")

	// Kafka: 3 brokers, one KRaft quorum, RF 3, min ISR 2.
	brokers := strings.Split(gw.Environment["SECKILL_KAFKA_BROKERS"], ",")
	require.Len(t, brokers, 3)
	ids := map[string]bool{}
	for _, b := range brokers {
		host, _, err := net.SplitHostPort(b)
		require.NoError(t, err, b)
		svc, ok := services[host]
		require.True(t, ok, "broker %s is not a service", b)
		env := svc.Environment
		ids[env["KAFKA_NODE_ID"]] = true
		require.Equal(t, "PLAINTEXT://"+b, env["KAFKA_ADVERTISED_LISTENERS"])
		require.Equal(t, "3", env["KAFKA_DEFAULT_REPLICATION_FACTOR"], host)
		require.Equal(t, "2", env["KAFKA_MIN_INSYNC_REPLICAS"], host)
		require.Equal(t, "3", env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"], host)
		require.NotEmpty(t, env["CLUSTER_ID"], "every broker of one cluster has its id")
		voters := strings.Split(env["KAFKA_CONTROLLER_QUORUM_VOTERS"], ",")
		require.Len(t, voters, 3, host)
		require.Contains(t, voters, env["KAFKA_NODE_ID"]+"@"+host+":9093")
	}
	require.Len(t, ids, 3, "distinct node ids")
	topics := services["kafka-init"].commandText()
	require.Contains(t, topics, "--replication-factor 3")
	require.Contains(t, topics, "min.insync.replicas=2")

	// Several gateways, reached only through the proxy, which trusts them
	// with its own fixed address.
	require.Greater(t, gw.Deploy.Replicas, 1)
	require.Empty(t, gw.Ports, "gateways publish no port: the proxy is the door")
	proxy, ok := services["proxy"]
	require.True(t, ok)
	require.NotEmpty(t, proxy.Ports)
	ip := proxy.Networks["default"].IPv4
	require.Equal(t, ip, gw.Environment["SECKILL_TRUSTED_PROXIES"])
	_, subnet, err := net.ParseCIDR(f.Networks["default"].Ipam.Config[0].Subnet)
	require.NoError(t, err)
	require.True(t, subnet.Contains(net.ParseIP(ip)), "the proxy's address %s is in the network %s", ip, subnet)
	var conf string
	for _, v := range proxy.Volumes {
		src, _, _ := strings.Cut(v, ":")
		b, err := os.ReadFile(filepath.Join("../../..", src))
		require.NoError(t, err, "the proxy's config %s exists", src)
		conf = string(b)
	}
	require.Contains(t, conf, "server gateway:8080", "the proxy sends to every gateway")
	require.Contains(t, conf, "Upgrade $http_upgrade", "and carries the WebSocket")
	require.Greater(t, services["worker"].Deploy.Replicas, 1)

	// Every name a service depends on, and every named volume, exists; every
	// file mounted from the repository is there.
	for name, svc := range services {
		for dep := range svc.DependsOn {
			require.Contains(t, services, dep, "%s depends on an unknown service", name)
		}
		for _, v := range svc.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "./") {
				_, err := os.Stat(filepath.Join("../../..", src))
				require.NoError(t, err, "%s mounts %s", name, src)
			} else {
				require.Contains(t, f.Volumes, src, "%s uses an undeclared volume", name)
			}
		}
	}
	require.True(t, slices.Contains(brokers, "kafka-1:9092"))
}

// TestPrometheusScrapesTheOpsPorts: Prometheus reads each job's /metrics
// where docker-compose.yml has the process serve it: a gateway's ops
// listener (its shoppers' port serves no /metrics), a worker's one port.
func TestPrometheusScrapesTheOpsPorts(t *testing.T) {
	f, _ := readCompose(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "prometheus.yml"))
	require.NoError(t, err)
	var conf struct {
		ScrapeConfigs []struct {
			Job         string `yaml:"job_name"`
			MetricsPath string `yaml:"metrics_path"`
			DNS         []struct {
				Names []string `yaml:"names"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &conf))
	want := map[string]string{
		"gateway": f.Services["gateway"].Environment["SECKILL_OPS_ADDR"],
		"worker":  f.Services["worker"].Environment["SECKILL_HTTP_ADDR"],
	}
	require.NotEqual(t, f.Services["gateway"].Environment["SECKILL_HTTP_ADDR"], want["gateway"], "a gateway's ops listener is apart from the shoppers' port")
	found := 0
	for _, sc := range conf.ScrapeConfigs {
		addr, ok := want[sc.Job]
		if !ok {
			continue
		}
		found++
		_, port, err := net.SplitHostPort(addr)
		require.NoError(t, err, "%s: %q", sc.Job, addr)
		require.Equal(t, "/metrics", sc.MetricsPath, sc.Job)
		require.Len(t, sc.DNS, 1, sc.Job)
		require.Equal(t, []string{sc.Job}, sc.DNS[0].Names)
		require.Equal(t, port, fmt.Sprint(sc.DNS[0].Port), "job %s scrapes the port its processes serve /metrics on", sc.Job)
	}
	require.Equal(t, len(want), found)
}

// TestComposeKafkaMatchesDevstack: the tests' three-node Apache Kafka
// (deploy/devstack) is the production cluster of docker-compose.yml in
// every setting that decides durability and roles, so what the end-to-end
// tests and the fleet prove of acknowledged writes holds for the compose
// shape too. The image takes server.properties keys as KAFKA_ variables
// (dots become underscores).
func TestComposeKafkaMatchesDevstack(t *testing.T) {
	f, _ := readCompose(t)
	local := devstack.ApacheKafkaSettings(3)
	brokers := strings.Split(f.Services["gateway"].Environment["SECKILL_KAFKA_BROKERS"], ",")
	require.Len(t, brokers, 3)
	for _, key := range []string{
		"process.roles",
		"default.replication.factor",
		"min.insync.replicas",
		"offsets.topic.replication.factor",
		"transaction.state.log.replication.factor",
		"transaction.state.log.min.isr",
		"auto.create.topics.enable",
	} {
		want, ok := local[key]
		require.True(t, ok, "devstack's three-node cluster sets %s", key)
		env := "KAFKA_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		for _, b := range brokers {
			host, _, err := net.SplitHostPort(b)
			require.NoError(t, err, b)
			got, ok := f.Services[host].Environment[env]
			require.True(t, ok, "docker-compose.yml's %s sets %s (%s)", host, env, key)
			require.Equal(t, want, got, "%s on %s: docker-compose.yml and devstack's three-node cluster differ", key, host)
		}
	}
}

// TestComposeRestartsAndKafkaRelease: every long-running service restarts
// by itself after a crash or a reboot of the Docker host, the one-shot jobs
// (those others wait for with service_completed_successfully) do not; the
// brokers run the Apache Kafka release the tests and dev mode run; the
// seckill containers' healthchecks are the binary's own (the image has no
// wget or curl).
func TestComposeRestartsAndKafkaRelease(t *testing.T) {
	f, _ := readCompose(t)
	oneShot := map[string]bool{}
	for _, svc := range f.Services {
		for dep, cond := range svc.DependsOn {
			if m, ok := cond.(map[string]any); ok && m["condition"] == "service_completed_successfully" {
				oneShot[dep] = true
			}
		}
	}
	require.Equal(t, map[string]bool{"redis-cluster-init": true, "kafka-init": true, "migrate": true}, oneShot)
	for name, svc := range f.Services {
		if oneShot[name] {
			require.Equal(t, "no", svc.Restart, "%s runs once", name)
			continue
		}
		require.Contains(t, []string{"unless-stopped", "always", "on-failure"}, svc.Restart, "%s is long-running: give it a restart policy", name)
	}

	brokers, healthchecked := 0, 0
	for name, svc := range f.Services {
		if strings.HasPrefix(svc.Image, "apache/kafka:") {
			brokers++
			require.Equal(t, "apache/kafka:"+devstack.ApacheKafkaVersion, svc.Image, "%s: the release devstack runs", name)
		}
		if svc.Build != nil && !oneShot[name] {
			require.Equal(t, []string{"CMD", "seckill", "healthcheck"}, svc.Healthcheck.Test, "%s", name)
			healthchecked++
		}
	}
	require.Equal(t, 4, brokers, "three brokers and the topics' job")
	require.Equal(t, 2, healthchecked, "the gateways and the workers")
}
