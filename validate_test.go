package fcap_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
)

func TestValidate(t *testing.T) {
	good := fcap.Cap{Scope: "campaign", ID: "c", Limit: 3, Window: time.Second}
	with := func(f func(*fcap.Cap)) []fcap.Cap {
		c := good
		f(&c)
		return []fcap.Cap{good, c}
	}
	long := strings.Repeat("x", fcap.DefaultMaxIDLength+1)
	for _, tc := range []struct {
		name string
		lim  fcap.Limits
		imp  fcap.Impression
		is   error
		says string
	}{
		{"valid", fcap.Limits{}, fcap.Impression{ID: "i", Caps: []fcap.Cap{good}}, nil, ""},
		{"time 0 is valid (now)", fcap.Limits{}, fcap.Impression{ID: "i", Time: 0, Caps: []fcap.Cap{good}}, nil, ""},
		{"empty id", fcap.Limits{}, fcap.Impression{Caps: []fcap.Cap{good}}, fcap.ErrEmptyImpressionID, ""},
		{"long id", fcap.Limits{}, fcap.Impression{ID: long, Caps: []fcap.Cap{good}}, fcap.ErrIDTooLong, "impression id is 257 bytes, at most 256"},
		{"id within a larger limit", fcap.Limits{MaxIDLength: 1000}, fcap.Impression{ID: long, Caps: []fcap.Cap{good}}, nil, ""},
		{"negative time", fcap.Limits{}, fcap.Impression{ID: "i", Time: -1, Caps: []fcap.Cap{good}}, fcap.ErrBadTime, "got -1"},
		{"no caps", fcap.Limits{}, fcap.Impression{ID: "i"}, fcap.ErrNoCaps, ""},
		{"too many caps", fcap.Limits{MaxCaps: 1}, fcap.Impression{ID: "i", Caps: []fcap.Cap{good, good}}, fcap.ErrTooManyCaps, "2 caps, at most 1"},
		{"unknown scope", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Scope = "site" })},
			fcap.ErrUnknownScope, `cap 1: invalid request: unknown cap scope "site" (accepted: creative, campaign, advertiser)`},
		{"configured scope", fcap.Limits{Scopes: []string{"site"}}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Scope = "site" })},
			fcap.ErrUnknownScope, `cap 0: invalid request: unknown cap scope "campaign" (accepted: site)`},
		{"any scope", fcap.Limits{AnyScope: true}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Scope = "site" })}, nil, ""},
		{"empty scope", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Scope = "" })}, fcap.ErrEmptyScope, "one of creative, campaign, advertiser"},
		{"empty cap id", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.ID = "" })}, fcap.ErrEmptyID, "cap 1"},
		{"long cap id", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.ID = long })}, fcap.ErrIDTooLong, "id is 257 bytes"},
		{"limit 0", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Limit = 0 })}, fcap.ErrBadLimit, "between 1 and 65535, got 0"},
		{"limit too large", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Limit = fcap.MaxLimit + 1 })}, fcap.ErrBadLimit, "got 65536"},
		{"window 0", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Window = 0 })}, fcap.ErrBadWindow, "got 0s"},
		{"negative window", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Window = -time.Hour })}, fcap.ErrBadWindow, "got -1h0m0s"},
		{"window of 1ms", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Window = time.Millisecond })}, nil, ""},
		{"window under 1ms", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Window = 999 * time.Microsecond })}, fcap.ErrBadWindow, "from 1ms to 9600h0m0s (400 days), got 999µs"},
		{"window of 400 days", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Window = fcap.MaxWindow })}, nil, ""},
		{"window past 400 days", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Window = fcap.MaxWindow + time.Millisecond })}, fcap.ErrBadWindow, "(400 days), got 9600h0m0.001s"},
		{"window of 10 years", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Window = 10 * 365 * 24 * time.Hour })}, fcap.ErrBadWindow, "got 87600h0m0s"},
		{"window of a fraction of a millisecond", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Window = time.Hour + 500*time.Microsecond })}, fcap.ErrBadWindow, "1h0m0.0005s is not a whole number of milliseconds"},
		{"window written in milliseconds", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Window = 3_600_000 })}, fcap.ErrBadWindow, "3.6ms is not a whole number of milliseconds (Window is a time.Duration"},
		{"unknown algorithm", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Algorithm = fcap.NumAlgorithms })}, fcap.ErrUnknownAlgorithm, "sliding, buckets or fixed"},
		{"unknown mode", fcap.Limits{}, fcap.Impression{ID: "i", Caps: with(func(c *fcap.Cap) { c.Mode = fcap.NumModes })}, fcap.ErrUnknownMode, "soft or strict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.imp.Validate(tc.lim)
			if tc.is == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.is) || !errors.Is(err, fcap.ErrInvalid) {
				t.Fatalf("Validate = %v, want %v (and ErrInvalid)", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Validate = %q, want it to say %q", err, tc.says)
			}
		})
	}
}

func TestValidateViewerAndCandidates(t *testing.T) {
	if err := fcap.ValidateViewer("", fcap.Limits{}); !errors.Is(err, fcap.ErrEmptyViewer) {
		t.Errorf("empty viewer: %v", err)
	}
	if err := fcap.ValidateViewer(strings.Repeat("v", 300), fcap.Limits{}); !errors.Is(err, fcap.ErrIDTooLong) {
		t.Errorf("300-byte viewer: %v", err)
	}
	good := fcap.Candidate{Caps: []fcap.Cap{{Scope: "creative", ID: "c", Limit: 1, Window: time.Millisecond}}}
	if err := fcap.ValidateCandidates([]fcap.Candidate{good, good}, fcap.Limits{MaxCandidates: 1}); !errors.Is(err, fcap.ErrTooManyCandidates) {
		t.Errorf("2 candidates, at most 1: %v", err)
	}
	if err := fcap.ValidateCandidates([]fcap.Candidate{good, {}}, fcap.Limits{}); !errors.Is(err, fcap.ErrNoCaps) || !strings.Contains(err.Error(), "candidate 1") {
		t.Errorf("a candidate without caps: %v", err)
	}
}
