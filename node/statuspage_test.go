package node_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestStatusPage renders / on one node of two and checks it shows both
// members with their figures, draws every partition, and needs nothing
// from outside the node.
func TestStatusPage(t *testing.T) {
	nodes := startCluster(t, 2)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	get := func() string {
		resp, err := http.Get("http://" + nodes[0].HTTPAddr() + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return string(b)
	}
	page := get()
	for _, nd := range nodes {
		if !strings.Contains(page, nd.Name()) {
			t.Errorf("the page does not name member %s", nd.Name())
		}
	}
	if got, want := strings.Count(page, "<path "), nodes[0].Ring().Partitions(); got != want {
		t.Errorf("the ring picture has %d arcs, want one per partition (%d)", got, want)
	}
	if strings.Contains(page, "unreachable") {
		t.Errorf("a live member is shown unreachable")
	}
	// Both members' partitions, as their own status reports them.
	re := regexp.MustCompile(`<td>(\d+)</td><td>(\d+)</td>`)
	primaries := 0
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		var p int
		for _, c := range m[1] {
			p = p*10 + int(c-'0')
		}
		primaries += p
	}
	if primaries != nodes[0].Ring().Partitions() {
		t.Errorf("members' primaries add up to %d, want %d", primaries, nodes[0].Ring().Partitions())
	}
	// Self-contained: no scripts, no external assets.
	if strings.Contains(page, "<script") || regexp.MustCompile(`(src|href)="https?://`).MatchString(page) {
		t.Errorf("the page loads something from elsewhere")
	}
	// A second load has request rates (the first has only totals).
	if page = get(); !regexp.MustCompile(`<td>\d+/s</td>`).MatchString(page) {
		t.Errorf("the second load shows no request rate")
	}
	resp, err := http.Get("http://" + nodes[0].HTTPAddr() + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: %d, want 404", resp.StatusCode)
	}
}
