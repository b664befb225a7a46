package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestConformanceSharedCases(t *testing.T) {
	files, _ := filepath.Glob("../../test/conformance/testdata/*.json")
	if len(files) == 0 {
		t.Fatal("no case files")
	}
	code, out, errOut := runCLI(append([]string{"conformance"}, files...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || !strings.HasSuffix(lines[len(lines)-1], " passed, 0 failed") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

func TestConformanceReportsFailures(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	body := `{"contract":"x","cases":[
	  {"name":"right","ops":[["FrequencyCapper",[1,10]],["allow",["u","c",0]]],"expected":[null,true]},
	  {"name":"wrong","ops":[["FrequencyCapper",[1,10]],["allow",["u","c",0]],["allow",["u","c",1]]],"expected":[null,true,true]}]}`
	if err := os.WriteFile(bad, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI("conformance", bad)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(out, `"wrong" op 2`) || !strings.HasSuffix(strings.TrimSpace(out), "1 passed, 1 failed") {
		t.Errorf("stdout:\n%s", out)
	}
	code, out, _ = runCLI("conformance", "--json", bad)
	var res struct {
		Passed, Failed int
		Failures       []struct {
			File, Case string
			Op         int
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 {
		t.Fatalf("--json: exit %d, %q: %v", code, out, err)
	}
	if res.Passed != 1 || res.Failed != 1 || len(res.Failures) != 1 || res.Failures[0].Case != "wrong" || res.Failures[0].Op != 2 || res.Failures[0].File != bad {
		t.Errorf("--json: %+v", res)
	}
}

func TestUsageErrors(t *testing.T) {
	if code, _, _ := runCLI("conformance"); code != 2 {
		t.Errorf("no files: exit %d, want 2", code)
	}
	if code, _, errOut := runCLI("conformance", "/nonexistent.json"); code != 2 || !strings.Contains(errOut, "nonexistent") {
		t.Errorf("missing file: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI("frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: exit %d, stderr %q", code, errOut)
	}
}
