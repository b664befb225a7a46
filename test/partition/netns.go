//go:build linux

package partition

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The test network: one bridge namespace holding a Linux bridge, and one
// namespace per node joined to it by a veth pair. Every address lives on
// Subnet, which exists only inside these namespaces. The bridge's own
// address (ControlIP) is where the checks run from (fcapctl, the driver's
// counts and settle modes); links are cut only between node addresses, so
// the control address always reaches every node.
//
// A cut drops packets silently inside the bridge: on the egress of the
// bridge port that leads to the receiver, an HTB class whose leaf is a
// pfifo of limit 0 swallows every packet classified into it, and a u32
// filter per cut source classifies into it. The sender's kernel sees its
// packet leave; the receiver never sees it; nobody gets a reset or an
// ICMP error. (This kernel has neither netem nor the gact action, so
// "netem loss 100%" and "action drop" are not available.)

// Subnet is the private test subnet (a /24) of every namespace.
const Subnet = "10.213.0"

// ControlIP is the bridge's own address, in the bridge namespace.
const ControlIP = Subnet + ".254"

// Prefix starts the name of every namespace the suite creates, followed
// by the creating process's pid, so a sweep removes only what a dead
// test process left behind.
const Prefix = "fcpt"

// Net is one test's namespaces.
type Net struct {
	Bridge string   // bridge namespace
	Nodes  []string // node namespaces, node i+1 at Subnet.(i+1)

	mu   sync.Mutex // guards cuts
	cuts map[Link]bool
}

// Link is a one-way link from node From to node To (1-based indices).
type Link struct{ From, To int }

var (
	ipBin = toolPath("ip")
	tcBin = toolPath("tc")
)

func toolPath(name string) string {
	if p := "/usr/sbin/" + name; fileExists(p) {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return name
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// IP returns the address of node i (1-based).
func IP(i int) string { return fmt.Sprintf("%s.%d", Subnet, i) }

func run(bin string, args ...string) error {
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NewNet creates the bridge namespace and n node namespaces named
// <Prefix><pid>x<tag>br and ...n<i>. On error it removes what it made.
func NewNet(tag string, n int) (*Net, error) {
	base := fmt.Sprintf("%s%dx%s", Prefix, os.Getpid(), tag)
	nt := &Net{Bridge: base + "br", cuts: map[Link]bool{}}
	for i := 1; i <= n; i++ {
		nt.Nodes = append(nt.Nodes, fmt.Sprintf("%sn%d", base, i))
	}
	if err := nt.create(); err != nil {
		nt.Close()
		return nil, err
	}
	return nt, nil
}

func (nt *Net) create() error {
	br := nt.Bridge
	steps := [][]string{
		{ipBin, "netns", "add", br},
		{ipBin, "-n", br, "link", "set", "lo", "up"},
		{ipBin, "-n", br, "link", "add", "br0", "type", "bridge"},
		{ipBin, "-n", br, "link", "set", "br0", "up"},
		{ipBin, "-n", br, "addr", "add", ControlIP + "/24", "dev", "br0"},
	}
	for i, ns := range nt.Nodes {
		port := fmt.Sprintf("v%d", i+1)
		steps = append(steps,
			[]string{ipBin, "netns", "add", ns},
			[]string{ipBin, "-n", ns, "link", "set", "lo", "up"},
			[]string{ipBin, "-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{ipBin, "-n", br, "link", "set", port, "master", "br0", "up"},
			[]string{ipBin, "-n", ns, "addr", "add", IP(i+1) + "/24", "dev", "eth0"},
			[]string{ipBin, "-n", ns, "link", "set", "eth0", "up"},
			// The drop class: unclassified packets pass straight
			// through HTB (no default class); those classified into
			// 1:2 meet a queue of length 0.
			[]string{tcBin, "-n", br, "qdisc", "add", "dev", port, "root", "handle", "1:", "htb"},
			[]string{tcBin, "-n", br, "class", "add", "dev", port, "parent", "1:", "classid", "1:2", "htb", "rate", "8bit", "quantum", "1514"},
			[]string{tcBin, "-n", br, "qdisc", "add", "dev", port, "parent", "1:2", "handle", "2:", "pfifo", "limit", "0"},
		)
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// Close deletes every namespace of the net (their veths go with them).
// Safe to call twice.
func (nt *Net) Close() error {
	var errs []string
	for _, ns := range append(slices.Clone(nt.Nodes), nt.Bridge) {
		if !fileExists("/var/run/netns/" + ns) {
			continue
		}
		if err := run(ipBin, "netns", "del", ns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing namespaces: %s", strings.Join(errs, "; "))
	}
	return nil
}

// SetCuts makes exactly the given one-way links cut, adding and removing
// filters where the set changed.
func (nt *Net) SetCuts(cuts []Link) error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	want := map[Link]bool{}
	for _, l := range cuts {
		if l.From < 1 || l.To < 1 || l.From > len(nt.Nodes) || l.To > len(nt.Nodes) || l.From == l.To {
			return fmt.Errorf("bad link %v for %d nodes", l, len(nt.Nodes))
		}
		want[l] = true
	}
	for l := range nt.cuts {
		if !want[l] {
			// The filter of source From on the receiver's port has
			// priority From.
			if err := run(tcBin, "-n", nt.Bridge, "filter", "del", "dev", fmt.Sprintf("v%d", l.To), "parent", "1:", "prio", strconv.Itoa(l.From)); err != nil {
				return err
			}
			delete(nt.cuts, l)
		}
	}
	for l := range want {
		if nt.cuts[l] {
			continue
		}
		if err := run(tcBin, "-n", nt.Bridge, "filter", "add", "dev", fmt.Sprintf("v%d", l.To), "parent", "1:",
			"protocol", "ip", "prio", strconv.Itoa(l.From), "u32", "match", "ip", "src", IP(l.From)+"/32", "flowid", "1:2"); err != nil {
			return err
		}
		nt.cuts[l] = true
	}
	return nil
}

// Heal removes every cut.
func (nt *Net) Heal() error { return nt.SetCuts(nil) }

// Split returns the links cut both ways between every node of a and
// every node of b.
func Split(a, b []int) []Link {
	var out []Link
	for _, x := range a {
		for _, y := range b {
			out = append(out, Link{x, y}, Link{y, x})
		}
	}
	return out
}

// OneWay returns the links from every node of from to every node of to.
func OneWay(from, to []int) []Link {
	var out []Link
	for _, x := range from {
		for _, y := range to {
			out = append(out, Link{x, y})
		}
	}
	return out
}

// Sweep deletes the namespaces a test process that no longer runs left
// behind (names <Prefix><pid>x...). It returns what it removed.
func Sweep() ([]string, error) {
	entries, err := os.ReadDir("/var/run/netns")
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, Prefix)
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "x")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil {
			continue
		}
		if pid != os.Getpid() && fileExists(fmt.Sprintf("/proc/%d", pid)) {
			continue // a live test process owns it
		}
		if err := run(ipBin, "netns", "del", name); err != nil {
			return removed, err
		}
		removed = append(removed, name)
	}
	return removed, nil
}

// Exec returns a command that runs bin with args inside namespace ns.
// `ip netns exec` execs the program in place, so the command's process
// is the program itself: signals reach it directly.
// The program is killed if the test process dies first.
func Exec(ns, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(ipBin, append([]string{"netns", "exec", ns, bin}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}
