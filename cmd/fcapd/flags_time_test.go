package main

import (
	"io"
	"testing"
	"time"
)

func TestMaxClockSkewFlag(t *testing.T) {
	for name, c := range map[string]struct {
		args []string
		env  map[string]string
		want time.Duration
	}{
		"default": {want: time.Minute},
		"env":     {env: map[string]string{"FCAP_MAX_CLOCK_SKEW": "5s"}, want: 5 * time.Second},
		"flag":    {args: []string{"--max-clock-skew", "250ms"}, env: map[string]string{"FCAP_MAX_CLOCK_SKEW": "5s"}, want: 250 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			_, cfg := configFor(t, c.args, c.env)
			if cfg.MaxClockSkew != c.want {
				t.Errorf("MaxClockSkew = %v, want %v", cfg.MaxClockSkew, c.want)
			}
		})
	}
	o, err := parseFlags([]string{"--max-clock-skew", "-1s"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := o.config(nil)
	if cfg.Validate() == nil {
		t.Error("a negative --max-clock-skew passed validation")
	}
}
