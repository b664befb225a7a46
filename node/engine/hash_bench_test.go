package engine

import (
	"testing"

	"github.com/cespare/xxhash/v2"
)

var sinkU uint64

func BenchmarkKeyHash(b *testing.B) {
	c := Cap{Scope: "campaign", ID: "cmp-12", Limit: 5, Window: 100}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sinkU += keyHash(&c)
	}
}

func BenchmarkXXTwo(b *testing.B) {
	c := Cap{Scope: "campaign", ID: "cmp-12", Limit: 5, Window: 100}
	for i := 0; i < b.N; i++ {
		sinkU += mix64(xxhash.Sum64String(c.Scope) ^ xxhash.Sum64String(c.ID))
	}
}
func BenchmarkMix(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sinkU += mix64(uint64(i))
	}
}
