package ring

import (
	"fmt"
	"testing"
)

// BenchmarkLookup routes a viewer on a 16-member ring: hash, modulo and
// slice.
func BenchmarkLookup(b *testing.B) {
	r := mustBuild(b, DefaultConfig(), members("node-", 16, Active))
	viewers := make([]string, 1024)
	for i := range viewers {
		viewers[i] = fmt.Sprintf("viewer-%08d", i)
	}
	b.ReportAllocs()
	i := 0
	var sink int
	for b.Loop() {
		p, owners := r.Lookup(viewers[i&1023])
		sink += p + int(owners[0])
		i++
	}
	_ = sink
}

// BenchmarkBuild64 builds the ring of 64 Active members with the default
// config: what every node pays once per membership change.
func BenchmarkBuild64(b *testing.B) {
	ms := members("node-", 64, Active)
	cfg := DefaultConfig()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(cfg, ms); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFromTable64 rebuilds a 64-member ring from its table, as a
// client does on each topology refresh.
func BenchmarkFromTable64(b *testing.B) {
	r := mustBuild(b, DefaultConfig(), members("node-", 64, Active))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromTable(r.Epoch(), r.Partitions(), r.Replicas(), r.Members(), r.Table()); err != nil {
			b.Fatal(err)
		}
	}
}
