package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/fcap-io/fcap/proto"
)

var gossipKeyOps = map[string]proto.GossipKeyOp{
	"list":    proto.GossipKeyList,
	"install": proto.GossipKeyInstall,
	"use":     proto.GossipKeyUse,
	"remove":  proto.GossipKeyRemove,
}

// runGossipKey changes or lists the gossip keyring of every member.
// memberlist has no cluster-wide key manager, so the request goes to
// each member's data plane and each applies it to its own keyring.
func runGossipKey(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("gossip-key", stderr,
		"usage: fcapctl gossip-key [flags] install|use|remove KEY",
		"       fcapctl gossip-key [flags] list",
		"\nChanges the gossip keyring of every member of the cluster. To rotate:",
		"install NEW, use NEW, remove OLD, each once every member succeeded.",
		"Nothing is persisted: restart a node with the key in use (--gossip-key-file).",
		"Keys are shown by fingerprint (first 8 bytes of their SHA-256).",
	)
	var nf nodeFlags
	nf.register(fs, 10*time.Second)
	keyFile := fs.String("key-file", "", "file holding the base64 key (instead of the KEY argument, which shows in ps)")
	if !parsePositional(fs, args, 1, -1) {
		return 2
	}
	op, ok := gossipKeyOps[fs.Arg(0)]
	if !ok {
		fmt.Fprintf(stderr, "fcapctl gossip-key: unknown operation %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	req := &proto.GossipKey{Op: op}
	if op != proto.GossipKeyList {
		switch {
		case fs.NArg() == 2 && *keyFile == "":
			req.Key = fs.Arg(1)
		case fs.NArg() == 1 && *keyFile != "":
			b, err := os.ReadFile(*keyFile)
			if err != nil {
				fmt.Fprintf(stderr, "fcapctl gossip-key: %v\n", err)
				return 1
			}
			req.Key = strings.TrimSpace(string(b))
		default:
			fs.Usage()
			return 2
		}
		key, err := proto.ParseGossipKey(req.Key)
		if err != nil {
			fmt.Fprintf(stderr, "fcapctl gossip-key: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "key %s\n", proto.GossipKeyFingerprint(key))
	} else if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	admin, err := nf.conn.admin()
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl gossip-key: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), nf.timeout)
	defer cancel()
	topo, err := topology(ctx, admin, strings.Split(nf.addr, ","))
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl gossip-key: %v\n", err)
		return 1
	}
	type row struct {
		Node    string   `json:"node"`
		Primary string   `json:"primary,omitempty"`
		Keys    []string `json:"keys,omitempty"`
		Error   string   `json:"error,omitempty"`
	}
	rows := make([]row, len(topo.Members))
	failed := 0
	for i, m := range topo.Members {
		rows[i].Node = m.Name
		var res proto.GossipKeyResult
		if err := admin.Call(ctx, m.Addr, req, &res); err != nil {
			rows[i].Error = err.Error()
			failed++
			continue
		}
		rows[i].Primary = strings.Clone(res.Primary)
		for _, k := range res.Keys {
			rows[i].Keys = append(rows[i].Keys, strings.Clone(k))
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Node < rows[j].Node })
	if nf.asJSON {
		b, _ := json.MarshalIndent(rows, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		for _, r := range rows {
			if r.Error != "" {
				fmt.Fprintf(stdout, "%s\tFAILED: %s\n", r.Node, r.Error)
				continue
			}
			fmt.Fprintf(stdout, "%s\tprimary %s\tkeys %s\n", r.Node, r.Primary, strings.Join(r.Keys, ","))
		}
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "fcapctl gossip-key %s: failed on %d of %d members; fix them and run it again (it is idempotent)\n", fs.Arg(0), failed, len(rows))
		return 1
	}
	return 0
}
