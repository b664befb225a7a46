// Package gossip is a node's view of the cluster: membership over
// hashicorp/memberlist (joining seeds, re-joining clusters that formed
// apart, each member's metadata, the gossip encryption key) and, from it,
// the current ring.Ring, rebuilt on every change and swapped in whole.
//
// Only nodes gossip. The routing table itself lives in package ring,
// which a client imports without linking any of this.
package gossip
