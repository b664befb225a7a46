package node

// nodeLog is the node's write-ahead log as replication sees it.
type nodeLog struct{ n *Node }

func (l nodeLog) Changed(key uint64) uint64 { return l.n.logChange(key) }
func (l nodeLog) Wait(seq uint64)           { l.n.waitLogged(seq) }
