//go:build linux

package partition

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/fcap-io/fcap/test/cluster"
)

// driverProc is one running `driver race`.
type driverProc struct {
	side   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *cluster.LogBuffer
	out    string
	soft   string        // the soft Allows' history
	ready  chan string   // the first line the driver printed
	done   chan struct{} // closed once the process was waited for
	err    error         // set before done is closed
}

func startDriver(bin string, n *Node, seeds []string, prefix string, d, timeout time.Duration, out, soft string) (*driverProc, error) {
	cmd := Exec(n.NS, bin, "race",
		"--soft-workers", "2",
		"--soft-out", soft,
		"--seeds", strings.Join(seeds, ","),
		"--side", n.Name,
		"--prefix", prefix,
		"--duration", d.String(),
		"--out", out,
		"--timeout", timeout.String(),
	)
	p := &driverProc{side: n.Name, cmd: cmd, stderr: &cluster.LogBuffer{}, out: out, soft: soft,
		ready: make(chan string, 1), done: make(chan struct{})}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("driver beside %s: %w", n.Name, err)
	}
	go func() {
		r := bufio.NewReader(stdout)
		l, _ := r.ReadString('\n')
		p.ready <- l
		io.Copy(io.Discard, r) // every read is done before Wait
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitReady waits for the driver's "ready" line.
func (p *driverProc) waitReady(timeout time.Duration) error {
	select {
	case l := <-p.ready:
		if strings.TrimSpace(l) == "ready" {
			return nil
		}
		p.kill()
		return fmt.Errorf("driver beside %s said %q: %s", p.side, l, p.stderr.String())
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("driver beside %s not ready after %v: %s", p.side, timeout, p.stderr.String())
	}
}

// wait waits for the driver to finish and reads its histories: the
// strict Allows, then the soft ones.
func (p *driverProc) wait(timeout time.Duration) ([]Op, []Op, error) {
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
		return nil, nil, fmt.Errorf("driver beside %s still racing after %v", p.side, timeout)
	}
	if p.err != nil {
		return nil, nil, fmt.Errorf("driver beside %s: %v: %s", p.side, p.err, p.stderr.String())
	}
	strict, err := readOpsFile(p.out)
	if err != nil {
		return nil, nil, err
	}
	soft, err := readOpsFile(p.soft)
	return strict, soft, err
}

func readOpsFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadOps(f)
}

// kill ends the driver if it still runs and waits for it.
func (p *driverProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Kill()
	<-p.done
}

func addrs(nodes []*Node, http bool) string {
	var out []string
	for _, n := range nodes {
		if http {
			out = append(out, n.HTTP)
		} else {
			out = append(out, n.Data)
		}
	}
	return strings.Join(out, ",")
}

// waitSettled runs `driver settled` from the bridge namespace.
func waitSettled(bins binaries, nt *Net, nodes []*Node, timeout time.Duration) error {
	out, err := Exec(nt.Bridge, bins.driver, "settled",
		"--data", addrs(nodes, false), "--http", addrs(nodes, true),
		"--want", fmt.Sprint(len(nodes)), "--timeout", timeout.String()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// readCounts reads every checked viewer's count back from the bridge
// namespace.
func readCounts(bins binaries, nt *Net, nodes []*Node, checks []ViewerCheck) (map[string]int64, error) {
	var in strings.Builder
	for _, vc := range checks {
		fmt.Fprintln(&in, vc.Viewer)
	}
	cmd := Exec(nt.Bridge, bins.driver, "counts", "--seeds", addrs(nodes, false))
	cmd.Stdin = strings.NewReader(in.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	counts := map[string]int64{}
	if jerr := json.Unmarshal(out, &counts); jerr != nil {
		return nil, fmt.Errorf("%v %v: %s", err, jerr, stderr.String())
	}
	if err != nil {
		return counts, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return counts, nil
}

// verify runs `fcapctl verify` from the bridge namespace and returns how
// many viewers' copies drift.
func verify(bins binaries, nt *Net, nodes []*Node) (int, error) {
	cmd := Exec(nt.Bridge, bins.fcapctl, "verify", "--addr", addrs(nodes, false), "--settle", "500ms", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output() // exit status 1 on drift: the report says why
	var rep struct {
		Unreachable []string `json:"unreachable"`
		NotHeld     []string `json:"not_held"`
		DriftTotal  int      `json:"drift_total"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return -1, fmt.Errorf("printed %q (%v): %s", out, err, stderr.String())
	}
	if len(rep.Unreachable) > 0 {
		return -1, fmt.Errorf("unreachable: %v", rep.Unreachable)
	}
	return rep.DriftTotal, nil
}

// owners returns each partition's owners, primary first, as the cluster
// routes before the fault (fcapctl ring from the bridge namespace).
func owners(bins binaries, nt *Net, nodes []*Node) ([][]string, error) {
	cmd := Exec(nt.Bridge, bins.fcapctl, "ring", "--addr", addrs(nodes, false), "--json", "--partitions")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("fcapctl ring: %v: %s", err, stderr.String())
	}
	var r struct {
		Owners [][]string `json:"owners"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Owners) == 0 {
		return nil, fmt.Errorf("fcapctl ring printed %q: %v", out, err)
	}
	return r.Owners, nil
}
