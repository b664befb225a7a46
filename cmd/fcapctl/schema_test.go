package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
)

// schemaFile is the documented JSON of every --json output.
const schemaFile = "../../docs/fcapctl.schema.json"

// jsonSchema is the subset of JSON Schema docs/fcapctl.schema.json is
// written in. validate refuses any other keyword, so the file cannot use
// one this checker would silently ignore.
type jsonSchema map[string]any

var schemaKeywords = map[string]bool{
	"$schema": true, "$id": true, "$defs": true, "$ref": true, "title": true, "description": true,
	"type": true, "enum": true, "pattern": true, "properties": true, "required": true,
	"additionalProperties": true, "items": true,
}

func loadSchema(t *testing.T) jsonSchema {
	t.Helper()
	b, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonSchema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", schemaFile, err)
	}
	return s
}

// validate checks v against s, resolving $ref in root, and returns every
// mismatch with its JSON path.
func validate(root, s jsonSchema, v any, path string) []string {
	for k := range s {
		if !schemaKeywords[k] {
			return []string{fmt.Sprintf("%s: schema keyword %q is not understood by this checker", path, k)}
		}
	}
	if ref, ok := s["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/$defs/")
		def, ok := root["$defs"].(map[string]any)[name].(map[string]any)
		if !found || !ok {
			return []string{fmt.Sprintf("%s: unresolved $ref %q", path, ref)}
		}
		return validate(root, def, v, path)
	}
	var errs []string
	if typ, ok := s["type"]; ok {
		var types []string
		switch tv := typ.(type) {
		case string:
			types = []string{tv}
		case []any:
			for _, x := range tv {
				types = append(types, x.(string))
			}
		}
		if !hasType(v, types) {
			return []string{fmt.Sprintf("%s: %s is not of type %v", path, short(v), types)}
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			found = found || e == v
		}
		if !found {
			errs = append(errs, fmt.Sprintf("%s: %s is not one of %v", path, short(v), enum))
		}
	}
	if pat, ok := s["pattern"].(string); ok {
		if str, _ := v.(string); !regexp.MustCompile(pat).MatchString(str) {
			errs = append(errs, fmt.Sprintf("%s: %q does not match %s", path, str, pat))
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		for _, r := range asStrings(s["required"]) {
			if _, ok := obj[r]; !ok {
				errs = append(errs, fmt.Sprintf("%s: required key %q missing", path, r))
			}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := props[k].(map[string]any); ok {
				errs = append(errs, validate(root, ps, obj[k], path+"."+k)...)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					errs = append(errs, fmt.Sprintf("%s: key %q is not in the schema", path, k))
				}
			case map[string]any:
				errs = append(errs, validate(root, ap, obj[k], path+"."+k)...)
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if items, ok := s["items"].(map[string]any); ok {
			for i, x := range arr {
				errs = append(errs, validate(root, items, x, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return errs
}

func hasType(v any, types []string) bool {
	for _, t := range types {
		switch x := v.(type) {
		case nil:
			if t == "null" {
				return true
			}
		case bool:
			if t == "boolean" {
				return true
			}
		case string:
			if t == "string" {
				return true
			}
		case float64:
			if t == "number" || t == "integer" && x == float64(int64(x)) {
				return true
			}
		case []any:
			if t == "array" {
				return true
			}
		case map[string]any:
			if t == "object" {
				return true
			}
		}
	}
	return false
}

func asStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:60]) + "..."
	}
	return string(b)
}

// TestSchemaIsSnakeCaseWithWordStatesAndHexEpochs checks the rules the
// schema promises hold in the schema itself.
func TestSchemaIsSnakeCaseWithWordStatesAndHexEpochs(t *testing.T) {
	root := loadSchema(t)
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	var walk func(s map[string]any, path string)
	walk = func(s map[string]any, path string) {
		if props, ok := s["properties"].(map[string]any); ok {
			for k, p := range props {
				ps := p.(map[string]any)
				if !snake.MatchString(k) {
					t.Errorf("%s.%s: key is not snake_case", path, k)
				}
				if k == "epoch" && ps["$ref"] != "#/$defs/epoch" {
					t.Errorf("%s.%s: an epoch must be #/$defs/epoch (hex string)", path, k)
				}
				if k == "state" && ps["$ref"] != "#/$defs/state" && ps["type"] != "object" {
					t.Errorf("%s.%s: a state must be a word (#/$defs/state)", path, k)
				}
				walk(ps, path+"."+k)
			}
		}
		for _, k := range []string{"items", "additionalProperties"} {
			if sub, ok := s[k].(map[string]any); ok {
				walk(sub, path+"[]")
			}
		}
	}
	for name, def := range root["$defs"].(map[string]any) {
		walk(def.(map[string]any), name)
	}
}

// TestEveryJSONOutputMatchesTheSchema runs every command that talks to
// a cluster with --json against two nodes in this process and checks
// what it prints against docs/fcapctl.schema.json.
func TestEveryJSONOutputMatchesTheSchema(t *testing.T) {
	root := loadSchema(t)
	nodes := startNodes(t, 2)
	addr := nodes[0].DataAddr()
	check := func(def string, wantCode int, args ...string) {
		t.Helper()
		code, out, errOut := runCLI(args...)
		if code != wantCode {
			t.Errorf("fcapctl %s: exit %d, want %d; stderr:\n%s", strings.Join(args, " "), code, wantCode, errOut)
			return
		}
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("fcapctl %s printed no JSON (%v):\n%s", strings.Join(args, " "), err, out)
			return
		}
		s, ok := root["$defs"].(map[string]any)[def].(map[string]any)
		if !ok {
			t.Fatalf("schema has no $defs/%s", def)
		}
		for _, e := range validate(root, s, v, args[0]) {
			t.Error(e)
		}
	}
	const capA = "campaign:json-a:1:1h"
	check("status", exitOK, "status", "--addr", addr, "--json")
	check("ring", exitOK, "ring", "--addr", addr, "--json", "--partitions")
	check("verdicts", exitOK, "check", "--addr", addr, "--json", "u1", capA, capA+"+creative:x:2:1d:strict")
	check("verdicts", exitOK, "allow", "u1", capA, "--addr", addr, "--json")
	check("verdicts", exitDenied, "allow", "u1", capA, "--addr", addr, "--json")
	check("reserve", exitOK, "reserve", "--addr", addr, "--json", "u1", "campaign:json-b:3:2w")
	check("reserve", exitDenied, "reserve", "--addr", addr, "--json", "u1", capA)
	check("record", exitOK, "record", "--addr", addr, "--json", "u1", "imp-1", "campaign:json-b:3:2w")
	check("keys", exitOK, "keys", "--addr", addr, "--json", "u1", capA)
	check("void", exitOK, "void", "--addr", addr, "--json", "--time", "1", "u1", "never-recorded", "campaign:json-b:3:2w")
	check("erase", exitOK, "erase", "--addr", addr, "--json", "u1")
	check("identity", exitOK, "link", "--addr", addr, "--json", "d1", "u1")
	check("identity", exitOK, "resolve", "--addr", addr, "--json", "d1")
	check("identity", exitOK, "unlink", "--addr", addr, "--json", "d1")
	// Gossip is not encrypted here: every member answers with an error row.
	check("gossip_key", exitError, "gossip-key", "--addr", addr, "--json", "list")
	check("version", exitOK, "version", "--json")
	files, _ := filepath.Glob("../../test/conformance/testdata/*.json")
	check("conformance", exitOK, append([]string{"conformance", "--json"}, files[0])...)
	check("verify_live", exitOK, "verify", "--addr", addr, "--json", "--settle", "50ms", "--no-log")
	check("verify_offline", exitOK, "verify", "--json", t.TempDir())
	check("drain", exitOK, "drain", "--addr", addr, "--json", nodes[1].Name())
	// Drained already: the same object, saying so.
	check("drain", exitOK, "drain", "--addr", addr, "--json", nodes[1].Name())
	if _, out, _ := runCLI("drain", "--addr", addr, "--json", nodes[1].Name()); !strings.Contains(out, `"already_gone":true`) {
		t.Errorf("a second drain --json printed %q; want already_gone true", out)
	}
}

// startNodes starts n nodes in this process, the later ones joining the
// first, and waits until each sees them all and is ready.
func startNodes(t *testing.T, n int) []*node.Node {
	t.Helper()
	nodes := nodetest.Cluster(t, "ctl", n, func(cfg *node.Config) { cfg.HTTPAPI = false })
	nodetest.Settle(t, nodes, 60*time.Second)
	// fcapctl status exits 4 while a node serves claimed partitions: a
	// young cluster's lapse claims them until the copies it asks for under
	// its quorum arrive (a pull round or two).
	testwait.Eventually(t, 60*time.Second, func() bool {
		for _, nd := range nodes {
			if nd.Claimed() != 0 {
				return false
			}
		}
		return true
	}, "partitions stayed claimed after the cluster settled")
	return nodes
}

// TestKeysNamesCountersWithoutCaps: fcapctl keys names each counter the
// node created (scope:id) without being given the caps (issue 34: it
// showed hashes); caps given on the command line still win.
func TestKeysNamesCountersWithoutCaps(t *testing.T) {
	nodes := startNodes(t, 1)
	addr := nodes[0].DataAddr()
	if code, _, errOut := runCLI("record", "--addr", addr, "u9", "imp-1", "campaign:named-c1:3:1h", "creative:named-k1:2:1d"); code != exitOK {
		t.Fatalf("record: exit %d: %s", code, errOut)
	}
	code, out, errOut := runCLI("keys", "--addr", addr, "--json", "u9")
	if code != exitOK {
		t.Fatalf("keys: exit %d: %s", code, errOut)
	}
	var got struct {
		Owners []struct {
			State struct {
				Counters []struct {
					Hash, Label string
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Owners) == 0 {
		t.Fatalf("keys printed %q (%v)", out, err)
	}
	labels := map[string]bool{}
	for _, c := range got.Owners[0].State.Counters {
		labels[c.Label] = true
	}
	for _, want := range []string{"campaign:named-c1", "creative:named-k1"} {
		if !labels[want] {
			t.Errorf("keys without caps: no counter named %s in %s", want, out)
		}
	}
	code, out, _ = runCLI("keys", "--addr", addr, "u9")
	if code != exitOK || !strings.Contains(out, "campaign:named-c1") {
		t.Errorf("keys (table) without caps names no counter:\n%s", out)
	}
}
