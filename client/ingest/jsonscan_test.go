package ingest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// referenceDecode reads a value with encoding/json: what scanImpressions
// must agree with.
func referenceDecode(v []byte) ([]jsonImpression, error) {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) > 0 && v[0] == '[' {
		var imps []jsonImpression
		err := json.Unmarshal(v, &imps)
		return imps, err
	}
	imps := make([]jsonImpression, 1)
	return imps, json.Unmarshal(v, &imps[0])
}

var schemaKeys = []string{"id", "viewer", "device", "time", "caps", "scope", "limit", "window", "algorithm", "mode"}

// caseFolded reports whether v names a schema key in another case, which
// encoding/json matches and the scanner does not (by design).
func caseFolded(v []byte) bool {
	lower := strings.ToLower(string(v))
	for _, k := range schemaKeys {
		if strings.Count(lower, `"`+k+`"`) != strings.Count(string(v), `"`+k+`"`) {
			return true
		}
	}
	return !isASCII(v)
}

func isASCII(v []byte) bool {
	for _, c := range v {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

var scanSeeds = []string{
	`{"id":"i","viewer":"v","time":5,"caps":[{"scope":"creative","id":"c","limit":3,"window":"1h","mode":"strict","algorithm":"fixed"}]}`,
	`[{"id":"i","device":"d","time":"2023-11-14T22:13:20Z","caps":[{"scope":"s","id":"c","limit":1,"window":10}]},{"id":"j","viewer":"v","caps":[]}]`,
	` {"id" : "a\"b\\u00e9" , "viewer":"v\n", "extra":{"x":[1,{"y":"]}"}],"z":null}, "caps":null, "time":null}`,
	`{"id":"i","viewer":"v","caps":[{"scope":"s","id":"c","limit":"3","window":1}]}`,
	`{"id":"i","viewer":"v","caps":[{"scope":"s","id":"c","limit":1.5,"window":1}]}`,
	`{"id":"i","viewer":"v","time":true}`,
	`{"id":7}`,
	`{"caps":{"scope":"s"}}`,
	`{"caps":[1,2]}`,
	`{"id":"x","id":"y"}`,
	`[]`, `[null]`, `null`, `"id"`, `7`, `{`, `{"id":"i"`, `[{"id":"i"},]`, ``, `{"time":-5}`,
	`{"time":99999999999999999999}`, `{"caps":[{"window":"-1h"}]}`, `{"caps":[{"window":"soon"}]}`,
	`{"viewer":"\ud800"}`, `{"viewer":"\xff"}`, `{"ID":"upper"}`,
}

// TestScanAgreesWithEncodingJSON: the scanner reads what encoding/json
// reads, and refuses what it refuses (keys in another case aside).
func TestScanAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range scanSeeds {
		checkScan(t, []byte(s))
	}
}

func FuzzScan(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) { checkScan(t, v) })
}

func checkScan(t *testing.T, v []byte) {
	t.Helper()
	got, err := scanImpressions(v, nil)
	if caseFolded(v) {
		return
	}
	want, wantErr := referenceDecode(v)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: scanner error %v, encoding/json error %v", v, err, wantErr)
	}
	if err != nil {
		return
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	for _, imps := range [][]jsonImpression{got, want} {
		for i := range imps {
			if len(imps[i].Caps) == 0 {
				imps[i].Caps = nil // an empty array and null mean the same
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nscanner       %+v\nencoding/json %+v", v, got, want)
	}
}
