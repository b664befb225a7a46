// Package conformance runs the shared allow-contract case files
// (shared/conformance/*.json) against any implementation of allow: the
// in-process engine, or a running cluster through the client.
//
// A case file holds a contract sentence and cases. Each case is a list of
// operations and the expected return of each: the first operation,
// ["FrequencyCapper", [limit, window]], constructs a fresh capper
// (expected null); each later one, ["allow", [viewer, campaign, now]],
// must return the expected boolean.
package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// File is a parsed case file.
type File struct {
	Contract string `json:"contract"`
	Cases    []Case `json:"cases"`
}

// Case is one named sequence of operations.
type Case struct {
	Name     string              `json:"name"`
	Ops      [][]json.RawMessage `json:"ops"`
	Expected []json.RawMessage   `json:"expected"`
}

// Capper is what a case drives: one capper with one limit and window,
// answering allow for any viewer and campaign.
type Capper interface {
	Allow(viewer, campaign string, now int64) (bool, error)
}

// Factory builds a fresh capper for case number n, with state shared
// with no other case.
type Factory func(n int, limit, window int64) (Capper, error)

// Failure is one case that did not pass.
type Failure struct {
	Case   string
	Op     int // index into the case's ops; -1 for the case as a whole
	Detail string
}

func (f Failure) String() string {
	if f.Op < 0 {
		return fmt.Sprintf("FAIL %q: %s", f.Case, f.Detail)
	}
	return fmt.Sprintf("FAIL %q op %d: %s", f.Case, f.Op, f.Detail)
}

// Result sums up a run.
type Result struct {
	Passed, Failed int
	Failures       []Failure
}

// Summary is the run's last line: "N passed, M failed".
func (r Result) Summary() string {
	return fmt.Sprintf("%d passed, %d failed", r.Passed, r.Failed)
}

// Load reads and parses a case file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Parse parses a case file and checks its shape.
func Parse(b []byte) (*File, error) {
	var f File
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parse case file: %w", err)
	}
	if len(f.Cases) == 0 {
		return nil, fmt.Errorf("case file holds no cases")
	}
	for i, c := range f.Cases {
		if len(c.Ops) != len(c.Expected) {
			return nil, fmt.Errorf("case %d %q: %d ops but %d expected results", i, c.Name, len(c.Ops), len(c.Expected))
		}
	}
	return &f, nil
}

// Run runs every case with a fresh capper from newCapper.
func (f *File) Run(newCapper Factory) Result {
	var r Result
	for n, c := range f.Cases {
		if fail, ok := runCase(n, c, newCapper); !ok {
			r.Failed++
			r.Failures = append(r.Failures, fail)
		} else {
			r.Passed++
		}
	}
	return r
}

func runCase(n int, c Case, newCapper Factory) (Failure, bool) {
	fail := func(op int, format string, args ...any) (Failure, bool) {
		return Failure{Case: c.Name, Op: op, Detail: fmt.Sprintf(format, args...)}, false
	}
	var capper Capper
	for i, raw := range c.Ops {
		if len(raw) != 2 {
			return fail(i, "operation must be [name, [args]], got %d elements", len(raw))
		}
		var name string
		if err := json.Unmarshal(raw[0], &name); err != nil {
			return fail(i, "operation name: %v", err)
		}
		switch name {
		case "FrequencyCapper":
			var args []int64
			if err := json.Unmarshal(raw[1], &args); err != nil || len(args) != 2 {
				return fail(i, "FrequencyCapper wants [limit, window], got %s", raw[1])
			}
			if string(c.Expected[i]) != "null" {
				return fail(i, "constructor must expect null, got %s", c.Expected[i])
			}
			var err error
			if capper, err = newCapper(n, args[0], args[1]); err != nil {
				return fail(i, "FrequencyCapper(%d, %d): %v", args[0], args[1], err)
			}
		case "allow":
			if capper == nil {
				return fail(i, "allow before FrequencyCapper")
			}
			var args []json.RawMessage
			var viewer, campaign string
			var now int64
			if err := json.Unmarshal(raw[1], &args); err != nil || len(args) != 3 ||
				json.Unmarshal(args[0], &viewer) != nil || json.Unmarshal(args[1], &campaign) != nil ||
				json.Unmarshal(args[2], &now) != nil {
				return fail(i, "allow wants [viewer, campaign, now], got %s", raw[1])
			}
			var want bool
			if err := json.Unmarshal(c.Expected[i], &want); err != nil {
				return fail(i, "expected result of allow must be a boolean, got %s", c.Expected[i])
			}
			got, err := capper.Allow(viewer, campaign, now)
			if err != nil {
				return fail(i, "allow(%q, %q, %d): %v", viewer, campaign, now, err)
			}
			if got != want {
				return fail(i, "allow(%q, %q, %d) = %v, want %v", viewer, campaign, now, got, want)
			}
		default:
			return fail(i, "unknown operation %q", name)
		}
	}
	return Failure{}, true
}
