package conformance_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/test/conformance"
)

// caseFiles returns the checked-in copies of the shared case files plus
// the shared folder's own files when this checkout sits next to it.
func caseFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no case files in testdata: %v", err)
	}
	shared, _ := filepath.Glob("../../../shared/conformance/*.json")
	return append(files, shared...)
}

func TestEngineConformance(t *testing.T) {
	for _, path := range caseFiles(t) {
		t.Run(path, func(t *testing.T) {
			f, err := conformance.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			r := f.Run(conformance.Engine(engine.DefaultLocalConfig()))
			for _, fail := range r.Failures {
				t.Error(fail)
			}
			if r.Passed != len(f.Cases) {
				t.Errorf("%s, want all %d passed", r.Summary(), len(f.Cases))
			}
		})
	}
}

// TestCheckedInCopyMatchesShared fails when the shared case files change
// and the copies in testdata (which CI uses) fall behind.
func TestCheckedInCopyMatchesShared(t *testing.T) {
	shared, _ := filepath.Glob("../../../shared/conformance/*.json")
	if len(shared) == 0 {
		t.Log("shared/conformance is not next to this checkout; the checked-in copies stand alone")
		return
	}
	for _, path := range shared {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("testdata", filepath.Base(path)))
		if err != nil {
			t.Fatalf("%s has no copy in testdata: %v", path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("testdata/%s differs from %s: copy it again", filepath.Base(path), path)
		}
	}
}

// TestRunnerCatchesWrongAnswers makes sure a broken implementation fails:
// a capper that always allows must fail the cases that expect a denial.
func TestRunnerCatchesWrongAnswers(t *testing.T) {
	f, err := conformance.Load("testdata/allow_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	r := f.Run(func(int, int64, int64) (conformance.Capper, error) { return alwaysAllow{}, nil })
	if r.Failed == 0 || r.Failed != len(r.Failures) {
		t.Fatalf("always-allow capper: %s, want failures", r.Summary())
	}
}

type alwaysAllow struct{}

func (alwaysAllow) Allow(string, string, int64) (bool, error) { return true, nil }

func TestParseRejectsMalformedFiles(t *testing.T) {
	for name, body := range map[string]string{
		"not json":        `{`,
		"no cases":        `{"contract":"x","cases":[]}`,
		"length mismatch": `{"cases":[{"name":"a","ops":[["allow",["u","c",0]]],"expected":[]}]}`,
		"unknown field":   `{"cases":[],"extra":1}`,
	} {
		if _, err := conformance.Parse([]byte(body)); err == nil {
			t.Errorf("%s: Parse accepted it", name)
		}
	}
	f, err := conformance.Parse([]byte(`{"cases":[{"name":"a","ops":[["FrequencyCapper",[1,5]],["jump",[]]],"expected":[null,true]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := f.Run(conformance.Engine(engine.DefaultLocalConfig())); r.Failed != 1 {
		t.Errorf("unknown operation: %s, want 1 failed", r.Summary())
	}
}
