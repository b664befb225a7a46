package main

import (
	"slices"
	"testing"
)

// TestCampaignsAreDistinct: every draw is n distinct campaigns in range,
// including n equal to all of them, and draws differ from one another.
func TestCampaignsAreDistinct(t *testing.T) {
	for _, tc := range []struct{ campaigns, n int }{{5000, 100}, {130, 130}, {64, 63}, {1, 1}} {
		w := &workload{Kind: "check", Viewers: 10, Campaigns: tc.campaigns, Candidates: tc.n, Zipf: 1.1, ZipfV: 1000}
		g := newGen(w, newIDs(w), 1, 0)
		var first []int
		for draw := range 50 {
			got := g.campaigns(tc.n)
			if len(got) != tc.n {
				t.Fatalf("%d of %d: draw %d has %d campaigns", tc.n, tc.campaigns, draw, len(got))
			}
			seen := make(map[int]bool)
			for _, c := range got {
				if c < 0 || c >= tc.campaigns || seen[c] {
					t.Fatalf("%d of %d: draw %d has %d twice or out of range: %v", tc.n, tc.campaigns, draw, c, got)
				}
				seen[c] = true
			}
			if draw == 0 {
				first = append(first, got...)
			} else if tc.n < tc.campaigns/2 && slices.Equal(first, got) {
				t.Fatalf("%d of %d: draw %d repeats the first: %v", tc.n, tc.campaigns, draw, got)
			}
		}
	}
}
