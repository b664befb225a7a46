package gossip

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func TestResolveSeed(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		seed string
		want []string
	}{
		{"10.0.0.1:7946", []string{"10.0.0.1:7946"}},
		{"10.0.0.1", []string{"10.0.0.1:4000"}},
		{"node-a/10.0.0.1:7000", []string{"10.0.0.1:7000"}},
		{"[::1]:7946", []string{"[::1]:7946"}},
		{"::1", []string{"[::1]:4000"}},
		{"[::ffff:10.0.0.1]:1", []string{"10.0.0.1:1"}},
		{"10.0.0.1:notaport", nil},
		{"10.0.0.1:70000", nil},
	} {
		var got []string
		for _, a := range resolveSeed(ctx, tc.seed, 4000) {
			got = append(got, a.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("resolveSeed(%q) = %v, want %v", tc.seed, got, tc.want)
		}
	}
}

func TestIsSelf(t *testing.T) {
	ap := netip.MustParseAddrPort
	self := ap("10.0.0.5:7946")
	for _, tc := range []struct {
		a    string
		bind string
		want bool
	}{
		{"10.0.0.5:7946", "0.0.0.0", true},
		{"10.0.0.5:7947", "0.0.0.0", false},
		{"10.0.0.6:7946", "0.0.0.0", false},
		{"127.0.0.1:7946", "0.0.0.0", true},
		{"0.0.0.0:7946", "0.0.0.0", true},
		{"127.0.0.1:7946", "10.0.0.5", false}, // bound elsewhere: another process may own it
		{"127.0.0.1:7946", "", true},
		{"10.0.0.7:7946", "10.0.0.7", true},
	} {
		bind, _ := netip.ParseAddr(tc.bind)
		if got := isSelf(ap(tc.a), self, bind); got != tc.want {
			t.Errorf("isSelf(%s, bind %q) = %v, want %v", tc.a, tc.bind, got, tc.want)
		}
	}
}

func TestNextBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, 5*time.Second
	var d time.Duration
	var got []time.Duration
	for range 8 {
		d = nextBackoff(d, lo, hi)
		got = append(got, d)
	}
	want := []time.Duration{lo, 2 * lo, 4 * lo, 8 * lo, 16 * lo, 32 * lo, hi, hi}
	if !slices.Equal(got, want) {
		t.Fatalf("backoff %v, want %v", got, want)
	}
}
