package main

import (
	"bufio"
	"bytes"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/gossip"
)

// gossipBlocklistEnv names a file of cut gossip links, a FAULT-INJECTION
// HOOK for the chaos tests (test/chaos) and nothing else: unset (the
// default), fcapd gossips normally. Each line of the file is two gossip
// addresses, "host:port host:port"; gossip between them is cut both ways
// while the line is there. The file is re-read at most every 100ms, so a
// test splits and heals a cluster by rewriting it.
const gossipBlocklistEnv = "FCAP_FAULT_GOSSIP_BLOCKLIST"

// installGossipFaults wraps the gossip transport in gossip.FaultTransport
// when the environment asks for it.
func installGossipFaults(cfg *node.Config, getenv func(string) string, logger *log.Logger) error {
	path := getenv(gossipBlocklistEnv)
	if path == "" {
		return nil
	}
	ml := cfg.Membership.Memberlist
	inner, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{ml.BindAddr},
		BindPort:  ml.BindPort,
		Logger:    logger,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", gossipBlocklistEnv, err)
	}
	self := net.JoinHostPort(ml.BindAddr, strconv.Itoa(inner.GetAutoBindPort()))
	b := &blocklist{path: path, self: self}
	ml.Transport = &gossip.FaultTransport{Transport: inner, Cut: b.cut}
	return nil
}

// blocklist caches the file's links that involve this node.
type blocklist struct {
	path, self string

	mu sync.Mutex
	// The fields below are guarded by mu.
	read  time.Time
	links map[string]bool
}

func (b *blocklist) cut(addr string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if time.Since(b.read) > 100*time.Millisecond {
		b.read = time.Now()
		b.links = map[string]bool{}
		data, _ := os.ReadFile(b.path) // a missing file cuts nothing
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			f := bytes.Fields(sc.Bytes())
			if len(f) != 2 {
				continue
			}
			a, z := string(f[0]), string(f[1])
			switch b.self {
			case a:
				b.links[z] = true
			case z:
				b.links[a] = true
			}
		}
	}
	return b.links[addr]
}
