package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// parseArgs parses args with flags allowed anywhere among the positional
// arguments, so "fcapctl allow u1 campaign:c1:3:1h --json" reads like
// "fcapctl allow --json u1 campaign:c1:3:1h". A flag takes the next
// argument as its value unless it is a boolean flag or written -f=v;
// "--" ends the flags. Flags are parsed first, in their order.
func parseArgs(fs *flag.FlagSet, args []string) error {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case len(a) > 1 && a[0] == '-':
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		default:
			pos = append(pos, a)
		}
	}
	return fs.Parse(append(append(flags, "--"), pos...))
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// newFlagSet returns the flag set of the command name. Its errors go to
// stderr, and so does its usage: the lines given, then the flags.
func newFlagSet(name string, stderr io.Writer, usage ...string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if len(usage) > 0 {
		fs.Usage = func() {
			for _, l := range usage {
				fmt.Fprintln(stderr, l)
			}
			fs.PrintDefaults()
		}
	}
	return fs
}

// parsePositional parses args as parseArgs does and checks that at least
// min positional arguments remain, and at most max (max < 0: no limit).
// On a mistake it has printed why, or the usage, and returns false.
func parsePositional(fs *flag.FlagSet, args []string, min, max int) bool {
	if err := parseArgs(fs, args); err != nil {
		return false
	}
	if n := fs.NArg(); n < min || max >= 0 && n > max {
		fs.Usage()
		return false
	}
	return true
}
