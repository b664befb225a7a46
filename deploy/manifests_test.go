package deploy

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// directives returns the unit file's Key=Value lines (the last wins).
func directives(unit string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// TestSystemdDataDirIsWritable: the unit ran with DynamicUser and
// ProtectSystem=strict and no StateDirectory, so the documented
// --data-dir /var/lib/fcap could not be created.
func TestSystemdDataDirIsWritable(t *testing.T) {
	unit := directives(readFile(t, "systemd/fcapd.service"))
	env := directives(readFile(t, "systemd/fcapd.env"))
	dir := env["FCAP_DATA_DIR"]
	if dir == "" {
		t.Fatal("fcapd.env sets no FCAP_DATA_DIR: the node keeps nothing across restarts")
	}
	if unit["ProtectSystem"] == "strict" || unit["DynamicUser"] == "yes" {
		// Only StateDirectory= (under /var/lib), CacheDirectory= and
		// ReadWritePaths= are writable then.
		writable := map[string]bool{}
		for _, d := range strings.Fields(unit["StateDirectory"]) {
			writable["/var/lib/"+d] = true
		}
		for _, d := range strings.Fields(unit["ReadWritePaths"]) {
			writable[d] = true
		}
		if !writable[dir] {
			t.Errorf("FCAP_DATA_DIR=%s is not writable under ProtectSystem=%s DynamicUser=%s (StateDirectory=%q)", dir, unit["ProtectSystem"], unit["DynamicUser"], unit["StateDirectory"])
		}
	}
	stop, err := time.ParseDuration(unit["TimeoutStopSec"])
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v", unit["TimeoutStopSec"], err)
	}
	shutdown, err := time.ParseDuration(env["FCAP_SHUTDOWN_TIMEOUT"])
	if err != nil {
		t.Fatalf("FCAP_SHUTDOWN_TIMEOUT=%q: %v", env["FCAP_SHUTDOWN_TIMEOUT"], err)
	}
	if stop <= shutdown {
		t.Errorf("TimeoutStopSec %v <= FCAP_SHUTDOWN_TIMEOUT %v: systemd kills fcapd mid-drain", stop, shutdown)
	}
}

// statefulSet returns the StatefulSet document of the manifest.
func statefulSet(t *testing.T) string {
	t.Helper()
	for _, doc := range strings.Split(readFile(t, "kubernetes/fcap.yaml"), "\n---\n") {
		if strings.Contains(doc, "kind: StatefulSet") {
			return doc
		}
	}
	t.Fatal("no StatefulSet in kubernetes/fcap.yaml")
	return ""
}

// envValue reads `- {name: NAME, value: VALUE}` from a manifest.
func envValue(doc, name string) (string, bool) {
	m := regexp.MustCompile(`\{name: ` + regexp.QuoteMeta(name) + `, value: "?([^"}]*)"?\}`).FindStringSubmatch(doc)
	if m == nil {
		return "", false
	}
	return strings.TrimSpace(m[1]), true
}

// TestStatefulSetKeepsDataAndDrainsInTime: the StatefulSet had no volume
// for the data dir, no securityContext, no operator token for the preStop
// drain, and a grace period (90 s) shorter than the drain (60 s) plus the
// shutdown (60 s).
func TestStatefulSetKeepsDataAndDrainsInTime(t *testing.T) {
	ss := statefulSet(t)

	dir, ok := envValue(ss, "FCAP_DATA_DIR")
	if !ok || dir == "" {
		t.Error("no FCAP_DATA_DIR: a restarted pod copies everything from its peers, and a whole-cluster restart loses everything")
	}
	if !strings.Contains(ss, "volumeClaimTemplates:") {
		t.Error("no volumeClaimTemplates: the data dir would not outlive the pod")
	} else {
		claim := regexp.MustCompile(`volumeClaimTemplates:\s*\n\s*- metadata:\s*\n\s*name: (\S+)`).FindStringSubmatch(ss)
		if claim == nil || !regexp.MustCompile(`\{name: `+regexp.QuoteMeta(claim[1])+`, mountPath: `+regexp.QuoteMeta(dir)+`\}`).MatchString(ss) {
			t.Errorf("the claim template is not mounted at FCAP_DATA_DIR %q", dir)
		}
	}

	for _, want := range []string{"runAsNonRoot: true", "fsGroup:", "allowPrivilegeEscalation: false", "readOnlyRootFilesystem: true", "drop: [ALL]", "seccompProfile: {type: RuntimeDefault}"} {
		if !strings.Contains(ss, want) {
			t.Errorf("securityContext lacks %q", want)
		}
	}

	if _, tokens := envValue(ss, "FCAP_TOKENS_FILE"); tokens {
		if f, ok := envValue(ss, "FCAPCTL_TOKEN_FILE"); !ok || f == "" {
			t.Error("tokens are on (FCAP_TOKENS_FILE) but the preStop drain presents no operator token (FCAPCTL_TOKEN_FILE): it is refused and the pod dies without handing over")
		}
	}

	pre := regexp.MustCompile(`preStop:\s*\n\s*exec:\s*\n(?:\s*#.*\n)*\s*command: \[(.*)\]`).FindStringSubmatch(ss)
	if pre == nil {
		t.Fatal("no preStop exec command")
	}
	drain := time.Duration(0)
	args := strings.Split(strings.ReplaceAll(pre[1], `"`, ""), ",")
	for i := range args {
		args[i] = strings.TrimSpace(args[i])
		if i > 0 && args[i-1] == "--timeout" {
			d, err := time.ParseDuration(args[i])
			if err != nil {
				t.Fatal(err)
			}
			drain = d + 10*time.Second // fcapctl drain waits --timeout plus 10 s
		}
	}
	if drain == 0 {
		t.Fatalf("preStop %v: give the drain an explicit --timeout", args)
	}
	shutdownText, _ := envValue(ss, "FCAP_SHUTDOWN_TIMEOUT")
	shutdown, err := time.ParseDuration(shutdownText)
	if err != nil {
		t.Fatalf("FCAP_SHUTDOWN_TIMEOUT %q: %v", shutdownText, err)
	}
	m := regexp.MustCompile(`terminationGracePeriodSeconds: (\d+)`).FindStringSubmatch(ss)
	if m == nil {
		t.Fatal("no terminationGracePeriodSeconds")
	}
	grace, _ := strconv.Atoi(m[1])
	if time.Duration(grace)*time.Second < drain+shutdown {
		t.Errorf("terminationGracePeriodSeconds %d < preStop drain %v + shutdown %v: the kubelet kills the pod mid-hand-over", grace, drain, shutdown)
	}
}
