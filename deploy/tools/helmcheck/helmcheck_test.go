package helmcheck

import (
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/flashsale/seckill/cmd/seckill/app"
	"github.com/flashsale/seckill/notify/remind"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// roles are the Deployments the chart makes, one per role of cmd/seckill.
var roles = []string{app.RoleGateway, app.RoleWorker, app.RoleSweeper}

// valueSets are the values the chart is checked with: its defaults, and
// every optional part switched on.
var valueSets = map[string][]string{
	"defaults":   nil,
	"everything": {filepath.Join("testdata", "everything.yaml")},
}

// TestChartLints: helm lint --strict finds nothing, with the defaults and
// with every option on.
func TestChartLints(t *testing.T) {
	for name, files := range valueSets {
		args := []string{"lint", "--strict", chart}
		for _, f := range files {
			args = append(args, "--values", f)
		}
		out := helm(t, args...)
		require.Contains(t, out, "0 chart(s) failed", name)
	}
}

// TestChartObjectsAreValid renders the chart and checks every object as
// the API server and a rollout would take it.
func TestChartObjectsAreValid(t *testing.T) {
	for name, files := range valueSets {
		t.Run(name, func(t *testing.T) {
			r := render(t, files...)
			checkNames(t, r)
			checkDeployments(t, r)
			checkServices(t, r)
			checkBudgetsAndScalers(t, r, name == "everything")
			checkVariables(t, r)
		})
	}
}

// TestPodsMeetTheRestrictedStandard evaluates every pod template the chart
// makes (the roles' Deployments, the migration Job) with the Pod Security
// Admission's own checks at the restricted level, the latest version: what
// a namespace labelled pod-security.kubernetes.io/enforce=restricted
// admits. The same check refuses the chart with insecure values, so it is
// not vacuous.
func TestPodsMeetTheRestrictedStandard(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	restricted := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	refused := func(meta *metav1.ObjectMeta, spec *corev1.PodSpec) []string {
		var out []string
		for _, res := range eval.EvaluatePod(restricted, meta, spec) {
			if !res.Allowed {
				out = append(out, res.ForbiddenReason+": "+res.ForbiddenDetail)
			}
		}
		return out
	}
	for name, files := range valueSets {
		r := render(t, files...)
		pods := 0
		for _, d := range r.deployments {
			pods++
			require.Empty(t, refused(&d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec), "%s: Deployment %s", name, d.Name)
		}
		for _, j := range r.jobs {
			pods++
			require.Empty(t, refused(&j.Spec.Template.ObjectMeta, &j.Spec.Template.Spec), "%s: Job %s", name, j.Name)
		}
		require.Equal(t, len(roles)+1, pods, "%s: the roles and the migration", name)
	}

	insecure := render(t, filepath.Join("testdata", "insecure.yaml"))
	for _, d := range insecure.deployments {
		why := refused(&d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec)
		require.NotEmpty(t, why, "the insecure values pass for %s", d.Name)
		joined := strings.Join(why, "\n")
		for _, reason := range []string{"allowPrivilegeEscalation", "unrestricted capabilities", "runAsNonRoot", "runAsUser"} {
			require.Contains(t, joined, reason, d.Name)
		}
	}
}

// checkNames: every object's name and labels are what the API server
// accepts.
func checkNames(t *testing.T, r rendered) {
	t.Helper()
	var metas []metav1.ObjectMeta
	for _, d := range r.deployments {
		metas = append(metas, d.ObjectMeta, d.Spec.Template.ObjectMeta)
	}
	for _, s := range r.services {
		metas = append(metas, s.ObjectMeta)
		require.Empty(t, validation.IsDNS1035Label(s.Name), "Service %s: a DNS-1035 label", s.Name)
	}
	for _, o := range r.configMaps {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range r.secrets {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range r.accounts {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range r.pdbs {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range r.hpas {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range r.jobs {
		metas = append(metas, o.ObjectMeta, o.Spec.Template.ObjectMeta)
	}
	for _, o := range r.monitors {
		metas = append(metas, o.ObjectMeta)
	}
	for _, m := range metas {
		if m.Name != "" { // a pod template's name is the controller's
			require.Empty(t, validation.IsDNS1123Subdomain(m.Name), "name %q", m.Name)
		}
		require.Empty(t, metav1validation.ValidateLabels(m.Labels, field.NewPath("metadata", "labels")), "%s: labels", m.Name)
	}
	for _, so := range r.scaledObject {
		require.Empty(t, validation.IsDNS1123Subdomain(so.Metadata.Name), so.Metadata.Name)
	}
}

// role is the component label of an object.
func role(m metav1.ObjectMeta) string { return m.Labels["app.kubernetes.io/component"] }

// deployment finds the Deployment of a role.
func deployment(t *testing.T, r rendered, name string) *appsv1.Deployment {
	t.Helper()
	for _, d := range r.deployments {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}

// checkDeployments: one Deployment per role, whose selector selects its
// pods, with probes on named ports the container has, every mount on a
// volume of the pod, and requests and limits with requests within limits.
func checkDeployments(t *testing.T, r rendered) {
	t.Helper()
	var got []string
	for _, d := range r.deployments {
		got = append(got, role(d.ObjectMeta))
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		require.NoError(t, err)
		require.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "%s: the selector selects its pods", d.Name)
		pod := d.Spec.Template.Spec
		require.Len(t, pod.Containers, 1, d.Name)
		c := pod.Containers[0]

		ports := map[string]int32{}
		for _, p := range c.Ports {
			require.Empty(t, validation.IsValidPortName(p.Name), "%s: port %s", d.Name, p.Name)
			ports[p.Name] = p.ContainerPort
		}
		for what, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			require.NotNil(t, p, "%s: a %s probe", d.Name, what)
			require.NotNil(t, p.HTTPGet, "%s: %s probe over HTTP", d.Name, what)
			require.Equal(t, intstr.String, p.HTTPGet.Port.Type, "%s: %s probe on a named port", d.Name, what)
			_, ok := ports[p.HTTPGet.Port.StrVal]
			require.True(t, ok, "%s: %s probe on port %s, which the container lacks", d.Name, what, p.HTTPGet.Port.StrVal)
			require.Equal(t, "ops", p.HTTPGet.Port.StrVal, "%s: %s probe on the ops listener", d.Name, what)
		}
		require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
		require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)

		volumes := map[string]bool{}
		for _, v := range pod.Volumes {
			volumes[v.Name] = true
		}
		for _, m := range c.VolumeMounts {
			require.True(t, volumes[m.Name], "%s: mount %s has no volume", d.Name, m.Name)
		}
		require.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"}, "%s: a writable /tmp beside the read-only root", d.Name)

		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, ok := c.Resources.Requests[res]
			require.True(t, ok, "%s: requests %s", d.Name, res)
			lim, ok := c.Resources.Limits[res]
			require.True(t, ok, "%s: limits %s", d.Name, res)
			require.LessOrEqual(t, req.Cmp(lim), 0, "%s: %s request above its limit", d.Name, res)
		}
		require.NotNil(t, pod.AutomountServiceAccountToken)
		require.False(t, *pod.AutomountServiceAccountToken, "%s: no pod talks to the API", d.Name)
	}
	slices.Sort(got)
	want := slices.Clone(roles)
	slices.Sort(want)
	require.Equal(t, want, got, "one Deployment per role")
}

// checkServices: every Service selects pods of the chart that have the
// port it targets.
func checkServices(t *testing.T, r rendered) {
	t.Helper()
	for _, s := range r.services {
		sel := labels.SelectorFromSet(s.Spec.Selector)
		matched := 0
		for _, d := range r.deployments {
			if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				continue
			}
			matched++
			for _, p := range s.Spec.Ports {
				found := false
				for _, cp := range d.Spec.Template.Spec.Containers[0].Ports {
					found = found || cp.Name == p.TargetPort.StrVal
				}
				require.True(t, found, "Service %s targets port %s, which %s lacks", s.Name, p.TargetPort.StrVal, d.Name)
			}
		}
		require.Positive(t, matched, "Service %s selects no pod", s.Name)
		for _, j := range r.jobs {
			require.False(t, sel.Matches(labels.Set(j.Spec.Template.Labels)), "Service %s selects the migration's pod", s.Name)
		}
	}
	for _, m := range r.monitors {
		sel, err := metav1.LabelSelectorAsSelector(&m.Spec.Selector)
		require.NoError(t, err)
		var svc int
		for _, s := range r.services {
			if sel.Matches(labels.Set(s.Labels)) {
				svc++
				require.Equal(t, "None", s.Spec.ClusterIP, "Prometheus scrapes every pod: a headless Service")
				for _, e := range m.Spec.Endpoints {
					require.True(t, slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port }),
						"ServiceMonitor endpoint port %s is not on Service %s", e.Port, s.Name)
					require.Equal(t, "/metrics", e.Path)
					require.True(t, slices.ContainsFunc(e.RelabelConfigs, func(c monitoringv1.RelabelConfig) bool { return c.TargetLabel == "role" }),
						"the targets get the role label the rules read")
				}
			}
		}
		require.Equal(t, 1, svc, "the ServiceMonitor selects the ops Service")
	}
}

// checkBudgetsAndScalers: each role has a PodDisruptionBudget selecting
// its pods alone; every autoscaler scales a Deployment of the chart, at
// most one per Deployment, and a scaled Deployment leaves its replicas to
// it.
func checkBudgetsAndScalers(t *testing.T, r rendered, everything bool) {
	t.Helper()
	budgets := map[string]int{}
	for _, p := range r.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		require.NoError(t, err)
		for _, d := range r.deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				budgets[d.Name]++
			}
		}
		require.True(t, (p.Spec.MaxUnavailable == nil) != (p.Spec.MinAvailable == nil), "%s: one of minAvailable, maxUnavailable", p.Name)
	}
	for _, d := range r.deployments {
		require.Equal(t, 1, budgets[d.Name], "%s: one PodDisruptionBudget", d.Name)
	}

	scaled := map[string]int{}
	for _, h := range r.hpas {
		require.Equal(t, "Deployment", h.Spec.ScaleTargetRef.Kind)
		deployment(t, r, h.Spec.ScaleTargetRef.Name)
		scaled[h.Spec.ScaleTargetRef.Name]++
		require.NotNil(t, h.Spec.MinReplicas)
		require.LessOrEqual(t, *h.Spec.MinReplicas, h.Spec.MaxReplicas, h.Name)
		require.NotEmpty(t, h.Spec.Metrics, h.Name)
	}
	cfg, err := app.LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	for _, so := range r.scaledObject {
		deployment(t, r, so.Spec.ScaleTargetRef.Name)
		scaled[so.Spec.ScaleTargetRef.Name]++
		require.LessOrEqual(t, *so.Spec.MinReplicaCount, *so.Spec.MaxReplicaCount, so.Metadata.Name)
		for _, tr := range so.Spec.Triggers {
			switch tr.Type {
			case "kafka":
				require.Equal(t, cfg.KafkaTopic, tr.Metadata["topic"], "the workers' topic (SECKILL_KAFKA_TOPIC's default)")
				require.Equal(t, cfg.KafkaGroup, tr.Metadata["consumerGroup"], "the workers' group (SECKILL_KAFKA_GROUP's default)")
				require.NotEmpty(t, tr.Metadata["bootstrapServers"])
				_, err := strconv.Atoi(tr.Metadata["lagThreshold"])
				require.NoError(t, err)
			case "prometheus":
				require.Contains(t, tr.Metadata["query"], waitroom.MetricWaiting, "the gateways scale on the rooms' lines")
				_, err := strconv.ParseFloat(tr.Metadata["threshold"], 64)
				require.NoError(t, err)
			case "cpu":
				require.Equal(t, "Utilization", tr.MetricType)
			default:
				t.Fatalf("%s: trigger %s", so.Metadata.Name, tr.Type)
			}
		}
	}
	for _, d := range r.deployments {
		require.LessOrEqual(t, scaled[d.Name], 1, "%s: one autoscaler", d.Name)
		if scaled[d.Name] == 1 {
			require.Nil(t, d.Spec.Replicas, "%s: its autoscaler sets the replicas; a fixed count would fight it on every upgrade", d.Name)
		} else {
			require.NotNil(t, d.Spec.Replicas, d.Name)
		}
	}
	if everything {
		require.Len(t, r.scaledObject, 2, "the workers and the gateways")
		require.Len(t, r.monitors, 1)
		require.Len(t, r.secrets, 1)
	} else {
		require.Empty(t, r.scaledObject, "KEDA is off by default")
		require.Empty(t, r.monitors, "the ServiceMonitor is off by default")
	}
}

// checkVariables: every variable the containers get is one of the
// configuration (cmd/seckill/CONFIG.md), from the ConfigMap, the Secret or
// the chart; each role's whole environment loads; and the probes and the
// scrape reach the port the process listens on for its ops routes.
func checkVariables(t *testing.T, r rendered) {
	t.Helper()
	known := map[string]bool{}
	typ := reflect.TypeOf(app.Config{})
	for i := range typ.NumField() {
		known[typ.Field(i).Tag.Get("env")] = true
	}
	require.Len(t, r.configMaps, 1)
	shared := r.configMaps[0].Data
	for k := range shared {
		require.True(t, known[k], "the ConfigMap sets %s, which the configuration does not have", k)
	}
	// The Web Push keys must be one pair, as `seckill vapid` makes them.
	vapid, err := remind.GenerateVAPID("mailto:ops@shop.example")
	require.NoError(t, err)
	for _, d := range r.deployments {
		c := d.Spec.Template.Spec.Containers[0]
		env := map[string]string{}
		for k, v := range shared {
			env[k] = v
		}
		for _, e := range c.Env {
			require.Empty(t, validation.IsEnvVarName(e.Name), "%s: %s", d.Name, e.Name)
			require.True(t, known[e.Name], "%s sets %s, which the configuration does not have", d.Name, e.Name)
			if ref := e.ValueFrom; ref != nil {
				require.NotNil(t, ref.SecretKeyRef, "%s: %s from a Secret", d.Name, e.Name)
				require.Equal(t, e.Name, ref.SecretKeyRef.Key, "each secret from the key of its name")
				env[e.Name] = secretFor(e.Name)
				if strings.HasPrefix(e.Name, "SECKILL_VAPID_") || e.Name == "SECKILL_SMTP_URL" {
					require.True(t, ref.SecretKeyRef.Optional != nil && *ref.SecretKeyRef.Optional,
						"%s: %s is optional (reminders stay off without it)", d.Name, e.Name)
				}
				switch e.Name {
				case "SECKILL_VAPID_PUBLIC_KEY":
					env[e.Name] = vapid.PublicKey
				case "SECKILL_VAPID_PRIVATE_KEY":
					env[e.Name] = vapid.PrivateKey
				}
				continue
			}
			env[e.Name] = e.Value
		}
		require.Len(t, c.EnvFrom, 1)
		require.Equal(t, r.configMaps[0].Name, c.EnvFrom[0].ConfigMapRef.Name)

		cfg, err := app.LoadConfig(func(k string) string { return env[k] })
		require.NoError(t, err, "%s: its environment loads", d.Name)
		require.Equal(t, []string{role(d.ObjectMeta)}, cfg.Roles, d.Name)
		for _, secret := range []string{"SECKILL_JWT_SECRET", "SECKILL_ADMIN_TOKEN", "SECKILL_DATABASE_URL", "SECKILL_REDIS_URL"} {
			require.Contains(t, env, secret, "%s gets %s", d.Name, secret)
			if v, ok := shared[secret]; ok {
				t.Fatalf("%s is in the ConfigMap (%q): secrets come from the Secret", secret, v)
			}
		}

		opsAddr := cfg.HTTPAddr
		if cfg.HasRole(app.RoleGateway) {
			opsAddr = cfg.OpsAddr
		}
		_, port, err := net.SplitHostPort(opsAddr)
		require.NoError(t, err)
		var ops int32
		for _, p := range c.Ports {
			if p.Name == "ops" {
				ops = p.ContainerPort
			}
		}
		require.Equal(t, port, fmt.Sprint(ops), "%s: the ops port is where the process serves /healthz, /readyz and /metrics", d.Name)
		require.Equal(t, port, d.Spec.Template.Annotations["prometheus.io/port"], "%s: scraped where it serves /metrics", d.Name)
	}
}

// secretFor is a value of the right shape for a secret variable, for
// loading a role's environment.
func secretFor(name string) string {
	switch name {
	case "SECKILL_DATABASE_URL":
		return "postgres://seckill:pw@postgres:5432/seckill"
	case "SECKILL_REDIS_URL":
		return "redis://redis:6379/0"
	case "SECKILL_SMTP_URL":
		return "smtp://shop:pw@smtp.example:587"
	}
	return "a-test-secret-of-at-least-thirty-two-bytes"
}
