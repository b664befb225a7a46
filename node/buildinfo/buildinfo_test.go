package buildinfo

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterExportsBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil || len(fams) != 1 || fams[0].GetName() != "fcap_build_info" {
		t.Fatalf("gathered %v, %v", fams, err)
	}
	m := fams[0].GetMetric()[0]
	if m.GetGauge().GetValue() != 1 {
		t.Errorf("value %v, want 1", m.GetGauge().GetValue())
	}
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] == "" || labels["revision"] == "" || !strings.HasPrefix(labels["goversion"], "go") {
		t.Errorf("labels %v", labels)
	}
}

func TestStringShortensTheRevision(t *testing.T) {
	i := Info{Version: "v1.2.0", Revision: "0123456789abcdef0123456789abcdef01234567-dirty", GoVersion: "go1.26.0"}
	if got, want := i.String(), "v1.2.0 (revision 0123456789ab-dirty, go1.26.0)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	i.Revision = "abc"
	if got := i.String(); !strings.Contains(got, "revision abc,") {
		t.Errorf("%q", got)
	}
}
