package client

import (
	"testing"
	"time"

	"github.com/fcap-io/fcap"
)

// TestSameCap: the table's test for a cap sent once is equality of every
// field, whatever the shortcuts it takes (the same memory, the ids' last
// bytes first).
func TestSameCap(t *testing.T) {
	base := fcap.Cap{Scope: "campaign", ID: "campaign-41", Limit: 5, Window: 24 * time.Hour}
	variants := []func(c *fcap.Cap){
		func(c *fcap.Cap) { c.ID = "campaign-42" },  // differs at the end
		func(c *fcap.Cap) { c.ID = "dampaign-41" },  // differs at the start only
		func(c *fcap.Cap) { c.ID = "campaign-410" }, // longer
		func(c *fcap.Cap) { c.ID = "" },
		func(c *fcap.Cap) { c.Scope = "creative" },
		func(c *fcap.Cap) { c.Limit = 6 },
		func(c *fcap.Cap) { c.Window = time.Millisecond },
		func(c *fcap.Cap) { c.Algorithm = fcap.Fixed },
		func(c *fcap.Cap) { c.Mode = fcap.Strict },
	}
	caps := []fcap.Cap{base, {Scope: "campaign", ID: string([]byte("campaign-41")), Limit: 5, Window: 24 * time.Hour}, {}, {}}
	for _, change := range variants {
		c := base
		change(&c)
		caps = append(caps, c)
	}
	for i := range caps {
		for j := range caps {
			if got, want := sameCap(&caps[i], &caps[j]), caps[i] == caps[j]; got != want {
				t.Errorf("sameCap(%+v, %+v) = %v, want %v", caps[i], caps[j], got, want)
			}
		}
	}
}
