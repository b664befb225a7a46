package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerignore is a .dockerignore: patterns relative to the build
// context, "**" for any number of directories, "*" and "?" within one,
// "!" re-including; the last pattern that matches a path or one of its
// parent directories decides.
type dockerignore []struct {
	re      *regexp.Regexp
	include bool
}

func parseDockerignore(text string) dockerignore {
	var d dockerignore
	for _, line := range strings.Split(text, "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		include := strings.HasPrefix(p, "!")
		p = strings.Trim(filepath.Clean(strings.TrimPrefix(p, "!")), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(p); i++ {
			switch {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case p[i] == '*':
				re.WriteString("[^/]*")
			case p[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		}
		re.WriteString("$")
		d = append(d, struct {
			re      *regexp.Regexp
			include bool
		}{regexp.MustCompile(re.String()), include})
	}
	return d
}

// excluded reports whether path (relative to the context, with /) is
// left out of the build context.
func (d dockerignore) excluded(path string) bool {
	out := false
	for _, p := range d {
		for dir := path; dir != "." && dir != ""; dir = filepath.Dir(dir) {
			if p.re.MatchString(dir) {
				out = !p.include
				break
			}
		}
	}
	return out
}

func TestDockerignoreParsing(t *testing.T) {
	d := parseDockerignore("# c\n.git\n**/testdata\n**/*.png\ndocs\n!docs/keep.md\n")
	for path, want := range map[string]bool{
		".git/HEAD":              true,
		"a/.git":                 false,
		"proto/testdata/x.bin":   true,
		"testdata/x":             true,
		"docs/bench/r.png":       true,
		"a/b/c.png":              true,
		"docs/keep.md":           false,
		"node/node.go":           false,
		"node/testdatax/node.go": false,
	} {
		if got := d.excluded(path); got != want {
			t.Errorf("excluded(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestDockerignoreKeepsTheBuildInputs: the repository had no
// .dockerignore, so `docker build .` sent .git, the benchmark reports
// and every test fixture to the daemon. Whatever it leaves out, every
// file the image's go build compiles (and the go.mod and go.sum of each
// module it uses) must stay in.
func TestDockerignoreKeepsTheBuildInputs(t *testing.T) {
	d := parseDockerignore(readFile(t, "../.dockerignore"))
	for _, p := range []string{".git/HEAD", "docs/bench/BENCHMARKS.md", "proto/testdata/x", "deploy/helm/fcap/Chart.yaml"} {
		if !d.excluded(p) {
			t.Errorf(".dockerignore sends %s to the build", p)
		}
	}

	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The Dockerfile builds in cmd with GOWORK=off.
	cmd := exec.Command("go", "list", "-deps",
		"-f", `{{if .Module}}{{.Module.Dir}}{{"\n"}}{{range .GoFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		"./fcapd", "./fcapctl")
	cmd.Dir = filepath.Join(root, "cmd")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	inputs := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		rel, err := filepath.Rel(root, line)
		if line == "" || err != nil || strings.HasPrefix(rel, "..") {
			continue // the standard library, the module cache
		}
		if fi, err := os.Stat(line); err == nil && fi.IsDir() { // a module's root
			inputs[filepath.ToSlash(filepath.Join(rel, "go.mod"))] = true
			inputs[filepath.ToSlash(filepath.Join(rel, "go.sum"))] = true
			continue
		}
		inputs[filepath.ToSlash(rel)] = true
	}
	if len(inputs) < 50 || !inputs["cmd/fcapd/main.go"] || !inputs["node/go.mod"] {
		t.Fatalf("go list found %d build inputs, not fcapd's", len(inputs))
	}
	for f := range inputs {
		if d.excluded(f) {
			t.Errorf(".dockerignore leaves out %s, which the image's build needs", f)
		}
	}
}

// TestImageStampsTheVersion: the Dockerfile built without -X, so every
// image reported "devel". It builds fcapd with the Dockerfile's own
// -ldflags and checks `fcapd --version` prints the stamped version.
func TestImageStampsTheVersion(t *testing.T) {
	df := readFile(t, "Dockerfile")
	if n := strings.Count(df, "\nARG VERSION"); n < 2 {
		t.Errorf("ARG VERSION in %d stages, want the build's and the image's (its label)", n)
	}
	m := regexp.MustCompile(`-X ([\w./-]+)=\$\{?VERSION\}?`).FindStringSubmatch(df)
	if m == nil {
		t.Fatal("the Dockerfile passes no -X ...=${VERSION} to go build")
	}
	if strings.Count(df, m[0]) != 1 || strings.Count(df, `-ldflags="$ldflags"`) != 2 {
		t.Error("fcapd and fcapctl are not both built with the stamped ldflags")
	}
	const want = "v0.0.0-stamp-test"
	bin := filepath.Join(t.TempDir(), "fcapd")
	build := exec.Command("go", "build", "-ldflags", "-X "+m[1]+"="+want, "-o", bin, "./fcapd")
	build.Dir = "../cmd"
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("fcapd --version: %v", err)
	}
	if !strings.HasPrefix(string(out), "fcapd "+want+" (") {
		t.Errorf("fcapd --version printed %q, want the version -X %s stamped (%s)", out, m[1], want)
	}
}
