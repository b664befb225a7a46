package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/client/ingest"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--brokers", "k1:9092, k2:9092", "--topics", "imps", "--seeds", "n1:7000",
		"--from-time", "2026-01-02T03:04:05Z", "--workers", "8"}, env(map[string]string{"FCAP_INGEST_WORKERS": "2", "FCAP_INGEST_GROUP": "g2"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.ingest.Brokers, ","); got != "k1:9092,k2:9092" {
		t.Errorf("brokers %q", got)
	}
	if o.ingest.Workers != 8 || o.ingest.Group != "g2" {
		t.Errorf("workers %d (the flag wins over the environment), group %q (from the environment)", o.ingest.Workers, o.ingest.Group)
	}
	if want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC); !o.ingest.FromTime.Equal(want) {
		t.Errorf("from-time %v, want %v", o.ingest.FromTime, want)
	}
	if o, err := parseFlags([]string{"--brokers", "k", "--topics", "t", "--seeds", "s:7780", "--from-time", "1767225600000"}, env(nil), io.Discard); err != nil || o.ingest.FromTime.UnixMilli() != 1767225600000 {
		t.Errorf("from-time in Unix ms: %v, %v", o, err)
	}
}

func TestParseFlagsRefuses(t *testing.T) {
	for name, args := range map[string][]string{
		"no brokers":       {"--topics", "t", "--seeds", "s:7780"},
		"no topics":        {"--brokers", "k", "--seeds", "s:7780"},
		"no seeds":         {"--brokers", "k", "--topics", "t"},
		"bad from-time":    {"--brokers", "k", "--topics", "t", "--seeds", "s:7780", "--from-time", "yesterday"},
		"zero workers":     {"--brokers", "k", "--topics", "t", "--seeds", "s:7780", "--workers", "0"},
		"unknown ack":      {"--brokers", "k", "--topics", "t", "--seeds", "s:7780", "--ack", "leader"},
		"dead letter loop": {"--brokers", "k", "--topics", "t", "--seeds", "s:7780", "--dead-letter-topic", "t"},
		"extra argument":   {"--brokers", "k", "--topics", "t", "--seeds", "s:7780", "now"},
		"missing tls ca":   {"--brokers", "k", "--topics", "t", "--seeds", "s:7780", "--tls-ca", "/nonexistent/ca.pem"},
		"cert without key": {"--brokers", "k", "--topics", "t", "--seeds", "s:7780", "--kafka-tls-cert", "c.pem"},
	} {
		if _, err := parseFlags(args, env(nil), io.Discard); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Acknowledgements are replicated unless asked otherwise; the instance id
// of static membership comes from the flag, its variable or the pod name.
func TestParseFlagsAckAndInstance(t *testing.T) {
	base := []string{"--brokers", "k", "--topics", "t", "--seeds", "s:7780"}
	o, err := parseFlags(base, env(nil), io.Discard)
	if err != nil || o.ingest.Ack != ingest.AckReplicated || o.ingest.InstanceID != "" {
		t.Fatalf("defaults: ack %v, instance %q, %v", o.ingest.Ack, o.ingest.InstanceID, err)
	}
	o, err = parseFlags(append(base, "--ack", "owner"), env(map[string]string{"POD_NAME": "fcapingest-2"}), io.Discard)
	if err != nil || o.ingest.Ack != ingest.AckOwner || o.ingest.InstanceID != "fcapingest-2" {
		t.Fatalf("--ack owner, POD_NAME: ack %v, instance %q, %v", o.ingest.Ack, o.ingest.InstanceID, err)
	}
	o, err = parseFlags(append(base, "--instance-id", "i1"), env(map[string]string{"POD_NAME": "p", "FCAP_INGEST_INSTANCE_ID": "e"}), io.Discard)
	if err != nil || o.ingest.InstanceID != "i1" {
		t.Fatalf("--instance-id wins: %q, %v", o.ingest.InstanceID, err)
	}
}
