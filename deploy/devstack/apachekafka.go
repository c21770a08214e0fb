package devstack

// Apache Kafka as a private cluster of child processes: KRaft, every node
// both broker and controller, on free 127.0.0.1 ports.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApacheKafkaOptions configures StartApacheKafka.
type ApacheKafkaOptions struct {
	// Brokers is the number of nodes: 1, or 3 for a cluster that survives
	// the loss of one (replication factor 3, min.insync.replicas 2). Zero
	// means 1.
	Brokers int
	// Topics to create at start, name to partition count, with the
	// cluster's replication factor. A topic that exists (reloaded from Dir)
	// is kept as it is.
	Topics map[string]int32
	// Dir keeps the nodes' data, configuration and logs, and is reused by
	// the next start (dev mode). Empty uses a temporary folder removed by
	// Close (tests).
	Dir string
	// HeapMB is each node's Java heap (-Xmx); zero means 384, or 1024
	// with ProductionJVM.
	HeapMB int
	// ProductionJVM starts each node with the JVM settings Kafka's own
	// scripts give a broker (kafka-server-start.sh's -Xmx1G -Xms1G and
	// kafka-run-class.sh's G1 with 20 ms pauses and the tiered compiler),
	// as a production broker runs; false keeps the tests' settings, which
	// start a node in about half the time and use a third of the memory.
	ProductionJVM bool
	// Places puts node i on Places[i] (each on a host of its own, its
	// listeners on that host's address); a node beyond the list runs on
	// 127.0.0.1.
	Places []Place
	// Log receives progress messages; nil discards them.
	Log *slog.Logger
}

// ApacheKafka is a private Apache Kafka cluster (KRaft, each node broker and
// controller) whose nodes are child processes of this program. Node i has
// node.id i: the indexes the controls take are the broker ids Kafka reports.
type ApacheKafka struct {
	// Brokers are the nodes' host:port client addresses, Brokers[i] being
	// node i's. They stay the same across Stop, Kill and Start.
	Brokers []string
	// Dir holds each node's folder (node-<i>: server.properties, data/,
	// kafka.log).
	Dir string

	log     *slog.Logger
	topics  map[string]int32
	tempDir bool
	nodes   []*kafkaNode
	admin   *kgo.Client // seeded with every node, for cluster-wide questions

	closeOnce sync.Once
	closeErr  error
}

// kafkaNode is one Kafka process and a client that talks to it alone.
type kafkaNode struct {
	id     int
	dir    string
	srv    *server
	client *kgo.Client
}

// kafkaDefaultHeapMB is the default -Xmx: a node idles at about 290 MB
// resident with it.
const kafkaDefaultHeapMB = 384

// kafkaProductionHeapMB is the heap kafka-server-start.sh gives a broker.
const kafkaProductionHeapMB = 1024

// clusterFile, in ApacheKafka.Dir, records what the data was formatted with.
const clusterFile = "cluster.properties"

// StartApacheKafka fetches the broker's jars when they are not cached (see
// FetchKafkaJars), starts the nodes and returns once every broker answers
// and every partition of Topics has a leader and all its replicas in sync.
func StartApacheKafka(ctx context.Context, opts ApacheKafkaOptions) (*ApacheKafka, error) {
	n := opts.Brokers
	if n == 0 {
		n = 1
	}
	if n != 1 && n != 3 {
		return nil, fmt.Errorf("devstack: ApacheKafkaOptions.Brokers is %d: use 1 or 3", opts.Brokers)
	}
	heap := opts.HeapMB
	switch {
	case heap == 0 && opts.ProductionJVM:
		heap = kafkaProductionHeapMB
	case heap == 0:
		heap = kafkaDefaultHeapMB
	}
	if heap < 128 {
		return nil, fmt.Errorf("devstack: ApacheKafkaOptions.HeapMB is %d: Kafka needs at least 128", heap)
	}
	log := logger(opts.Log)
	java, err := findBinary("java", "default-jre-headless", "/usr/bin", "/usr/lib/jvm/default-java/bin")
	if err != nil {
		return nil, err
	}
	jars, err := FetchKafkaJars(ctx, log)
	if err != nil {
		return nil, err
	}
	cp, err := kafkaClasspath(jars)
	if err != nil {
		return nil, err
	}
	k := &ApacheKafka{log: log, topics: maps.Clone(opts.Topics)}
	if opts.Dir == "" {
		k.Dir, err = OwnedTempDir("seckill-kafka-*", log)
		if err != nil {
			return nil, err
		}
		k.tempDir = true
	} else {
		if k.Dir, err = filepath.Abs(opts.Dir); err == nil {
			err = os.MkdirAll(k.Dir, 0o700)
		}
		if err != nil {
			return nil, fmt.Errorf("devstack: kafka dir: %w", err)
		}
	}
	fail := func(err error) (*ApacheKafka, error) {
		_ = k.Close()
		return nil, err
	}
	clusterID, err := kafkaClusterID(k.Dir, n)
	if err != nil {
		return fail(err)
	}
	log4j := filepath.Join(k.Dir, "log4j2.properties")
	if err := os.WriteFile(log4j, kafkaLog4j, 0o644); err != nil {
		return fail(fmt.Errorf("devstack: kafka dir: %w", err))
	}
	jvm := []string{
		"-Xmx" + strconv.Itoa(heap) + "m", "-Xms64m",
		// One core per node at most here: the serial collector and the
		// client compiler alone start a node in about half the time of G1
		// and the tiered compiler, and are plenty for this traffic.
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
	}
	if opts.ProductionJVM {
		jvm = []string{
			"-Xmx" + strconv.Itoa(heap) + "m", "-Xms" + strconv.Itoa(heap) + "m", "-server",
			"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
			"-XX:+ExplicitGCInvokesConcurrent",
		}
	}
	jvm = append(jvm,
		"-XX:+ExitOnOutOfMemoryError", "-XX:-UsePerfData", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile="+log4j,
		"-cp", cp,
	)
	if _, err := onFreePorts(func() (struct{}, error) {
		return struct{}{}, k.launch(ctx, java, jvm, clusterID, n, opts.Places)
	}, func() { k.stopNodes(func(nd *kafkaNode) { nd.srv.kill() }) }); err != nil {
		return fail(err)
	}
	for _, name := range slices.Sorted(maps.Keys(k.topics)) {
		if err := k.CreateTopic(ctx, name, k.topics[name]); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fail(err)
		}
	}
	if err := k.WaitInSync(ctx); err != nil {
		return fail(err)
	}
	log.Info("devstack: apache kafka ready", "brokers", k.Brokers, "topics", k.topics, "dir", k.Dir)
	return k, nil
}

// launch writes each node's configuration on new ports, formats the
// storage of nodes that have none and starts them all at once: a node of a
// three-node cluster answers only once a majority of controllers runs.
func (k *ApacheKafka) launch(ctx context.Context, java string, jvm []string, clusterID string, n int, places []Place) error {
	type ports struct{ broker, controller int }
	pp := make([]ports, n)
	voters := make([]string, n)
	place := func(i int) Place {
		if i < len(places) {
			return places[i]
		}
		return Place{}
	}
	for i := range pp {
		var err error
		if pp[i].broker, err = freePort(); err != nil {
			return err
		}
		if pp[i].controller, err = freePort(); err != nil {
			return err
		}
		voters[i] = fmt.Sprintf("%d@%s:%d", i, place(i).host(), pp[i].controller)
	}
	for _, nd := range k.nodes {
		nd.client.Close()
	}
	k.nodes, k.Brokers = make([]*kafkaNode, n), make([]string, n)
	for i := range n {
		nd := &kafkaNode{id: i, dir: filepath.Join(k.Dir, "node-"+strconv.Itoa(i))}
		if err := os.MkdirAll(nd.dir, 0o700); err != nil {
			return fmt.Errorf("devstack: kafka dir: %w", err)
		}
		addr := net.JoinHostPort(place(i).host(), strconv.Itoa(pp[i].broker))
		props := kafkaProperties(i, n, addr, net.JoinHostPort(place(i).host(), strconv.Itoa(pp[i].controller)),
			strings.Join(voters, ","), filepath.Join(nd.dir, "data"))
		propsPath := filepath.Join(nd.dir, "server.properties")
		if err := os.WriteFile(propsPath, []byte(props), 0o644); err != nil {
			return fmt.Errorf("devstack: kafka config: %w", err)
		}
		client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second), kgo.WithLogger(nil))
		if err != nil {
			return fmt.Errorf("devstack: kafka client: %w", err)
		}
		nd.client = client
		logPath := filepath.Join(nd.dir, "kafka.log")
		spec, err := place(i).wrap(procSpec{
			name:    "kafka node " + strconv.Itoa(i),
			bin:     java,
			args:    append(slices.Clip(jvm), "kafka.Kafka", propsPath),
			dir:     nd.dir,
			logPath: logPath,
			// The data is in the page cache the moment Kafka answers,
			// so a kill loses nothing, and a node never outlives us
			// waiting on a controlled shutdown nobody answers.
			deathSig: syscall.SIGKILL,
		})
		if err != nil {
			return err
		}
		nd.srv = &server{
			log:     k.log,
			spec:    spec,
			stopSig: syscall.SIGTERM,
			ready:   func(ctx context.Context, _ *process) error { return nd.answers(ctx) },
			before: func() error {
				return formatKafkaStorage(java, jvm, clusterID, propsPath, filepath.Join(nd.dir, "data"), logPath)
			},
		}
		k.nodes[i], k.Brokers[i] = nd, addr
	}
	if k.admin != nil {
		k.admin.Close()
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.DialTimeout(time.Second), kgo.WithLogger(nil))
	if err != nil {
		return fmt.Errorf("devstack: kafka client: %w", err)
	}
	k.admin = admin
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range k.nodes {
		wg.Go(func() { errs[i] = nd.srv.start(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// kafkaProperties is node id's server.properties in a cluster of n nodes:
// its own addresses and folder, then the settings every node shares
// (ApacheKafkaSettings).
func kafkaProperties(id, n int, addr, controllerAddr, voters, dataDir string) string {
	lines := []string{
		"node.id=" + strconv.Itoa(id),
		"listeners=PLAINTEXT://" + addr + ",CONTROLLER://" + controllerAddr,
		"advertised.listeners=PLAINTEXT://" + addr,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"controller.listener.names=CONTROLLER",
		"controller.quorum.voters=" + voters,
		"log.dirs=" + dataDir,
	}
	settings := ApacheKafkaSettings(n)
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		lines = append(lines, k+"="+settings[k])
	}
	return strings.Join(lines, "\n") + "\n"
}

// ApacheKafkaSettings returns the broker settings (server.properties keys
// and values) every node of a StartApacheKafka cluster of the given number
// of nodes shares, addresses and folders aside: what a test compares with
// another deployment of the same shape, such as docker-compose.yml's.
func ApacheKafkaSettings(brokers int) map[string]string {
	n := max(brokers, 1)
	minISR := strconv.Itoa(min(2, n))
	rf := strconv.Itoa(n)
	return map[string]string{
		"process.roles": "broker,controller",
		// Every topic, those the platform creates included, gets the
		// cluster's replication and so survives one node's loss with three.
		"default.replication.factor":                       rf,
		"min.insync.replicas":                              minISR,
		"offsets.topic.replication.factor":                 rf,
		"transaction.state.log.replication.factor":         rf,
		"transaction.state.log.min.isr":                    minISR,
		"share.coordinator.state.topic.replication.factor": rf,
		"share.coordinator.state.topic.min.isr":            minISR,
		// Fewer internal partitions than the default 50: they are made at
		// the first consumer group, and 150 replicas take seconds on a
		// busy machine.
		"offsets.topic.num.partitions":         "10",
		"transaction.state.log.num.partitions": "10",
		"num.partitions":                       "1",
		// As the in-process broker: a topic exists only once created, so a
		// misspelt name fails instead of making a topic.
		"auto.create.topics.enable": "false",
		// A group starts consuming as soon as its first member joins.
		"group.initial.rebalance.delay.ms": "0",
	}
}

// newKafkaClusterID returns a random id in Kafka's Uuid text form. Like
// Kafka's own Uuid.randomUuid it never starts with '-': the storage tool
// would read such an id as an option and refuse to format (one start in 64).
func newKafkaClusterID() string {
	raw := make([]byte, 16)
	for {
		_, _ = rand.Read(raw)
		if id := base64.RawURLEncoding.EncodeToString(raw); id[0] != '-' {
			return id
		}
	}
}

// kafkaClusterID reads the cluster id Dir's data was formatted with, or
// makes one for a new folder. Dir's data holds a cluster of a given size:
// reusing it with another is refused.
func kafkaClusterID(dir string, n int) (string, error) {
	path := filepath.Join(dir, clusterFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		id := newKafkaClusterID()
		text := fmt.Sprintf("# written by deploy/devstack: the cluster id the data is formatted with\ncluster.id=%s\nbrokers=%d\n", id, n)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return "", fmt.Errorf("devstack: kafka dir: %w", err)
		}
		return id, nil
	}
	if err != nil {
		return "", fmt.Errorf("devstack: kafka dir: %w", err)
	}
	var id string
	had := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "cluster.id="); ok {
			id = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "brokers="); ok {
			had, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if id == "" || had == 0 {
		return "", fmt.Errorf("devstack: %s is damaged: remove %s to start an empty cluster", path, dir)
	}
	if had != n {
		return "", fmt.Errorf("devstack: %s holds a %d-broker Kafka cluster, not %d: start it with %d brokers, or remove %s to start an empty one", dir, had, n, had, dir)
	}
	return id, nil
}

// formatKafkaStorage runs Kafka's storage tool on a node whose data folder
// is not formatted yet; its output goes to the node's log.
func formatKafkaStorage(java string, jvm []string, clusterID, propsPath, dataDir, logPath string) error {
	if _, err := os.Stat(filepath.Join(dataDir, "meta.properties")); err == nil {
		return nil
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("devstack: kafka log: %w", err)
	}
	defer logFile.Close()
	start, _ := logFile.Seek(0, 2)
	args := append(slices.Clip(jvm), "kafka.tools.StorageTool", "format", "-t", clusterID, "-c", propsPath, "--ignore-formatted")
	fmt.Fprintf(logFile, "\n==== %s: %s %s\n", time.Now().Format(time.RFC3339), java, strings.Join(quoteArgs(args), " "))
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, java, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("devstack: kafka storage format failed (%w); log %s ends with:\n%s", err, logPath, indent(logTail(logPath, start)))
	}
	return nil
}

// answers reports whether the node serves metadata and counts itself among
// the brokers, which a KRaft broker does once it has caught up with the
// controllers and been let in.
func (nd *kafkaNode) answers(ctx context.Context) error {
	resp, err := nd.metadata(ctx)
	if err != nil {
		return err
	}
	for _, b := range resp.Brokers {
		if int(b.NodeID) == nd.id {
			return nil
		}
	}
	return fmt.Errorf("node %d is not among the brokers yet", nd.id)
}

// metadata asks this node alone for the metadata of every topic.
func (nd *kafkaNode) metadata(ctx context.Context) (*kmsg.MetadataResponse, error) {
	seeds := nd.client.SeedBrokers()
	if len(seeds) == 0 {
		return nil, errors.New("no seed broker")
	}
	resp, err := seeds[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

func (k *ApacheKafka) node(i int) (*kafkaNode, error) {
	if i < 0 || i >= len(k.nodes) {
		return nil, fmt.Errorf("devstack: kafka node %d: the cluster has nodes 0 to %d", i, len(k.nodes)-1)
	}
	return k.nodes[i], nil
}

// Stop shuts node i down gracefully (SIGTERM: Kafka hands its partitions'
// leadership over first), killing it if ctx ends or 30 s pass first.
func (k *ApacheKafka) Stop(ctx context.Context, i int) error {
	nd, err := k.node(i)
	if err != nil {
		return err
	}
	return nd.srv.stop(ctx)
}

// Start starts node i again (after Stop or Kill) on the same ports and data
// and returns once it serves as a broker. Its replicas may still be
// catching up: WaitInSync waits for them. It does nothing while the node
// runs.
func (k *ApacheKafka) Start(ctx context.Context, i int) error {
	nd, err := k.node(i)
	if err != nil {
		return err
	}
	return nd.srv.start(ctx)
}

// Restart stops node i gracefully and starts it again (see Stop and Start).
func (k *ApacheKafka) Restart(ctx context.Context, i int) error {
	if err := k.Stop(ctx, i); err != nil {
		return err
	}
	return k.Start(ctx, i)
}

// Kill ends node i with SIGKILL, as a crash would; Start brings it back.
func (k *ApacheKafka) Kill(i int) {
	if nd, err := k.node(i); err == nil {
		nd.srv.kill()
	}
}

// Freeze stops node i with SIGSTOP: its connections stay open and nothing
// answers, neither clients nor the other nodes. Thaw continues it; Stop and
// Kill thaw first.
func (k *ApacheKafka) Freeze(i int) error {
	nd, err := k.node(i)
	if err != nil {
		return err
	}
	return nd.srv.freeze()
}

// Thaw continues a frozen node i (SIGCONT); it does nothing otherwise.
func (k *ApacheKafka) Thaw(i int) {
	if nd, err := k.node(i); err == nil {
		nd.srv.thaw()
	}
}

// Pid is node i's process id, 0 while it does not run.
func (k *ApacheKafka) Pid(i int) int {
	nd, err := k.node(i)
	if err != nil {
		return 0
	}
	return nd.srv.pid()
}

// LogPath is the file node i's output goes to.
func (k *ApacheKafka) LogPath(i int) string {
	nd, err := k.node(i)
	if err != nil {
		return ""
	}
	return nd.srv.spec.logPath
}

// CreateTopic creates a topic with the given number of partitions and the
// cluster's replication factor; it fails (kerr.TopicAlreadyExists) if the
// topic exists.
func (k *ApacheKafka) CreateTopic(ctx context.Context, name string, partitions int32) error {
	if partitions < 1 {
		return fmt.Errorf("devstack: topic %s: partitions must be at least 1, got %d", name, partitions)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, -1 // -1: the broker's default.replication.factor
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 30_000
	resp, err := req.RequestWith(ctx, k.admin)
	if err != nil {
		return fmt.Errorf("devstack: create topic %s: %w", name, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("devstack: create topic %s: %w", name, err)
		}
	}
	return nil
}

// WaitInSync waits until every running node is among the brokers and every
// partition of every topic has a leader and all its replicas in sync, or
// ctx ends (then it says what was still missing).
func (k *ApacheKafka) WaitInSync(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		last := k.inSync(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: kafka not in sync (%w): %w", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func (k *ApacheKafka) inSync(ctx context.Context) error {
	r, err := k.askAny(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return err
	}
	resp := r.(*kmsg.MetadataResponse)
	listed := map[int]bool{}
	for _, b := range resp.Brokers {
		listed[int(b.NodeID)] = true
	}
	for i := range k.nodes {
		if k.Pid(i) != 0 && !listed[i] {
			return fmt.Errorf("node %d runs but is not among the brokers", i)
		}
	}
	for name := range k.topics {
		if !slices.ContainsFunc(resp.Topics, func(t kmsg.MetadataResponseTopic) bool { return t.Topic != nil && *t.Topic == name }) {
			return fmt.Errorf("topic %s is not in the metadata yet", name)
		}
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("topic %s: %w", deref(t.Topic), err)
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
				return fmt.Errorf("topic %s partition %d: leader %d, in sync %v of replicas %v", deref(t.Topic), p.Partition, p.Leader, p.ISR, p.Replicas)
			}
		}
	}
	return nil
}

// askAny sends req to the running, unfrozen nodes in turn, each for at
// most 2 s, and returns the first answer: a question about the cluster must
// not hang on the node a test has frozen or that a crash left half open.
func (k *ApacheKafka) askAny(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	var errs []error
	for _, nd := range k.nodes {
		if nd.srv.pid() == 0 || nd.srv.isFrozen() {
			continue
		}
		seeds := nd.client.SeedBrokers()
		if len(seeds) == 0 {
			continue
		}
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := seeds[0].Request(attempt, req)
		cancel()
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("node %d: %w", nd.id, err))
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, errors.New("no node runs")
	}
	return nil, errors.Join(errs...)
}

// Leaders returns the leader of each of topic's partitions (index
// partition), -1 for a partition without one.
func (k *ApacheKafka) Leaders(ctx context.Context, topic string) ([]int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	r, err := k.askAny(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("devstack: metadata of %s: %w", topic, err)
	}
	resp := r.(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("devstack: metadata of %s: %d topics answered", topic, len(resp.Topics))
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		return nil, fmt.Errorf("devstack: metadata of %s: %w", topic, err)
	}
	leaders := make([]int, len(t.Partitions))
	for _, p := range t.Partitions {
		if int(p.Partition) < len(leaders) {
			leaders[p.Partition] = int(p.Leader)
		}
	}
	return leaders, nil
}

// Leader returns the node that leads topic's partition.
func (k *ApacheKafka) Leader(ctx context.Context, topic string, partition int32) (int, error) {
	leaders, err := k.Leaders(ctx, topic)
	if err != nil {
		return -1, err
	}
	if partition < 0 || int(partition) >= len(leaders) {
		return -1, fmt.Errorf("devstack: topic %s has %d partitions, not %d", topic, len(leaders), partition+1)
	}
	if leaders[partition] < 0 {
		return -1, fmt.Errorf("devstack: topic %s partition %d has no leader", topic, partition)
	}
	return leaders[partition], nil
}

// Controller returns the active controller: the leader of the KRaft
// metadata quorum (DescribeQuorum, as kafka-metadata-quorum.sh asks).
func (k *ApacheKafka) Controller(ctx context.Context) (int, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rp.Partition = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := k.askAny(ctx, req)
	if err != nil {
		return -1, fmt.Errorf("devstack: describe quorum: %w", err)
	}
	resp := r.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, fmt.Errorf("devstack: describe quorum: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return -1, fmt.Errorf("devstack: describe quorum: %w", err)
			}
			if p.LeaderID >= 0 {
				return int(p.LeaderID), nil
			}
		}
	}
	return -1, errors.New("devstack: describe quorum: no leader")
}

// Close ends every node and, for a temporary Dir, removes it. With a Dir of
// the caller's the nodes shut down gracefully, so the next start need not
// recover their logs; a temporary cluster is simply killed. It is safe to
// call more than once.
func (k *ApacheKafka) Close() error {
	k.closeOnce.Do(func() {
		if k.tempDir {
			k.stopNodes(func(nd *kafkaNode) { nd.srv.kill() })
		} else {
			errs := make([]error, len(k.nodes))
			var mu sync.Mutex
			k.stopNodes(func(nd *kafkaNode) {
				err := nd.srv.stop(context.Background())
				mu.Lock()
				errs[nd.id] = err
				mu.Unlock()
			})
			k.closeErr = errors.Join(errs...)
		}
		for _, nd := range k.nodes {
			nd.client.Close()
		}
		if k.admin != nil {
			k.admin.Close()
		}
		if k.tempDir {
			k.closeErr = errors.Join(k.closeErr, os.RemoveAll(k.Dir))
		}
	})
	return k.closeErr
}

// stopNodes runs end on every node at once.
func (k *ApacheKafka) stopNodes(end func(*kafkaNode)) {
	var wg sync.WaitGroup
	for _, nd := range k.nodes {
		if nd.srv != nil {
			wg.Go(func() { end(nd) })
		}
	}
	wg.Wait()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
