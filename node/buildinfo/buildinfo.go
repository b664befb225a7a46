// Package buildinfo says which build of fcap is running: the version,
// the source revision and the Go release, for "fcapctl version",
// "fcapd --version" and the fcap_build_info metric.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// version is set at link time by release builds:
//
//	go build -ldflags "-X github.com/fcap-io/fcap/node/buildinfo.version=v1.2.0" ./cmd/...
var version string

// Info is one build's identity.
type Info struct {
	// Version is the release (v1.2.0), the module version go install
	// recorded, or "devel" for a build from a checkout.
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from, with
	// "-dirty" when the tree had changes; "unknown" without VCS data.
	Revision string `json:"revision"`
	// GoVersion is the Go release that compiled it.
	GoVersion string `json:"go_version"`
}

// Get returns this binary's Info.
func Get() Info {
	info := Info{Version: version, Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if info.Version == "" {
		info.Version = "devel"
		if ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
	}
	if !ok {
		return info
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && info.Revision != "unknown" {
		info.Revision += "-dirty"
	}
	return info
}

// String reads "fcapd v1.2.0 (revision 0123abcd, go1.26.0)".
func (i Info) String() string {
	rev, dirty := strings.CutSuffix(i.Revision, "-dirty")
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, rev, i.GoVersion)
}

// Register adds the fcap_build_info gauge to reg: always 1, the build in
// its labels, so a dashboard can show which nodes run which build and an
// alert can catch a rollout left half done.
func Register(reg prometheus.Registerer) error {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "fcap_build_info",
		Help:        "The build of fcap this process runs, in its labels; always 1.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion},
	})
	g.Set(1)
	return reg.Register(g)
}
