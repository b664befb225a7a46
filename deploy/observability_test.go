package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// durabilityMetrics are the signals that data is being lost or is at
// risk: each needs an alert and a dashboard panel.
var durabilityMetrics = []string{
	"fcap_log_healthy",
	"fcap_log_write_errors_total",
	"fcap_log_dropped_records_total",
	"fcap_snapshot_errors_total",
	"fcap_replication_errors_total",
	"fcap_strict_replication_failures_total",
	"fcap_partitions_under_replicated",
}

type dashboard struct {
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("grafana/fcap-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestEveryDurabilitySignalHasAnAlertAndAPanel(t *testing.T) {
	rules, err := os.ReadFile("prometheus/fcap-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, line := range strings.Split(string(rules), "\n") {
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:"); ok {
			exprs = append(exprs, e)
		}
	}
	var panels []string
	for _, p := range loadDashboard(t).Panels {
		for _, tg := range p.Targets {
			panels = append(panels, tg.Expr)
		}
	}
	uses := func(exprs []string, metric string) bool {
		re := regexp.MustCompile(`\b` + metric + `\b`)
		for _, e := range exprs {
			if re.MatchString(e) {
				return true
			}
		}
		return false
	}
	for _, m := range durabilityMetrics {
		if !uses(exprs, m) {
			t.Errorf("no alert rule watches %s", m)
		}
		if !uses(panels, m) {
			t.Errorf("no dashboard panel shows %s", m)
		}
	}
}

// TestFailOpenAlertCountsCalls: the fail-open alert divides calls that
// failed over by calls. Per-candidate verdicts over calls made a
// 100-candidate check count 100 times (promtool test rules checks the
// arithmetic; this checks the rule names the right series).
func TestFailOpenAlertCountsCalls(t *testing.T) {
	rules, err := os.ReadFile("prometheus/fcap-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(rules), "alert: FcapFailOpenRate")
	if !ok {
		t.Fatal("no FcapFailOpenRate alert")
	}
	_, after, _ = strings.Cut(after, "expr:")
	expr, _, _ := strings.Cut(after, "\n")
	num, den, ok := strings.Cut(expr, "/")
	if !ok || !strings.Contains(num, `fcap_client_calls_total{outcome="failed_over"`) || !strings.Contains(den, "fcap_client_calls_total") || strings.Contains(expr, "policy_verdicts") {
		t.Errorf("FcapFailOpenRate: %s; want calls failed over / calls", expr)
	}
}

// TestDashboardFiltersByClusterAndInstance: the dashboard has cluster and
// instance variables, and every node metric it queries is filtered by
// both (client metrics, scraped from ad servers, and fcapingest's, by
// cluster only).
func TestDashboardFiltersByClusterAndInstance(t *testing.T) {
	d := loadDashboard(t)
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range []string{"datasource", "cluster", "instance"} {
		if !vars[v] {
			t.Errorf("no $%s variable", v)
		}
	}
	sel := regexp.MustCompile(`\b(fcap_[a-z_]+)(\{[^}]*\})?`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range sel.FindAllStringSubmatch(tg.Expr, -1) {
				if !strings.Contains(m[2], `cluster=~"$cluster"`) {
					t.Errorf("panel %q: %s is not filtered by $cluster", p.Title, m[0])
				}
				if !strings.HasPrefix(m[1], "fcap_client_") && !strings.HasPrefix(m[1], "fcap_ingest_") && !strings.Contains(m[2], `instance=~"$instance"`) {
					t.Errorf("panel %q: %s is not filtered by $instance", p.Title, m[0])
				}
			}
		}
	}
}

// TestPromtool checks the rules with Prometheus' own checker and runs
// their unit tests (fcap-alerts_test.yaml). CI installs promtool (Debian
// package prometheus); elsewhere the test is skipped when it is missing.
func TestPromtool(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		if os.Getenv("FCAP_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool not found (apt-get install prometheus)")
		}
		t.Skip("promtool not installed (apt-get install prometheus); .ci/run installs it")
	}
	for _, args := range [][]string{
		{"check", "rules", "prometheus/fcap-alerts.yaml"},
		{"test", "rules", "prometheus/fcap-alerts_test.yaml"},
	} {
		if out, err := exec.Command("promtool", args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestClientQueriesSayWhoseClient: a node's /metrics carries the client
// metrics of its JSON API (role="node-internal") under the names the ad
// servers' clients export; a query that sums fcap_client_* without a
// role matcher mixes the two. Every client selector of the dashboard and
// the alerts picks one side.
func TestClientQueriesSayWhoseClient(t *testing.T) {
	var exprs []string
	for _, p := range loadDashboard(t).Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, p.Title+": "+tg.Expr)
		}
	}
	for _, r := range alertRules(t) {
		exprs = append(exprs, r.name+": "+r.expr)
	}
	sel := regexp.MustCompile(`\bfcap_client_[a-z_]+(\{[^}]*\})?`)
	role := regexp.MustCompile(`\brole(!=|=)"node-internal"`)
	n := 0
	for _, e := range exprs {
		for _, m := range sel.FindAllStringSubmatch(e, -1) {
			n++
			if !role.MatchString(m[1]) {
				t.Errorf("%s: %s mixes the ad servers' clients with the nodes' own (no role=\"node-internal\" or role!=\"node-internal\")", e, m[0])
			}
		}
	}
	if n == 0 {
		t.Fatal("no client metric in the dashboard or the alerts")
	}
}
