// Command fcapctl is the operator's command line for fcap.
//
//	fcapctl conformance FILE.json...   run allow-contract case files
//
// Run "fcapctl help" for every command.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one fcapctl subcommand. It returns the process exit status.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{
	"conformance": {"run allow-contract case files against the engine or a cluster", runConformance},
	"status":      {"show every member: state, partitions, replication, memory", runStatus},
	"drain":       {"hand a node's partitions over and make it leave the cluster", runDrain},
	"forget":      {"drop failed members (vanished without a drain) from the member set", runForget},
	"region":      {"retire a peer region lost for good (its shares of strict caps move to the others)", runRegion},
	"ring":        {"partition ownership and load per node", runRing},
	"keys":        {"every counter of one viewer, on each of its owners", runKeys},
	"erase":       {"forget a viewer everywhere (privacy requests), for good", runErase},
	"check":       {"read-only verdicts for a viewer's candidate ads", runCheck},
	"allow":       {"check and record one impression atomically", runAllow},
	"record":      {"record a played impression and wait for its acknowledgement", runRecord},
	"void":        {"take a recorded impression back everywhere (invalid traffic)", runVoid},
	"reserve":     {"hold one impression's worth of a candidate's caps", runReserve},
	"gossip-key":  {"install, use, remove or list gossip encryption keys on every member", runGossipKey},
	"link": {"link a device to a viewer (its impressions are merged into the viewer's)", runIdentity("link",
		"usage: fcapctl link [flags] DEVICE VIEWER\n\nFrom now on DEVICE counts as VIEWER; the impressions DEVICE had are merged into VIEWER's counters, once.", 2)},
	"unlink": {"make a device its own viewer again", runIdentity("unlink",
		"usage: fcapctl unlink [flags] DEVICE\n\nDEVICE counts as itself again, with the impressions it had before it was linked.", 1)},
	"resolve": {"the viewer a device counts as", runIdentity("resolve",
		"usage: fcapctl resolve [flags] DEVICE\n\nThe viewer DEVICE counts as (itself when it is not linked).", 1)},
	"version": {"print the build of fcapctl", runVersion},
	"verify":  {"reconcile live counters with replicas and logs, or check a stopped node's --data-dir", runVerify},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		return runVersion(args[1:], stdout, stderr)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "fcapctl: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: fcapctl COMMAND [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-12s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `"fcapctl COMMAND -h" describes a command's flags. Flags may follow the arguments.`)
	fmt.Fprintln(w)
	fmt.Fprintln(w, exitCodesHelp)
}
