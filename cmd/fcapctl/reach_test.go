package main

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
)

// listen serves each connection with serve on a loopback port until the
// test ends.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return l.Addr().String()
}

// TestRecognisesWhatAnswersInsteadOfANode: --addr pointed at a node's
// HTTP port once printed "frame too large: length 1213486160" after the
// HTTP server gave up; another protocol's peer or a silent one got the
// same treatment.
func TestRecognisesWhatAnswersInsteadOfANode(t *testing.T) {
	nodes := startNodes(t, 1)
	ssh := listen(t, func(c net.Conn) { c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n")); io.Copy(io.Discard, c) })
	silent := listen(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	for _, c := range []struct {
		name, addr, says string
	}{
		{"the node's HTTP port", nodes[0].HTTPAddr(), "is an HTTP server, not an fcap data plane"},
		{"an SSH server", ssh, "does not speak the fcap protocol"},
		{"a silent peer", silent, "did not answer within"},
	} {
		for _, args := range [][]string{
			{"status", "--addr", c.addr},
			{"allow", "--addr", c.addr, "u1", "campaign:c1:3:1h"},
			{"keys", "--addr", c.addr, "u1"},
		} {
			code, _, errOut := runCLI(args...)
			if code != exitError || !strings.Contains(errOut, c.says) || !strings.Contains(errOut, c.addr) {
				t.Errorf("%s, fcapctl %s: exit %d, stderr %q; want %d saying %q", c.name, args[0], code, errOut, exitError, c.says)
			}
		}
	}
}

// TestDeadAddressFailsAtOnceWithoutAWarning: against an address nothing
// listens on, the data commands waited for the client's whole readiness
// deadline and the client logged a WARN line beside fcapctl's error.
func TestDeadAddressFailsAtOnceWithoutAWarning(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	var logged bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	for _, args := range [][]string{
		{"allow", "--addr", dead, "u1", "campaign:c1:3:1h"},
		{"check", "--addr", dead, "u1", "campaign:c1:3:1h"},
		{"keys", "--addr", dead, "u1"},
		{"status", "--addr", dead},
		{"conformance", "--addr", dead, "../../test/conformance/testdata/allow_cases.json"},
	} {
		code, _, errOut := runCLI(args...)
		if code != exitError || !strings.Contains(errOut, dead) || !strings.Contains(errOut, "connection refused") {
			t.Errorf("fcapctl %s: exit %d, stderr %q", args[0], code, errOut)
		}
	}
	if logged.Len() != 0 {
		t.Errorf("fcapctl let the client log:\n%s", logged.String())
	}
}

// TestUnknownScopeListsTheAcceptedOnes: the node's refusal names the
// scopes it takes.
func TestUnknownScopeListsTheAcceptedOnes(t *testing.T) {
	nodes := startNodes(t, 1)
	code, _, errOut := runCLI("allow", "--addr", nodes[0].DataAddr(), "u1", "planet:p1:3:1h")
	if code != exitError || !strings.Contains(errOut, `"planet"`) || !strings.Contains(errOut, "campaign") || !strings.Contains(errOut, "creative") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestParseCap(t *testing.T) {
	const day, week = 24 * time.Hour, 7 * 24 * time.Hour
	for _, c := range []struct {
		in   string
		want fcap.Cap
	}{
		{"campaign:c1:3:24h", fcap.Cap{Scope: "campaign", ID: "c1", Limit: 3, Window: day}},
		{"campaign:c1:3:86400000", fcap.Cap{Scope: "campaign", ID: "c1", Limit: 3, Window: day}},
		{"campaign:c1:3:1d", fcap.Cap{Scope: "campaign", ID: "c1", Limit: 3, Window: day}},
		{"campaign:c1:3:2w", fcap.Cap{Scope: "campaign", ID: "c1", Limit: 3, Window: 2 * week}},
		{"campaign:c1:3:1d12h", fcap.Cap{Scope: "campaign", ID: "c1", Limit: 3, Window: day + day/2}},
		{"campaign:c1:3:1.5d", fcap.Cap{Scope: "campaign", ID: "c1", Limit: 3, Window: day + day/2}},
		{"campaign:c1:3:24h:strict", fcap.Cap{Scope: "campaign", ID: "c1", Limit: 3, Window: day, Mode: fcap.Strict}},
		{"campaign:c1:3:24h:mode=strict", fcap.Cap{Scope: "campaign", ID: "c1", Limit: 3, Window: day, Mode: fcap.Strict}},
		{"campaign:c1:3:24h:strict:buckets", fcap.Cap{Scope: "campaign", ID: "c1", Limit: 3, Window: day, Mode: fcap.Strict, Algorithm: fcap.Buckets}},
		{"campaign:c1:3:24h:fixed:strict", fcap.Cap{Scope: "campaign", ID: "c1", Limit: 3, Window: day, Mode: fcap.Strict, Algorithm: fcap.Fixed}},
		{"campaign:c1:3:24h:algorithm=fixed", fcap.Cap{Scope: "campaign", ID: "c1", Limit: 3, Window: day, Algorithm: fcap.Fixed}},
		{"creative:k1:2:1h", fcap.Cap{Scope: "creative", ID: "k1", Limit: 2, Window: time.Hour}},
		{"creative:k1:2:90m", fcap.Cap{Scope: "creative", ID: "k1", Limit: 2, Window: 90 * time.Minute}},
		{"creative:k1:2:1500ms", fcap.Cap{Scope: "creative", ID: "k1", Limit: 2, Window: 1500 * time.Millisecond}},
		{"creative:k1:2:1500", fcap.Cap{Scope: "creative", ID: "k1", Limit: 2, Window: 1500 * time.Millisecond}},
	} {
		got, err := parseCap(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseCap(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		"campaign:c1:3", "campaign:c1:x:1h", "campaign:c1:3:1y", "campaign:c1:3:d", "campaign:c1:3:-1d",
		"campaign:c1:3:1h:strict:soft", "campaign:c1:3:1h:sliding:fixed", "campaign:c1:3:1h:mode=sliding",
		"campaign:c1:3:1h:speed=fast", "campaign:c1:3:1h:", "campaign:c1:3:1h:a:b:c",
		"campaign:c1:3:1.5ms", "campaign:c1:3:1h500us",
	} {
		if c, err := parseCap(in); err == nil {
			t.Errorf("parseCap(%q) = %+v, want an error", in, c)
		}
	}
}
