//go:build race

package client_test

// raceEnabled: the race detector makes sync.Pool drop items, so
// allocation counts are not the production ones.
const raceEnabled = true
