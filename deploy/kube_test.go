package deploy

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// kubeObjects are the documents of a manifest, each strictly decoded
// into its k8s.io/api type (or, for the prometheus-operator kinds, into
// the local types of crd_test.go).
type kubeObjects struct {
	all             []any
	namespaces      []*corev1.Namespace
	services        []*corev1.Service
	statefulSets    []*appsv1.StatefulSet
	pdbs            []*policyv1.PodDisruptionBudget
	networkPolicies []*networkingv1.NetworkPolicy
	serviceMonitors []*serviceMonitor
	prometheusRules []*prometheusRule
}

// splitDocuments splits a YAML stream at its "---" lines and drops the
// documents that hold only comments.
func splitDocuments(stream []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(stream), -1) {
		empty := true
		for _, line := range strings.Split(d, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// decodeKube strictly decodes every document of a manifest: a field the
// type does not have, at the level it is written (a probe under spec
// instead of the container, a misspelt key), a duplicate key or a value
// of the wrong type fails, as would a kind the deployment does not use.
func decodeKube(stream []byte) (kubeObjects, error) {
	var objs kubeObjects
	for i, doc := range splitDocuments(stream) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return objs, fmt.Errorf("document %d: %w", i, err)
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "v1 Namespace":
			o := &corev1.Namespace{}
			objs.namespaces, obj = append(objs.namespaces, o), o
		case "v1 Service":
			o := &corev1.Service{}
			objs.services, obj = append(objs.services, o), o
		case "apps/v1 StatefulSet":
			o := &appsv1.StatefulSet{}
			objs.statefulSets, obj = append(objs.statefulSets, o), o
		case "policy/v1 PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			objs.pdbs, obj = append(objs.pdbs, o), o
		case "networking.k8s.io/v1 NetworkPolicy":
			o := &networkingv1.NetworkPolicy{}
			objs.networkPolicies, obj = append(objs.networkPolicies, o), o
		case "monitoring.coreos.com/v1 ServiceMonitor":
			o := &serviceMonitor{}
			objs.serviceMonitors, obj = append(objs.serviceMonitors, o), o
		case "monitoring.coreos.com/v1 PrometheusRule":
			o := &prometheusRule{}
			objs.prometheusRules, obj = append(objs.prometheusRules, o), o
		default:
			return objs, fmt.Errorf("document %d: unexpected apiVersion %q kind %q", i, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return objs, fmt.Errorf("document %d (%s): %w", i, meta.Kind, err)
		}
		if v, ok := obj.(interface{ validate() error }); ok {
			if err := v.validate(); err != nil {
				return objs, fmt.Errorf("document %d (%s): %w", i, meta.Kind, err)
			}
		}
		objs.all = append(objs.all, obj)
	}
	if len(objs.all) == 0 {
		return objs, fmt.Errorf("no documents")
	}
	return objs, nil
}

// TestDecodeKubeIsStrict: the decoder the manifests are checked with
// refuses what the API server would refuse or silently drop.
func TestDecodeKubeIsStrict(t *testing.T) {
	good := "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  ports: [{port: 1}]\n"
	if _, err := decodeKube([]byte(good)); err != nil {
		t.Fatalf("a valid Service: %v", err)
	}
	for name, doc := range map[string]string{
		"unknown field":    "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  prots: [{port: 1}]\n",
		"misplaced field":  "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nports: [{port: 1}]\n",
		"wrong type":       "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  ports: [{port: one}]\n",
		"duplicate key":    "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  ports: [{port: 1}]\n  ports: [{port: 2}]\n",
		"unexpected kind":  "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
		"probe on the pod": "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: a}\nspec:\n  template:\n    spec:\n      startupProbe: {}\n",
	} {
		if _, err := decodeKube([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// container returns the fcapd container of a StatefulSet.
func container(t *testing.T, ss *appsv1.StatefulSet) *corev1.Container {
	t.Helper()
	for i := range ss.Spec.Template.Spec.Containers {
		if c := &ss.Spec.Template.Spec.Containers[i]; c.Name == "fcapd" {
			return c
		}
	}
	t.Fatalf("StatefulSet %s has no fcapd container", ss.Name)
	return nil
}

func envOf(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// probeBudget is how long a probe lets a container fail before it acts.
func probeBudget(p *corev1.Probe) time.Duration {
	period, failures := p.PeriodSeconds, p.FailureThreshold
	if period == 0 {
		period = 10
	}
	if failures == 0 {
		failures = 3
	}
	return time.Duration(period*failures) * time.Second
}

// minReplay is the least time a startup probe must leave a node to load
// its data dir: a whole-log replay of 10M impressions took 63 s
// (docs/bench/BENCHMARKS.md, "Restart time and disk bytes"), and a
// node's memory holds several times that.
const minReplay = 5 * time.Minute

// checkStatefulSet asserts what every fcap StatefulSet, plain or
// rendered, must do: keep its data dir on a claim, wait for a replay
// before the liveness probe may kill it, run a versioned image, drain in
// preStop within the grace period.
func checkStatefulSet(t *testing.T, ss *appsv1.StatefulSet, wantTag string) {
	t.Helper()
	c := container(t, ss)

	image := c.Image
	tag := image[strings.LastIndex(image, ":")+1:]
	if !strings.Contains(image, ":") || tag == "latest" || strings.Contains(tag, "/") {
		t.Errorf("image %q: give it a version tag, not latest (which build runs?)", image)
	} else if wantTag != "" && tag != wantTag {
		t.Errorf("image %q, want tag %q (the chart's appVersion)", image, wantTag)
	}

	switch sp := c.StartupProbe; {
	case sp == nil:
		t.Error("no startupProbe: the liveness probe may kill a node replaying its data dir (fcapd listens only after it)")
	case sp.HTTPGet == nil || sp.HTTPGet.Path != "/healthz":
		t.Errorf("startupProbe %+v: probe /healthz, which answers as soon as fcapd listens", sp.ProbeHandler)
	case probeBudget(sp) < minReplay:
		t.Errorf("startupProbe allows %v (failureThreshold x periodSeconds), less than a replay may take (%v)", probeBudget(sp), minReplay)
	}
	if rp := c.ReadinessProbe; rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/readyz" {
		t.Error("readinessProbe is not /readyz (active and holding its partitions)")
	}
	if lp := c.LivenessProbe; lp == nil || lp.HTTPGet == nil || lp.HTTPGet.Path != "/healthz" {
		t.Error("livenessProbe is not /healthz")
	}

	dir, _ := envOf(c, "FCAP_DATA_DIR")
	if dir == "" {
		t.Error("no FCAP_DATA_DIR: a restarted pod copies everything from its peers")
	}
	claims := map[string]bool{}
	for _, pvc := range ss.Spec.VolumeClaimTemplates {
		claims[pvc.Name] = true
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir && claims[m.Name] {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("FCAP_DATA_DIR %q is not a volumeClaimTemplate's mount: the data dir would not outlive the pod", dir)
	}

	psc, sc := ss.Spec.Template.Spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.FSGroup == nil ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: non-root, fsGroup (the volume is writable), RuntimeDefault seccomp", psc)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container securityContext %+v: no privilege escalation, read-only root, drop ALL", sc)
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Error("no memory request and limit: memory is what an fcap node is sized by")
	}

	if _, tokens := envOf(c, "FCAP_TOKENS_FILE"); tokens {
		if f, _ := envOf(c, "FCAPCTL_TOKEN_FILE"); f == "" {
			t.Error("tokens are on but the preStop drain presents no operator token (FCAPCTL_TOKEN_FILE)")
		}
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil {
		t.Fatal("no preStop exec: a deleted pod would leave without handing its partitions over")
	}
	cmd := c.Lifecycle.PreStop.Exec.Command
	var drain time.Duration
	for i, a := range cmd {
		if a == "--timeout" && i+1 < len(cmd) {
			d, err := time.ParseDuration(cmd[i+1])
			if err != nil {
				t.Fatalf("preStop %q: %v", cmd, err)
			}
			drain = d + 10*time.Second // fcapctl drain waits --timeout plus 10 s
		}
	}
	if len(cmd) < 3 || !strings.HasSuffix(cmd[0], "fcapctl") || cmd[1] != "drain" || cmd[2] != "--self" || drain == 0 {
		t.Fatalf("preStop %q: want fcapctl drain --self ... --timeout D", cmd)
	}
	shutdownText, _ := envOf(c, "FCAP_SHUTDOWN_TIMEOUT")
	shutdown, err := time.ParseDuration(shutdownText)
	if err != nil {
		t.Fatalf("FCAP_SHUTDOWN_TIMEOUT %q: %v", shutdownText, err)
	}
	if grace := ss.Spec.Template.Spec.TerminationGracePeriodSeconds; grace == nil {
		t.Error("no terminationGracePeriodSeconds: the default 30 s cuts the drain short")
	} else if time.Duration(*grace)*time.Second < drain+shutdown {
		t.Errorf("terminationGracePeriodSeconds %d < preStop drain %v + shutdown %v: the kubelet kills the pod mid-hand-over", *grace, drain, shutdown)
	}
}

// TestPlainManifestsDecodeStrictly: kubernetes/fcap.yaml is what the API
// server would accept, field for field, and its StatefulSet does what
// the chart's does. It ran fcapd:latest with no startupProbe.
func TestPlainManifestsDecodeStrictly(t *testing.T) {
	objs, err := decodeKube([]byte(readFile(t, "kubernetes/fcap.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.statefulSets) != 1 || len(objs.services) != 1 || len(objs.pdbs) != 1 {
		t.Fatalf("%d StatefulSets, %d Services, %d PodDisruptionBudgets; want 1 of each", len(objs.statefulSets), len(objs.services), len(objs.pdbs))
	}
	checkStatefulSet(t, objs.statefulSets[0], chartAppVersion(t))
	if svc := objs.services[0]; svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Name != objs.statefulSets[0].Spec.ServiceName {
		t.Errorf("Service %s (clusterIP %q) is not the StatefulSet's headless serviceName %q", svc.Name, svc.Spec.ClusterIP, objs.statefulSets[0].Spec.ServiceName)
	}
}

// chartAppVersion reads appVersion from the chart's Chart.yaml.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "helm/fcap/Chart.yaml")), &chart); err != nil {
		t.Fatal(err)
	}
	if chart.AppVersion == "" || !bytes.HasPrefix([]byte(chart.AppVersion), []byte("v")) {
		t.Fatalf("Chart.yaml appVersion %q: want a release such as v0.1.0 (the image tag and fcapd --version)", chart.AppVersion)
	}
	return chart.AppVersion
}
