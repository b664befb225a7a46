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
	"syscall"
	"time"

	"github.com/fcap-io/fcap/test/cluster"
)

// Fixed ports: every node has its own namespace, so they never collide.
const (
	DataPort   = 7700
	HTTPPort   = 7780
	GossipPort = 7946
)

// Node is one fcapd process in its own namespace.
type Node struct {
	Index int    // 1-based
	Name  string // n<Index>, its stable ring name
	NS    string
	IP    string
	Data  string // data-plane address, from the "fcapd listening" line
	HTTP  string // HTTP address, from the "fcapd listening" line

	bin  string
	args []string
	cmd  *exec.Cmd
	logs *cluster.LogBuffer
	done chan struct{} // closed when the process exits
}

// Gossip returns the node's gossip address.
func (n *Node) Gossip() string { return fmt.Sprintf("%s:%d", n.IP, GossipPort) }

// logLevel is the nodes' --log-level: FCAP_PARTITION_LOG_LEVEL, or info.
func logLevel() string {
	if l := os.Getenv("FCAP_PARTITION_LOG_LEVEL"); l != "" {
		return l
	}
	return "info"
}

// NewNode prepares node i of nt; Start launches it.
func NewNode(nt *Net, i int, bin, dataDir string, replicas int, join []string) *Node {
	n := &Node{Index: i, Name: fmt.Sprintf("n%d", i), NS: nt.Nodes[i-1], IP: IP(i), bin: bin}
	n.args = []string{
		"--name", n.Name,
		"--data", fmt.Sprintf("%s:%d", n.IP, DataPort),
		"--http", fmt.Sprintf("%s:%d", n.IP, HTTPPort),
		"--gossip", n.Gossip(),
		"--join", strings.Join(join, ","),
		"--replicas", fmt.Sprint(replicas),
		"--data-dir", dataDir,
		"--log-format", "json",
		"--log-level", logLevel(),
		"--memory-limit", "256MiB",
		"--shutdown-timeout", "10s",
	}
	return n
}

// Start launches the process and waits (up to 30 s) for its ready line.
func (n *Node) Start() error {
	if n.logs == nil {
		n.logs = &cluster.LogBuffer{}
	}
	fmt.Fprintf(n.logs, "--- start %s\n", time.Now().UTC().Format(time.RFC3339Nano))
	n.cmd = Exec(n.NS, n.bin, n.args...)
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		return err
	}
	n.cmd.Stdout = n.logs
	if err := n.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	n.done = done
	ready := make(chan readyLine, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		scanReady(stderr, n.logs, ready)
	}()
	cmd := n.cmd
	go func() {
		<-scanned // the pipe is drained before Wait closes it
		cmd.Wait()
		close(done)
	}()
	select {
	case r := <-ready:
		n.Data, n.HTTP = r.Data, r.HTTP
		return nil
	case <-done:
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

func scanReady(r io.Reader, logs io.Writer, ready chan<- readyLine) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sent := false
	for sc.Scan() {
		line := sc.Bytes()
		logs.Write(append(line, '\n'))
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

// Running reports whether the process is alive.
func (n *Node) Running() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL (after SIGCONT: a paused process must die too) and
// waits for the process to go. Safe on a stopped node.
func (n *Node) Kill() {
	if !n.Running() {
		return
	}
	n.cmd.Process.Signal(syscall.SIGCONT)
	n.cmd.Process.Kill()
	<-n.done
}

// Pause stops the process with SIGSTOP and waits until it is stopped.
func (n *Node) Pause() {
	if n.Running() {
		n.cmd.Process.Signal(syscall.SIGSTOP)
		n.waitState(func(st byte) bool { return st == 'T' || st == 't' })
	}
}

// Resume continues a paused process.
func (n *Node) Resume() {
	if n.Running() {
		n.cmd.Process.Signal(syscall.SIGCONT)
		n.waitState(func(st byte) bool { return st != 'T' && st != 't' })
	}
}

// waitState polls /proc until the process's state satisfies ok (up to
// 5 s): signals are delivered asynchronously.
func (n *Node) waitState(ok func(byte) bool) {
	path := fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && ok(b[i+2]) {
			return
		}
	}
}

// Logs returns what the process (and its earlier runs) logged.
func (n *Node) Logs() string {
	if n.logs == nil {
		return ""
	}
	return n.logs.String()
}
