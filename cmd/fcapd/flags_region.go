package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/region"
)

// regionOptions are the flags of the region links (issue 36).
type regionOptions struct {
	name   string
	peers  peerRegions
	digest time.Duration
}

func (r *regionOptions) define(f *envFlags) {
	f.str(&r.name, "region", "FCAP_REGION", "", "this cluster's region name, 1-32 of [a-z0-9-]; empty: a single region")
	if v := f.getenv("FCAP_PEER_REGIONS"); v != "" {
		for _, s := range strings.Split(v, ";") {
			if s = strings.TrimSpace(s); s != "" {
				r.peers.specs = append(r.peers.specs, s)
			}
		}
	}
	f.duration(&r.digest, "region-digest-interval", "FCAP_REGION_DIGEST_INTERVAL", region.DefaultConfig().DigestInterval,
		"how often, on average, each peer region's link compares the partitions this node is primary of with that region by digest and ships what differs; 0: never (the catch-ups after an overflow, a restart or an outage still compare)")
	f.fs.Var(&r.peers, "peer-region", "a peer region and data-plane addresses of some of its nodes, NAME=host:port[,host:port...]; repeat for each peer region (needs --region; the peers' tokens file must hold this node's peer token) (env FCAP_PEER_REGIONS, entries separated by ';')")
}

// apply puts the regions in the node's config.
func (r *regionOptions) apply(cfg *node.Config) error {
	cfg.Region.Name = r.name
	cfg.Region.DigestInterval = r.digest
	cfg.Region.Peers = nil
	for _, s := range r.peers.specs {
		p, err := region.ParsePeer(s)
		if err != nil {
			return fmt.Errorf("--peer-region: %w", err)
		}
		cfg.Region.Peers = append(cfg.Region.Peers, p)
	}
	if err := cfg.Region.Validate(); err != nil {
		return fmt.Errorf("--region, --peer-region: %w", err)
	}
	return nil
}

// peerRegions is the repeatable --peer-region, as written (apply parses
// them, so that errors keep their sentinel): the first one given on the
// command line replaces those of FCAP_PEER_REGIONS.
type peerRegions struct {
	specs   []string
	fromCLI bool
}

func (p *peerRegions) String() string {
	if p == nil {
		return ""
	}
	return strings.Join(p.specs, ";")
}

func (p *peerRegions) Set(v string) error {
	if !p.fromCLI {
		p.specs, p.fromCLI = nil, true
	}
	p.specs = append(p.specs, v)
	return nil
}
