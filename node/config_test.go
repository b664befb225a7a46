package node

import (
	"strings"
	"testing"
	"time"
)

// TestConfigRefusesUnsafeTimeouts: settings that would break a promise
// are refused at start, with the reason.
func TestConfigRefusesUnsafeTimeouts(t *testing.T) {
	def := DefaultConfig()
	if err := def.Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	for _, tc := range []struct {
		name, want string
		set        func(*Config)
	}{
		{"a strict wait that outlives the old owner's copy", "DropGrace", func(c *Config) {
			c.StrictTimeout = 2 * time.Minute
			c.Replication.DropGrace = time.Minute
		}},
		{"a quorum confirmed less often than its lease", "Quorum.Lease", func(c *Config) {
			c.Quorum.Interval = 2 * c.Quorum.Lease
		}},
	} {
		c := DefaultConfig()
		tc.set(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}
