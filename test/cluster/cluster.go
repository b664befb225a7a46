// Package cluster runs real fcapd processes on loopback for tests that
// only real processes can show: joining, kill -9, SIGSTOP, restart, scale
// up and down. Every process is killed when the test ends, pass or fail.
package cluster

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

var (
	buildMu   sync.Mutex
	buildDir  string
	built     = map[string]string{}
	buildErrs = map[string]error{}
)

// Binary builds cmd/fcapd once per test process (with the race detector
// unless FCAP_TEST_NORACE is set) and returns its path. The build lands
// in a temporary folder removed by Cleanup. With FCAP_TEST_BIN set, it
// takes the one built beforehand there instead (see Prebuilt).
func Binary(t testing.TB) string {
	t.Helper()
	return Tool(t, "fcapd")
}

// Tool builds cmd/<name> once per test process and returns its path, or
// takes it from FCAP_TEST_BIN (see Prebuilt).
func Tool(t testing.TB, name string) string {
	t.Helper()
	path, err := build(name)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func build(name string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[name]; ok {
		return p, nil
	}
	if err, ok := buildErrs[name]; ok {
		return "", err
	}
	race := name == "fcapd" && os.Getenv("FCAP_TEST_NORACE") == ""
	path, ok, err := Prebuilt(name, race)
	if !ok && err == nil {
		path, err = buildNow(name, race)
	}
	if err != nil {
		buildErrs[name] = err
		return "", err
	}
	built[name] = path
	return path, nil
}

// BinEnv names a folder of binaries built from this tree before the
// tests, once for every test package that starts them (.ci/run sets it):
// otherwise each package's test process builds its own, and on a cold
// build cache several of them compile fcapd's dependencies with the race
// detector at the same time as go test does. The folder holds
//
//	fcapd          cmd/fcapd with -race
//	fcapd-norace   cmd/fcapd without it
//	fcapctl, fcapbench, fcapingest   cmd/<name>
//	partition-driver                 test/partition/driver
//
// A binary the folder lacks is built as without it.
const BinEnv = "FCAP_TEST_BIN"

// Prebuilt returns the path of the binary name (fcapd, fcapctl,
// partition-driver ...) in the folder BinEnv names, with race saying
// whether it must carry the race detector (fcapd's file is fcapd-norace
// when it must not); ok is false when BinEnv is unset or the folder has
// no such file, and the caller builds it. A file whose build information
// says it is another program, or built with the other race setting, is
// an error: a test would otherwise run something else than it says.
func Prebuilt(name string, race bool) (path string, ok bool, err error) {
	dir := os.Getenv(BinEnv)
	if dir == "" {
		return "", false, nil
	}
	file := name
	if name == "fcapd" && !race {
		file = "fcapd-norace"
	}
	path = filepath.Join(dir, file)
	if _, err := os.Stat(path); err != nil {
		return "", false, nil
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", false, fmt.Errorf("%s=%s: %s: %w", BinEnv, dir, file, err)
	}
	if want := "/" + strings.TrimPrefix(name, "partition-"); !strings.HasSuffix(info.Path, want) {
		return "", false, fmt.Errorf("%s=%s: %s is %s, want a build of .../%s", BinEnv, dir, file, info.Path, name)
	}
	built := false
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			built = true
		}
	}
	if built != race {
		return "", false, fmt.Errorf("%s=%s: %s built with -race=%v, want -race=%v", BinEnv, dir, file, built, race)
	}
	return path, true, nil
}

func buildNow(name string, race bool) (string, error) {
	if buildDir == "" {
		d, err := os.MkdirTemp("", "fcap-test-bin-")
		if err != nil {
			return "", err
		}
		buildDir = d
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(buildDir, name)
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	// From the cmd module's folder, so the build works with the
	// repository's go.work and without it (GOWORK=off: cmd/go.mod's
	// replace directives find the other modules).
	cmd := exec.Command("go", append(args, "./"+name)...)
	cmd.Dir = filepath.Join(root, "cmd")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", name, err, b)
	}
	return out, nil
}

// Cleanup removes the built binaries. Main calls it after the tests.
func Cleanup() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Main is the TestMain of a package that starts real processes: it runs
// the tests, removes the binaries they built and exits with the tests'
// code.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// RepoRoot returns the repository's root folder: the first folder holding
// go.work above the module of the current directory (a test runs in its
// package's folder). Each part of fcap is a module of its own; go.work
// ties them at the root.
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside an fcap module")
	}
	for dir := filepath.Dir(mod); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.work above %s: not inside the fcap repository", mod)
		}
	}
}

// FreePort returns a loopback port nothing listens on (TCP and UDP) at
// the moment of the call, from below Linux's ephemeral range (32768+) so
// that outgoing connections are unlikely to take it before the node
// binds it. Gossip needs its port known before start so nodes started
// together can list each other as seeds.
func FreePort(t testing.TB) int {
	t.Helper()
	if p, ok := freePort(); ok {
		return p
	}
	t.Fatal("no free loopback port")
	return 0
}

func freePort() (int, bool) {
	for range 200 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		return port, true
	}
	return 0, false
}

// Node is one fcapd process.
type Node struct {
	Name   string
	Gossip string // gossip address, chosen before start
	Data   string // data-plane address, read from the "fcapd listening" line
	HTTP   string // HTTP address, read from the "fcapd listening" line

	t    testing.TB
	bin  string
	args []string
	env  []string // more environment, after the test's own
	cmd  *exec.Cmd
	logs *LogBuffer
	done chan struct{} // closed when the process exits

	exitCode int // set before done is closed
}

// Options for a started node.
type Options struct {
	Seeds    []string // gossip addresses to join
	Replicas int      // 0: fcapd's default
	Args     []string // more fcapd flags

	// GossipKey is a base64 gossip key, written to a file of the test's
	// temporary folder and given with --gossip-key-file. Empty: plain
	// gossip.
	GossipKey string
	// DataDir, when set, gives each node --data-dir DataDir/<name>: a
	// restart finds what it wrote.
	DataDir string
	// Env is more environment for the process ("GOGC=100"), after the
	// test's own.
	Env []string
	// Prefix names the nodes StartCluster starts: Prefix1, Prefix2 and
	// so on. Empty: "n".
	Prefix string
}

// Start starts one fcapd and waits until it is listening.
func Start(t testing.TB, name string, o Options) *Node {
	t.Helper()
	n := newNode(t, name, fmt.Sprintf("127.0.0.1:%d", FreePort(t)), o)
	if err := n.launch(); err != nil {
		t.Fatal(err)
	}
	return n
}

// newNode prepares a node's flags; the process is killed when the test
// ends.
func newNode(t testing.TB, name, gossip string, o Options) *Node {
	n := &Node{Name: name, Gossip: gossip, t: t, bin: Binary(t), env: o.Env}
	n.args = []string{
		"--name", name,
		"--data", "127.0.0.1:0",
		"--http", "127.0.0.1:0",
		"--gossip", gossip,
		"--gossip-profile", "local",
		"--log-format", "json",
		"--log-level", "debug",
		"--memory-limit", "256MiB",
		"--shutdown-timeout", "10s",
	}
	if len(o.Seeds) > 0 {
		n.args = append(n.args, "--join", strings.Join(o.Seeds, ","))
	}
	if o.Replicas > 0 {
		n.args = append(n.args, "--replicas", fmt.Sprint(o.Replicas))
	}
	if o.GossipKey != "" {
		file := filepath.Join(t.TempDir(), "gossip.key")
		if err := os.WriteFile(file, []byte(o.GossipKey+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		n.args = append(n.args, "--gossip-key-file", file)
	}
	if o.DataDir != "" {
		n.args = append(n.args, "--data-dir", filepath.Join(o.DataDir, name))
	}
	n.args = append(n.args, o.Args...)
	t.Cleanup(n.Kill)
	return n
}

// launch starts the process and waits for its ready line, moving the
// gossip port if another process took it meanwhile. It does not touch
// the testing.TB, so it may run off the test goroutine.
func (n *Node) launch() error {
	var err error
	for range 3 {
		if err = n.launchOnce(); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		port, ok := freePort()
		if !ok {
			return err
		}
		old := n.Gossip
		n.Gossip = fmt.Sprintf("127.0.0.1:%d", port)
		for i, a := range n.args {
			if a == old {
				n.args[i] = n.Gossip
			}
		}
	}
	return err
}

func (n *Node) launchOnce() error {
	n.logs = &LogBuffer{}
	n.cmd = exec.Command(n.bin, n.args...)
	if len(n.env) > 0 {
		n.cmd.Env = append(os.Environ(), n.env...)
	}
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		return err
	}
	n.cmd.Stdout = n.logs
	if err := n.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	n.done = make(chan struct{})
	ready := make(chan readyLine, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		n.scan(stderr, ready)
	}()
	go func() {
		<-scanned // the pipe is drained before Wait closes it
		n.cmd.Wait()
		n.exitCode = n.cmd.ProcessState.ExitCode()
		close(n.done)
	}()
	select {
	case r := <-ready:
		n.Data, n.HTTP = r.Data, r.HTTP
		return nil
	case <-n.done:
		return fmt.Errorf("%s exited before it was ready:\n%s", n.Name, n.logs.String())
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s not ready after 30s:\n%s", n.Name, n.logs.String())
	}
}

type readyLine struct {
	Msg  string `json:"msg"`
	Data string `json:"data"`
	HTTP string `json:"http"`
}

// scan copies the process's log to the buffer and reports the ready line.
func (n *Node) scan(r io.Reader, ready chan<- readyLine) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sent := false
	for sc.Scan() {
		line := sc.Bytes()
		n.logs.Write(append(line, '\n'))
		if sent {
			continue
		}
		var l readyLine
		if json.Unmarshal(line, &l) == nil && l.Msg == "fcapd listening" {
			ready <- l
			sent = true
		}
	}
}

// Logs returns what the process has logged so far.
func (n *Node) Logs() string { return n.logs.String() }

// Pid returns the process's id, 0 before it started.
func (n *Node) Pid() int {
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the process is alive.
func (n *Node) Running() bool {
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Exited waits up to timeout for the process to exit on its own and
// returns its exit status (-1 when a signal ended it); ok is false when it
// is still running.
func (n *Node) Exited(timeout time.Duration) (code int, ok bool) {
	select {
	case <-n.done:
		return n.exitCode, true
	case <-time.After(timeout):
		return 0, false
	}
}

// Kill sends SIGKILL and waits for the process to go. Safe to call on a
// stopped node.
func (n *Node) Kill() {
	if n.cmd == nil || n.cmd.Process == nil || !n.Running() {
		return
	}
	n.cmd.Process.Signal(syscall.SIGCONT) // a paused process must die too
	n.cmd.Process.Kill()
	<-n.done
}

// KillAll sends SIGKILL to every running node before waiting for any:
// the whole cluster crashes at one moment, none outliving the others by
// the time a kill takes.
func KillAll(nodes []*Node) {
	for _, n := range nodes {
		if n.cmd != nil && n.cmd.Process != nil && n.Running() {
			n.cmd.Process.Signal(syscall.SIGCONT)
			n.cmd.Process.Kill()
		}
	}
	for _, n := range nodes {
		n.Kill()
	}
}

// Stop sends SIGTERM (a graceful stop) and waits up to timeout, then
// kills. It reports whether the process stopped by itself.
func (n *Node) Stop(timeout time.Duration) bool {
	if !n.Running() {
		return true
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
		return true
	case <-time.After(timeout):
		// Ask for a goroutine dump (it lands in Logs) before killing.
		n.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-n.done:
		case <-time.After(2 * time.Second):
		}
		n.Kill()
		return false
	}
}

// Reload sends SIGHUP: fcapd re-reads its TLS files.
func (n *Node) Reload() {
	if n.Running() {
		n.cmd.Process.Signal(syscall.SIGHUP)
	}
}

// Pause stops the process with SIGSTOP; Resume continues it.
func (n *Node) Pause() {
	n.cmd.Process.Signal(syscall.SIGSTOP)
	n.waitState(func(st byte) bool { return st == 'T' || st == 't' })
}

func (n *Node) Resume() {
	n.cmd.Process.Signal(syscall.SIGCONT)
	n.waitState(func(st byte) bool { return st != 'T' && st != 't' })
}

// waitState waits (up to 5 s) until the process's state in /proc says
// ok: a signal is delivered asynchronously, and a test that pauses a node
// must not send it a request the node still answers.
func (n *Node) waitState(ok func(byte) bool) {
	path := fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			return // not Linux, or the process is gone
		}
		// "pid (comm) S ...": the state follows the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && ok(b[i+2]) {
			return
		}
	}
}

// Restart starts the process again with the same name, gossip address
// and flags (data and HTTP ports may change).
func (n *Node) Restart() {
	n.t.Helper()
	n.Kill()
	if err := n.launch(); err != nil {
		n.t.Fatal(err)
	}
}

// Metrics scrapes the node's /metrics: see Scrape.
func (n *Node) Metrics() (map[string]float64, error) { return Scrape(n.HTTP) }

// scraper asks for /metrics uncompressed: http.DefaultClient asks for
// gzip, and a race-built node compressing a scrape every 100 ms (the
// tests that poll a metric, hostile's memory monitor) spent a tenth of
// its CPU on it. The samples are the same.
var scraper = &http.Client{Transport: func() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableCompression = true
	return tr
}()}

// Scrape reads the Prometheus text served at http://addr/metrics and
// returns every counter and gauge sample as
// "name{label="value",...}" -> value, labels sorted (no braces without
// labels), and a histogram's count under its key plus "_count".
func Scrape(addr string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	resp, err := scraper.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[key+"_count"] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out, nil
}

// Metric returns one sample (see Metrics for the key format), 0 if absent.
func (n *Node) Metric(key string) float64 {
	n.t.Helper()
	m, err := n.Metrics()
	if err != nil {
		n.t.Fatalf("scrape %s: %v", n.Name, err)
	}
	return m[key]
}

// Eventually polls cond every 20ms until it holds or the deadline passes,
// then fails the test with the message (internal/testwait's, which the
// tests of node's own packages share).
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	testwait.Eventually(t, timeout, cond, format, args...)
}

// StartCluster starts n nodes at the same moment, each listing all the
// others as seeds, and waits until every node's ring has n active
// members.
func StartCluster(t testing.TB, n int, o Options) []*Node {
	t.Helper()
	ports := make([]string, n)
	for i := range ports {
		ports[i] = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	}
	nodes := make([]*Node, n)
	for i := range nodes {
		oo := o
		if n > 1 || len(o.Seeds) > 0 {
			// A node given seeds never forms a cluster alone (fcapd
			// --bootstrap): one node started by itself gets none.
			oo.Seeds = append(append([]string(nil), o.Seeds...), ports...)
		}
		nodes[i] = newNode(t, fmt.Sprintf("%s%d", cmp.Or(o.Prefix, "n"), i+1), ports[i], oo)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = node.launch()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	WaitActive(t, nodes, n)
	return nodes
}

// WaitActive waits until every running node counts want active members
// and is ready (/readyz: active and holding every partition it owns).
func WaitActive(t testing.TB, nodes []*Node, want int) {
	t.Helper()
	Eventually(t, 60*time.Second, func() bool {
		for _, n := range nodes {
			if !n.Running() {
				continue
			}
			m, err := n.Metrics()
			if err != nil || m[`fcap_ring_members{state="active"}`] != float64(want) || !n.Ready() {
				return false
			}
		}
		return true
	}, "nodes did not converge on %d active, ready members", want)
}

// Status asks the node for its status over the data plane (a frame of a
// few dozen bytes: cheap enough to poll where scraping and parsing
// /metrics, ~5 ms of CPU a time here, would load the machine under test).
func (n *Node) Status() (*proto.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return client.NodeStatus(ctx, n.Data)
}

// ActiveMembers returns how many members the node's ring counts Active,
// read from its topology over the data plane.
func (n *Node) ActiveMembers() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var t proto.Topology
	if err := (&client.Admin{}).Call(ctx, n.Data, &proto.TopologyRequest{}, &t); err != nil {
		return 0, err
	}
	active := 0
	for _, m := range t.Members {
		if ring.State(m.State) == ring.Active {
			active++
		}
	}
	return active, nil
}

// Settled reports whether every running node counts want active members,
// is active itself, holds a majority for strict writes, and has no
// partition syncing or under-replicated:
// what WaitActive waits for and more, through the cheap status calls.
// When not, it says which node is not and why.
func Settled(nodes []*Node, want int) (bool, string) {
	for _, n := range nodes {
		if !n.Running() {
			continue
		}
		active, err := n.ActiveMembers()
		if err != nil || active != want {
			return false, fmt.Sprintf("%s: %d active members, want %d, err %v", n.Name, active, want, err)
		}
		st, err := n.Status()
		if err != nil {
			return false, fmt.Sprintf("%s: status: %v", n.Name, err)
		}
		if ring.State(st.State) != ring.Active || st.Syncing != 0 || st.UnderReplicated != 0 || !st.Authority {
			return false, fmt.Sprintf("%s: %v, syncing %d, under-replicated %d, strict authority %v (%d of %d)", n.Name, ring.State(st.State), st.Syncing, st.UnderReplicated,
				st.Authority, st.QuorumConfirmed, st.QuorumMembers)
		}
	}
	return true, ""
}

// Ready reports whether the node answers /readyz with 200.
func (n *Node) Ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.HTTP+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// LogBuffer is a log sink a process's output and the test may share.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
