//go:build !unix

package client

// processCPU is not measured here: benchmarks report no cpu-ns/op.
func processCPU() int64 { return 0 }
