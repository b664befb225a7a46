package hostile_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// attackerEnv, set in the environment of this test binary run again,
// makes it a preauthAttacker instead of running tests.
const attackerEnv = "FCAP_HOSTILE_ATTACKER"

// preauthAttacker is a separate process holding connections to a node: on
// "open N", it dials N connections and writes head (its stdin's next
// line, hex) on each; on "close", it closes them all; it answers each
// command with one line, "ok" or the error.
type preauthAttacker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startAttacker(t *testing.T, addr string, head []byte) *preauthAttacker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), attackerEnv+"="+addr, attackerEnv+"_HEAD="+fmt.Sprintf("%x", head))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &preauthAttacker{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() {
		a.in.Close()
		a.cmd.Process.Kill()
		a.cmd.Wait()
	})
	return a
}

func (a *preauthAttacker) do(t *testing.T, cmd string) {
	t.Helper()
	if _, err := fmt.Fprintln(a.in, cmd); err != nil {
		t.Fatalf("attacker %s: %v", cmd, err)
	}
	if !a.out.Scan() {
		t.Fatalf("attacker %s: no answer: %v", cmd, a.out.Err())
	}
	if a.out.Text() != "ok" {
		t.Fatalf("attacker %s: %s", cmd, a.out.Text())
	}
}

// runAttacker is the attacker process's main.
func runAttacker(addr, headHex string) {
	var head []byte
	fmt.Sscanf(headHex, "%x", &head)
	var conns []net.Conn
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) == 2 && f[0] == "open":
			k, _ := strconv.Atoi(f[1])
			var err error
			for range k {
				var c net.Conn
				if c, err = net.DialTimeout("tcp", addr, 10*time.Second); err != nil {
					break
				}
				conns = append(conns, c)
				c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if _, err = c.Write(head); err != nil {
					break
				}
			}
			if err != nil {
				fmt.Printf("after %d connections: %v\n", len(conns), err)
				continue
			}
		case len(f) == 1 && f[0] == "close":
			for _, c := range conns {
				c.Close()
			}
			conns = conns[:0]
		}
		fmt.Println("ok")
	}
	os.Exit(0)
}
