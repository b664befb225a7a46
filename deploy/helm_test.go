package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "helm/fcap"

// helmBinary finds helm: $FCAP_HELM, else helm on the PATH. Without one
// the chart tests skip, unless FCAP_REQUIRE_HELM=1 (.ci/run builds helm
// and sets both) makes that a failure.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FCAP_HELM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if os.Getenv("FCAP_REQUIRE_HELM") == "1" {
		t.Fatal("FCAP_REQUIRE_HELM=1 but no helm: set FCAP_HELM or put helm on the PATH (.ci/run builds it)")
	}
	t.Skip("no helm (FCAP_HELM unset, none on the PATH): go install helm.sh/helm/v4/cmd/helm@v4.3.2")
	return ""
}

// helmTemplate renders the chart as release "fcap" in namespace "fcap"
// with the given --set and --set-json arguments.
func helmTemplate(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), append([]string{"template", "fcap", chartDir, "--namespace", "fcap"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, &helmError{err: err, stderr: stderr.String()}
	}
	return out, nil
}

type helmError struct {
	err    error
	stderr string
}

func (e *helmError) Error() string { return e.err.Error() + ": " + e.stderr }

func render(t *testing.T, args ...string) kubeObjects {
	t.Helper()
	out, err := helmTemplate(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeKube(out)
	if err != nil {
		t.Fatalf("helm template %q: %v", args, err)
	}
	return objs
}

// TestChartRendersValidObjects: the chart's defaults and every optional
// part, rendered and strictly decoded into the k8s.io/api types.
func TestChartRendersValidObjects(t *testing.T) {
	appVersion := chartAppVersion(t)

	t.Run("defaults", func(t *testing.T) {
		objs := render(t)
		if len(objs.statefulSets) != 1 || len(objs.pdbs) != 1 || len(objs.services) != 2 {
			t.Fatalf("%d StatefulSets, %d PDBs, %d Services; want 1, 1, 2", len(objs.statefulSets), len(objs.pdbs), len(objs.services))
		}
		if n := len(objs.serviceMonitors) + len(objs.prometheusRules) + len(objs.networkPolicies); n != 0 {
			t.Errorf("%d optional objects rendered by default, want none", n)
		}
		ss := objs.statefulSets[0]
		checkStatefulSet(t, ss, appVersion)

		var headless, clients *corev1.Service
		for _, s := range objs.services {
			if s.Spec.ClusterIP == corev1.ClusterIPNone {
				headless = s
			} else {
				clients = s
			}
		}
		if headless == nil || clients == nil {
			t.Fatal("want a headless Service and a client Service")
		}
		if ss.Spec.ServiceName != headless.Name || !headless.Spec.PublishNotReadyAddresses {
			t.Errorf("headless Service %s (publishNotReadyAddresses %v) is not the StatefulSet's serviceName %s, or hides pods that are not ready (a new cluster forms from them)",
				headless.Name, headless.Spec.PublishNotReadyAddresses, ss.Spec.ServiceName)
		}
		join, _ := envOf(container(t, ss), "FCAP_JOIN")
		if !strings.HasPrefix(join, headless.Name+".fcap.svc.") {
			t.Errorf("FCAP_JOIN %q does not name the headless Service %s", join, headless.Name)
		}
		if clients.Spec.PublishNotReadyAddresses {
			t.Error("the client Service lists pods that are not ready")
		}
		for _, s := range objs.services {
			if !reflect.DeepEqual(s.Spec.Selector, ss.Spec.Selector.MatchLabels) {
				t.Errorf("Service %s selects %v, the StatefulSet's pods are %v", s.Name, s.Spec.Selector, ss.Spec.Selector.MatchLabels)
			}
		}
		if pdb := objs.pdbs[0]; pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 ||
			!reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, ss.Spec.Selector.MatchLabels) {
			t.Errorf("PodDisruptionBudget %+v: one of the StatefulSet's pods at a time", pdb.Spec)
		}
		if len(ss.Spec.VolumeClaimTemplates) != 1 {
			t.Errorf("%d volumeClaimTemplates, want 1 (the data dir)", len(ss.Spec.VolumeClaimTemplates))
		}
	})

	t.Run("optional parts", func(t *testing.T) {
		objs := render(t,
			"--set", "serviceMonitor.enabled=true",
			"--set", "serviceMonitor.cluster=eu1",
			"--set", "prometheusRule.enabled=true",
			"--set", "networkPolicy.enabled=true",
			"--set-json", `networkPolicy.clients=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ads"}}}]`,
			"--set-json", `networkPolicy.monitoring=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`,
			"--set", "fcap.tokensSecret=",
			"--set", "persistence.storageClassName=fast",
			"--set", "replicaCount=1",
		)
		if len(objs.serviceMonitors) != 1 || len(objs.prometheusRules) != 1 || len(objs.networkPolicies) != 1 {
			t.Fatalf("%d ServiceMonitors, %d PrometheusRules, %d NetworkPolicies; want 1 of each",
				len(objs.serviceMonitors), len(objs.prometheusRules), len(objs.networkPolicies))
		}
		ss := objs.statefulSets[0]
		c := container(t, ss)
		if _, ok := envOf(c, "FCAP_TOKENS_FILE"); ok {
			t.Error("tokensSecret is empty but FCAP_TOKENS_FILE is set")
		}
		if v, _ := envOf(c, "FCAP_BOOTSTRAP"); v != "true" {
			t.Error("one replica without FCAP_BOOTSTRAP: the node waits for seeds forever")
		}
		if sc := ss.Spec.VolumeClaimTemplates[0].Spec.StorageClassName; sc == nil || *sc != "fast" {
			t.Errorf("storageClassName %v, want fast", sc)
		}

		sm := objs.serviceMonitors[0]
		var headless string
		for _, s := range objs.services {
			if s.Spec.ClusterIP == corev1.ClusterIPNone {
				headless = s.Name
				for k, v := range sm.Spec.Selector.MatchLabels {
					if s.Labels[k] != v {
						t.Errorf("the ServiceMonitor selects %s=%s, which the headless Service %s lacks", k, v, s.Name)
					}
				}
			} else if matches(sm.Spec.Selector.MatchLabels, s.Labels) {
				t.Errorf("the ServiceMonitor also selects the client Service %s: every node scraped twice", s.Name)
			}
		}
		if headless == "" {
			t.Fatal("no headless Service")
		}
		relabel := map[string]string{}
		for _, r := range sm.Spec.Endpoints[0].Relabelings {
			relabel[r.TargetLabel] = *r.Replacement
		}
		if sm.Spec.Endpoints[0].Port != "http" || relabel["job"] != "fcap" || relabel["cluster"] != "eu1" {
			t.Errorf("ServiceMonitor endpoint %+v: scrape port http with job=fcap (what the alert rules select) and the cluster label", sm.Spec.Endpoints[0])
		}

		var source ruleFile
		if err := yaml.UnmarshalStrict([]byte(readFile(t, "prometheus/fcap-alerts.yaml")), &source); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(objs.prometheusRules[0].Spec, source) {
			t.Error("the PrometheusRule's groups differ from prometheus/fcap-alerts.yaml")
		}

		np := objs.networkPolicies[0]
		if !reflect.DeepEqual(np.Spec.PodSelector.MatchLabels, ss.Spec.Selector.MatchLabels) || len(np.Spec.Ingress) != 3 {
			t.Fatalf("NetworkPolicy %+v: the StatefulSet's pods, three ingress rules", np.Spec)
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
		for _, rule := range np.Spec.Ingress {
			if len(rule.From) == 0 {
				t.Errorf("ingress rule %+v admits any source though clients and monitoring are given", rule)
			}
			for _, p := range rule.Ports {
				if p.Port == nil || !ports[p.Port.String()] {
					t.Errorf("NetworkPolicy port %v names no container port (%v)", p.Port, ports)
				}
			}
		}
		if got := len(np.Spec.Ingress[0].Ports); got != 4 {
			t.Errorf("fcap pods admit %d ports from each other, want 4 (data, gossip TCP and UDP, HTTP)", got)
		}
	})

	t.Run("sized replay and grace period", func(t *testing.T) {
		objs := render(t,
			"--set", "probes.startup.failureThreshold=180",
			"--set", "drain.timeoutSeconds=300",
			"--set", "fcap.shutdownTimeoutSeconds=120",
		)
		ss := objs.statefulSets[0]
		checkStatefulSet(t, ss, appVersion)
		if got := probeBudget(container(t, ss).StartupProbe); got != 30*time.Minute {
			t.Errorf("startup probe allows %v, want 30m", got)
		}
		if g := *ss.Spec.Template.Spec.TerminationGracePeriodSeconds; g != 300+10+120+5 {
			t.Errorf("terminationGracePeriodSeconds %d, want the drain, fcapctl's 10 s, the shutdown and the margin: 435", g)
		}
	})

	t.Run("values refused", func(t *testing.T) {
		// values.schema.json: what fcapd or the API server would refuse
		// only once the pods run.
		for _, set := range []string{
			"fcap.replicas=two",
			"fcap.memoryLimit=3G", // fcapd reads 3GB or 3GiB
			"fcap.logFormat=xml",
			"probes.startup.failureThreshold=0",
			"ports.gossip=70000",
			"drain.timeoutSeconds=1m",
			"probes.startup.failureTreshold=90",
		} {
			if _, err := helmTemplate(t, "--set", set); err == nil {
				t.Errorf("--set %s rendered", set)
			}
		}
	})

	t.Run("image tag", func(t *testing.T) {
		ss := render(t, "--set", "image.tag=v9.8.7", "--set", "image.repository=registry.example/fcapd").statefulSets[0]
		if got := container(t, ss).Image; got != "registry.example/fcapd:v9.8.7" {
			t.Errorf("image %q", got)
		}
		if _, err := helmTemplate(t, "--set", "image.tag=latest"); err == nil || !strings.Contains(err.Error(), "latest") {
			t.Errorf("image.tag=latest rendered (%v); want a refusal naming it", err)
		}
	})
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestChartCarriesTheAlertRules: a chart reads only files inside it, so
// it carries a copy of prometheus/fcap-alerts.yaml; this keeps the copy
// the one source's twin.
func TestChartCarriesTheAlertRules(t *testing.T) {
	src, cp := readFile(t, "prometheus/fcap-alerts.yaml"), readFile(t, chartDir+"/files/fcap-alerts.yaml")
	if src != cp {
		t.Fatal("deploy/helm/fcap/files/fcap-alerts.yaml differs from deploy/prometheus/fcap-alerts.yaml: cp deploy/prometheus/fcap-alerts.yaml deploy/helm/fcap/files/")
	}
	if !slices.Contains(strings.Split(readFile(t, chartDir+"/templates/prometheusrule.yaml"), "\n"), `{{- $rules := .Files.Get "files/fcap-alerts.yaml" | fromYaml }}`) {
		t.Error("templates/prometheusrule.yaml no longer renders files/fcap-alerts.yaml")
	}
}
