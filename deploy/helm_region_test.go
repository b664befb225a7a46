package deploy

import "testing"

// TestChartRegions: the region values reach fcapd as FCAP_REGION and
// FCAP_PEER_REGIONS in the form its flags read; none by default; a bad
// region name is refused by the schema.
func TestChartRegions(t *testing.T) {
	c := container(t, render(t).statefulSets[0])
	for _, name := range []string{"FCAP_REGION", "FCAP_PEER_REGIONS"} {
		if v, ok := envOf(c, name); ok {
			t.Errorf("default: %s=%q, want a single region", name, v)
		}
	}
	objs := render(t, "--set", "fcap.region=eu-west",
		"--set-json", `fcap.peerRegions=[{"name":"us","seeds":["a.us:7700","b.us:7700"]},{"name":"ap","seeds":["c.ap:7700"]}]`)
	c = container(t, objs.statefulSets[0])
	if v, _ := envOf(c, "FCAP_REGION"); v != "eu-west" {
		t.Errorf("FCAP_REGION %q, want eu-west", v)
	}
	if v, _ := envOf(c, "FCAP_PEER_REGIONS"); v != "us=a.us:7700,b.us:7700;ap=c.ap:7700" {
		t.Errorf("FCAP_PEER_REGIONS %q", v)
	}
	for _, set := range []string{"fcap.region=EU", `fcap.peerRegions=[{"name":"us","seeds":[]}]`, `fcap.peerRegions=[{"name":"us","seeds":["a;b:7700"]}]`} {
		if _, err := helmTemplate(t, "--set-json", jsonSet(set)); err == nil {
			t.Errorf("--set %s accepted", set)
		}
	}
}

// jsonSet turns key=value into a --set-json argument, quoting a bare
// string value.
func jsonSet(s string) string {
	for i := range s {
		if s[i] == '=' {
			if v := s[i+1:]; v != "" && v[0] != '[' && v[0] != '{' {
				return s[:i+1] + `"` + v + `"`
			}
			break
		}
	}
	return s
}
