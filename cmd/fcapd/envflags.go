package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"
)

// envFlags defines fcapd's flags, each with an environment variable: the
// variable, when set, replaces the flag's built-in default, and the flag
// given on the command line beats both. A variable that does not parse
// leaves the default and is kept in err (the first one only), which
// parseFlags returns before it parses the command line.
type envFlags struct {
	fs     *flag.FlagSet
	getenv func(string) string
	err    error
}

func (f *envFlags) str(p *string, name, env, fallback, usage string) {
	if v := f.getenv(env); v != "" {
		fallback = v
	}
	f.fs.StringVar(p, name, fallback, usage+" (env "+env+")")
}

func (f *envFlags) int(p *int, name, env string, fallback int, usage string) {
	if s := f.getenv(env); s != "" {
		if n, err := strconv.Atoi(s); err != nil {
			f.fail(env, s, err)
		} else {
			fallback = n
		}
	}
	f.fs.IntVar(p, name, fallback, usage+" (env "+env+")")
}

func (f *envFlags) duration(p *time.Duration, name, env string, fallback time.Duration, usage string) {
	if s := f.getenv(env); s != "" {
		if d, err := time.ParseDuration(s); err != nil {
			f.fail(env, s, err)
		} else {
			fallback = d
		}
	}
	f.fs.DurationVar(p, name, fallback, usage+" (env "+env+")")
}

func (f *envFlags) fail(env, s string, err error) {
	if f.err == nil {
		f.err = fmt.Errorf("%s=%q: %w", env, s, err)
	}
}
