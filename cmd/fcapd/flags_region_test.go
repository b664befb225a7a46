package main

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fcap-io/fcap/node/region"
)

func TestRegionFlags(t *testing.T) {
	_, cfg := configFor(t, nil, nil)
	if cfg.Region.Name != "" || cfg.Region.Enabled() {
		t.Errorf("default: region %q, peers %v: want a single region", cfg.Region.Name, cfg.Region.Peers)
	}

	_, cfg = configFor(t, []string{"--region", "eu-west", "--peer-region", "us-east=10.0.0.1:7700, 10.0.0.2:7700", "--peer-region", "ap=[::1]:7700"}, nil)
	want := []region.Peer{{Name: "us-east", Seeds: []string{"10.0.0.1:7700", "10.0.0.2:7700"}}, {Name: "ap", Seeds: []string{"[::1]:7700"}}}
	if cfg.Region.Name != "eu-west" || !slices.EqualFunc(cfg.Region.Peers, want, samePeer) {
		t.Errorf("flags: region %q peers %v, want eu-west %v", cfg.Region.Name, cfg.Region.Peers, want)
	}

	e := map[string]string{"FCAP_REGION": "eu", "FCAP_PEER_REGIONS": "us=10.0.0.1:7700;ap=10.0.1.1:7700,10.0.1.2:7700;"}
	_, cfg = configFor(t, nil, e)
	want = []region.Peer{{Name: "us", Seeds: []string{"10.0.0.1:7700"}}, {Name: "ap", Seeds: []string{"10.0.1.1:7700", "10.0.1.2:7700"}}}
	if cfg.Region.Name != "eu" || !slices.EqualFunc(cfg.Region.Peers, want, samePeer) {
		t.Errorf("env: region %q peers %v, want eu %v", cfg.Region.Name, cfg.Region.Peers, want)
	}
	if cfg.Region.DigestInterval != region.DefaultConfig().DigestInterval {
		t.Errorf("default digest interval %v, want %v", cfg.Region.DigestInterval, region.DefaultConfig().DigestInterval)
	}
	_, cfg = configFor(t, []string{"--region-digest-interval", "0"}, map[string]string{"FCAP_REGION_DIGEST_INTERVAL": "1m"})
	if cfg.Region.DigestInterval != 0 {
		t.Errorf("--region-digest-interval 0: %v, want periodic digests off", cfg.Region.DigestInterval)
	}
	_, cfg = configFor(t, nil, map[string]string{"FCAP_REGION_DIGEST_INTERVAL": "90s"})
	if cfg.Region.DigestInterval != 90*time.Second {
		t.Errorf("FCAP_REGION_DIGEST_INTERVAL=90s: %v", cfg.Region.DigestInterval)
	}
	// The command line's peer regions replace the environment's.
	_, cfg = configFor(t, []string{"--peer-region", "sa=10.0.2.1:7700"}, e)
	want = []region.Peer{{Name: "sa", Seeds: []string{"10.0.2.1:7700"}}}
	if !slices.EqualFunc(cfg.Region.Peers, want, samePeer) {
		t.Errorf("flag over env: peers %v, want %v", cfg.Region.Peers, want)
	}
}

func TestRegionFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want error
	}{
		{[]string{"--region", "EU"}, nil, region.ErrName},
		{[]string{"--region", "a_b"}, nil, region.ErrName},
		{[]string{"--region", "abcdefghijklmnopqrstuvwxyz0123456"}, nil, region.ErrName},
		{[]string{"--peer-region", "us=10.0.0.1:7700"}, nil, region.ErrNoRegion},
		{[]string{"--region", "eu", "--peer-region", "eu=10.0.0.1:7700"}, nil, region.ErrOwnName},
		{[]string{"--region", "eu", "--peer-region", "us=10.0.0.1:7700", "--peer-region", "us=10.0.0.2:7700"}, nil, region.ErrDuplicate},
		{[]string{"--region", "eu", "--peer-region", "us"}, nil, region.ErrPeerSpec},
		{[]string{"--region", "eu", "--peer-region", "us="}, nil, region.ErrPeerSpec},
		{[]string{"--region", "eu", "--peer-region", "us=10.0.0.1"}, nil, region.ErrPeerSpec},
		{[]string{"--region", "eu", "--peer-region", "=10.0.0.1:7700"}, nil, region.ErrName},
		{nil, map[string]string{"FCAP_REGION": "eu", "FCAP_PEER_REGIONS": "us=10.0.0.1:7700;bad"}, region.ErrPeerSpec},
		{nil, map[string]string{"FCAP_PEER_REGIONS": "us=10.0.0.1:7700"}, region.ErrNoRegion},
	} {
		err := configErr(c.args, c.env)
		if !errors.Is(err, c.want) {
			t.Errorf("%q %v: %v, want %v", c.args, c.env, err, c.want)
		}
	}
}

func samePeer(a, b region.Peer) bool { return a.Name == b.Name && slices.Equal(a.Seeds, b.Seeds) }
