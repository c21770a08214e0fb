package helmcheck

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	kyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// root is the repository's top folder, from this package's.
var root = filepath.Join("..", "..", "..")

// chart is the chart's folder.
var chart = filepath.Join(root, "deploy", "helm", "seckill")

// helmOnce builds helm once per test binary.
var helmOnce = sync.OnceValues(buildHelm)

// buildHelm returns bin/helm, installing it first when it is missing with
// the go command and the version the Makefile pins (HELM), as `make
// test-deps` does: the Go module proxy is all it needs.
func buildHelm() (string, error) {
	bin, err := filepath.Abs(filepath.Join(root, "bin", "helm"))
	if err != nil {
		return "", err
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^HELM \?= (\S+@v\S+)$`).FindSubmatch(makefile)
	if m == nil {
		return "", errors.New("the Makefile pins no `HELM ?= helm.sh/helm/v4/cmd/helm@vX.Y.Z`")
	}
	version := string(m[1][bytes.LastIndexByte(m[1], '@')+1:])
	// helm built by go install says only "v4.3" of itself; the go
	// command recorded the module's version in the binary.
	if info, err := buildinfo.ReadFile(bin); err == nil && info.Main.Version == version {
		return bin, nil
	}
	cmd := exec.Command("go", "install", string(m[1]))
	cmd.Env = append(os.Environ(), "GOBIN="+filepath.Dir(bin), "GOFLAGS=-mod=mod", "GOWORK=off")
	cmd.Dir = os.TempDir() // outside both modules: go install pkg@version needs none
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New("go install " + string(m[1]) + ": " + err.Error() + "\n" + string(out))
	}
	return bin, nil
}

// helm runs helm with args and returns its standard output; a failure
// fails the test with what helm said.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helmErr(t, args...)
	require.NoError(t, err, "helm %s:\n%s", strings.Join(args, " "), out)
	return out
}

func helmErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := helmOnce()
	require.NoError(t, err, "helm is built by `make test-deps` (go install, through the Go module proxy)")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// helm keeps its cache and settings in folders of its own.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	err = cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// rendered is the chart's objects as helm template made them, decoded.
type rendered struct {
	deployments  []*appsv1.Deployment
	services     []*corev1.Service
	configMaps   []*corev1.ConfigMap
	secrets      []*corev1.Secret
	accounts     []*corev1.ServiceAccount
	pdbs         []*policyv1.PodDisruptionBudget
	hpas         []*autoscalingv2.HorizontalPodAutoscaler
	jobs         []*batchv1.Job
	monitors     []*monitoringv1.ServiceMonitor
	scaledObject []*scaledObject
}

// strictScheme knows every kind the chart makes but KEDA's; its decoder
// refuses unknown and duplicated fields, as `kubectl apply
// --validate=strict` and the API server's field validation do.
func strictDecoder(t *testing.T) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		appsv1.AddToScheme, corev1.AddToScheme, policyv1.AddToScheme, autoscalingv2.AddToScheme,
		batchv1.AddToScheme, monitoringv1.AddToScheme,
	} {
		require.NoError(t, add(scheme))
	}
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
		kjson.SerializerOptions{Yaml: true, Strict: true})
}

// render runs helm template with the values files given and decodes what
// it prints.
func render(t *testing.T, valuesFiles ...string) rendered {
	t.Helper()
	args := []string{"template", "shop", chart, "--namespace", "sale"}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	out := helm(t, args...)
	dec := strictDecoder(t)
	var r rendered
	docs := kyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	n := 0
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		js, err := kyaml.ToJSON(doc)
		require.NoError(t, err)
		if string(js) == "null" {
			continue // an empty document between separators
		}
		require.NoError(t, json.Unmarshal(js, &head))
		n++
		if head.APIVersion == "keda.sh/v1alpha1" {
			require.Equal(t, "ScaledObject", head.Kind)
			r.scaledObject = append(r.scaledObject, decodeScaledObject(t, js))
			continue
		}
		obj, gvk, err := dec.Decode(doc, nil, nil)
		require.NoError(t, err, "%s %s: not a valid object of the Kubernetes API (strict):\n%s", head.APIVersion, head.Kind, doc)
		switch o := obj.(type) {
		case *appsv1.Deployment:
			r.deployments = append(r.deployments, o)
		case *corev1.Service:
			r.services = append(r.services, o)
		case *corev1.ConfigMap:
			r.configMaps = append(r.configMaps, o)
		case *corev1.Secret:
			r.secrets = append(r.secrets, o)
		case *corev1.ServiceAccount:
			r.accounts = append(r.accounts, o)
		case *policyv1.PodDisruptionBudget:
			r.pdbs = append(r.pdbs, o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			r.hpas = append(r.hpas, o)
		case *batchv1.Job:
			r.jobs = append(r.jobs, o)
		case *monitoringv1.ServiceMonitor:
			r.monitors = append(r.monitors, o)
		default:
			t.Fatalf("the chart makes a %s this test does not check: add it to rendered", gvk)
		}
	}
	require.Positive(t, n, "helm template printed no object")
	return r
}

// scaledObject is the part of KEDA's ScaledObject (keda.sh/v1alpha1) the
// chart writes: KEDA's Go module is not served here, so its fields are
// written out from KEDA's reference, and the decoding refuses any other.
type scaledObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		ScaleTargetRef struct {
			Name       string `json:"name"`
			Kind       string `json:"kind,omitempty"`
			APIVersion string `json:"apiVersion,omitempty"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		PollingInterval *int32 `json:"pollingInterval"`
		CooldownPeriod  *int32 `json:"cooldownPeriod"`
		Triggers        []struct {
			Type       string            `json:"type"`
			MetricType string            `json:"metricType,omitempty"`
			Metadata   map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

func decodeScaledObject(t *testing.T, js []byte) *scaledObject {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var so scaledObject
	require.NoError(t, dec.Decode(&so), "ScaledObject: %s", js)
	return &so
}
